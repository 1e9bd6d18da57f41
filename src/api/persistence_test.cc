// The control plane over a real store file: a restart restores exactly what was acknowledged,
// reservations included; the books refuse a stored state that over-books what is booked by
// request, and report one whose memory charges exceed a card; a change written one object at a
// time is undone when a later write fails.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "api/control_plane.h"
#include "api/json_api.h"
#include "model/gpu_catalog.h"
#include "store/event_sink.h"
#include "store/store.h"
#include "store/testing/forwarding_store.h"
#include "store/testing/temp_dir.h"

namespace tessera::api {
namespace {

using nlohmann::json;

class PersistenceTest : public ::testing::Test {
 protected:
  // Someone copies a replica's stored document under another id, behind the plane's back.
  void copyReplicaDocument(const std::string& from, const std::string& to) {
    auto s = store::Store::open(dir_.file("state.db"));
    ASSERT_TRUE(s);
    auto doc = (*s)->get("replica", from);
    ASSERT_TRUE(doc && *doc);
    json copy = json::parse((*doc)->json);
    copy["placement"]["replicaId"] = to;
    store::Batch b;
    b.upsert("replica", to, copy.dump());
    ASSERT_TRUE((*s)->commit(b));
  }
  // A control plane over the store at dir_/state.db (reopened each call).
  std::unique_ptr<ControlPlane> open() {
    auto s = store::Store::open(dir_.file("state.db"));
    EXPECT_TRUE(s) << s.error().message;
    sink_.reset();
    store_ = std::move(*s);
    sink_ = std::make_unique<store::SqliteEventSink>(*store_);
    auto plane = ControlPlane::create(catalog_, clock_, config_, store_.get(), sink_.get());
    EXPECT_TRUE(plane) << plane.error().message;
    return plane ? std::move(*plane) : nullptr;
  }

  // Everything a client can read, placement times and reservations included.
  static json view(const ControlPlane& p) {
    return {{"nodes", p.listNodes()},
            {"models", p.listModels()},
            {"replicas", p.listReplicas()["replicas"]}};
  }

  static json node(const std::string& name, int gpus, const std::string& type) {
    json list = json::array();
    const bool linked = model::GpuCatalog::builtin().find(type)->nvlinkGBps.has_value();
    for (int i = 0; i < gpus; ++i) {
      list.push_back({{"type", type}, {"nvlinkGroup", linked ? 0 : -1}});
    }
    return {{"name", name},
            {"cpu", 96},
            {"hostMemory", "1Ti"},
            {"gpus", list},
            {"labels", {{"pool", "a"}}}};
  }

  store::testing::TempDir dir_;  // removed with its files after the test
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1000};
  ControlPlaneConfig config_ = [this] {
    ControlPlaneConfig c;
    // Unix time that runs with the books' clock, as the system clock runs with a steady one.
    c.eventClockMs = [this] { return 1'700'000'000'000 + clock_.nowMs(); };
    return c;
  }();
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::SqliteEventSink> sink_;
};

TEST_F(PersistenceTest, ARestartRestoresExactlyWhatWasAcknowledged) {
  json before;
  std::int64_t lastSeq = 0;
  {
    auto p = open();
    ASSERT_TRUE(p);
    ASSERT_TRUE(json_api::registerNode(*p, node("b-node", 4, "H100-80GB")));
    ASSERT_TRUE(json_api::registerNode(*p, node("a-node", 2, "A100-80GB")));
    ASSERT_TRUE(json_api::registerNode(*p, node("c-node", 1, "L4")));
    ASSERT_TRUE(json_api::putModel(*p, {{"name", "llama-70b"},
                                        {"weights", "130Gi"},
                                        {"gpusPerReplica", 2},
                                        {"priority", 5},
                                        {"sharing", "exclusive"}}));
    ASSERT_TRUE(
        json_api::putModel(*p, {{"name", "small"}, {"weightsMib", 9000}, {"computeMilli", 300}}));
    ASSERT_TRUE(
        json_api::placeReplicas(*p, {{"name", "chat"}, {"count", 2}, {"model", "llama-70b"}}));
    clock_.advance(1);  // placed a millisecond apart: the order survives the restart
    ASSERT_TRUE(json_api::placeReplicas(*p, {{"name", "tiny"}, {"count", 5}, {"model", "small"}}));
    ASSERT_TRUE(p->replicaLoaded("chat-0"));
    ASSERT_TRUE(p->removeReplica("tiny-3"));
    ASSERT_TRUE(p->setCordoned("c-node", true));
    EXPECT_FALSE(
        json_api::placeReplicas(*p, {{"name", "huge"}, {"count", 9}, {"model", "llama-70b"}}));
    before = view(*p);
    lastSeq = p->events(0, 10000)["lastSeq"];
    ASSERT_TRUE(p->state().checkInvariants());
  }
  auto p = open();
  ASSERT_TRUE(p);
  EXPECT_EQ(view(*p), before);
  EXPECT_TRUE(p->state().checkInvariants());
  // Tie-break ranks survive: b-node was registered first.
  EXPECT_LT(p->state().node(*p->state().findNode("b-node")).rank,
            p->state().node(*p->state().findNode("a-node")).rank);
  // The event history continues where it stopped.
  EXPECT_EQ(p->events(0, 10000)["lastSeq"], lastSeq);
  ASSERT_TRUE(p->removeReplica("tiny-0"));
  EXPECT_EQ(p->events(0, 10000)["lastSeq"], lastSeq + 1);
  EXPECT_EQ(p->events(lastSeq, 10)["events"][0]["type"], "ReplicaRemoved");
}

// The user's report: a's reservation lapses (charged its estimate), b is placed in the memory
// that frees, and the restart booked a afresh and refused b. Restored as booked, the books
// are the same, and b's reservation still lapses when it would have.
TEST_F(PersistenceTest, ARestartChargesALapsedReservationAsLapsed) {
  json before;
  {
    auto p = open();
    ASSERT_TRUE(p);
    ASSERT_TRUE(json_api::registerNode(*p, {{"name", "n1"}, {"gpus", {{{"type", "L4"}}}}}));
    ASSERT_TRUE(json_api::putModel(*p, {{"name", "m"}, {"weights", "10.5Gi"}}));
    ASSERT_TRUE(json_api::placeReplicas(*p, {{"replicaId", "a-0"}, {"model", "m"}}));
    clock_.advance(32'000);
    p->tick();
    EXPECT_EQ(p->getNode("n1").value()["gpus"][0]["chargedMib"], 10752);
    ASSERT_TRUE(json_api::placeReplicas(*p, {{"replicaId", "b-0"}, {"model", "m"}}));
    EXPECT_EQ(p->getNode("n1").value()["gpus"][0]["chargedMib"], 10752 + 12903);
    clock_.advance(5'000);
    before = {{"nodes", p->listNodes()}, {"replicas", p->listReplicas()}};
  }
  auto p = open();
  ASSERT_TRUE(p);
  EXPECT_EQ(json({{"nodes", p->listNodes()}, {"replicas", p->listReplicas()}}), before);
  EXPECT_TRUE(p->state().checkInvariants());
  // b-0 was placed 5 s ago: its reservation lapses 25 s from now, not 30.
  clock_.advance(25'000);
  p->tick();
  EXPECT_EQ(p->getReplica("b-0").value()["reservationActive"], false);
  EXPECT_EQ(p->getNode("n1").value()["gpus"][0]["chargedMib"], 2 * 10752);
}

// Compute, MIG slices, exclusive cards, CPU and host memory are booked by request and come
// back exactly: a store that over-commits one of them is not what was booked.
TEST_F(PersistenceTest, AStoredStateThatWouldOverBookComputeIsRefusedNamingTheReplica) {
  {
    auto p = open();
    ASSERT_TRUE(p);
    ASSERT_TRUE(json_api::registerNode(*p, node("n", 1, "A100-80GB")));
    ASSERT_TRUE(json_api::placeReplicas(
        *p, {{"replicaId", "r1"},
             {"model", {{"name", "m"}, {"weightsMib", 5000}, {"computeMilli", 600}}}}));
  }
  // Someone copies r1's document under another name: both cannot have 60 % of the one GPU.
  copyReplicaDocument("r1", "r2");
  auto s = store::Store::open(dir_.file("state.db"));
  ASSERT_TRUE(s);
  auto plane = ControlPlane::create(catalog_, clock_, {}, s->get());
  ASSERT_FALSE(plane);
  EXPECT_NE(plane.error().message.find("replica r2"), std::string::npos) << plane.error().message;
  EXPECT_NE(plane.error().message.find("compute"), std::string::npos) << plane.error().message;
  EXPECT_NE(plane.error().message.find("state.db"), std::string::npos) << plane.error().message;
}

// Memory follows telemetry, which is not stored: replicas admitted against observed usage may
// not fit their estimates. They are on the card all the same: restored, the GPU shows negative
// free memory, the event says so, and nothing more is placed there.
TEST_F(PersistenceTest, RestoredReplicasThatOverCommitMemoryAreRestoredAndReported) {
  {
    auto p = open();
    ASSERT_TRUE(p);
    ASSERT_TRUE(json_api::registerNode(*p, node("n", 1, "A100-80GB")));
    ASSERT_TRUE(json_api::placeReplicas(
        *p, {{"replicaId", "r1"}, {"model", {{"name", "m"}, {"weightsMib", 50000}}}}));
  }
  copyReplicaDocument("r1", "r2");
  auto p = open();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->listReplicas()["replicas"].size(), 2u);
  const json gpu = p->getNode("n").value()["gpus"][0];
  EXPECT_LT(gpu["freeMib"].get<std::int64_t>(), 0) << gpu;
  const json events = p->events(0, 100)["events"];
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["type"], "GpuOverCommitted");
  EXPECT_EQ(events.back()["subject"], "n/0");
  EXPECT_FALSE(json_api::placeReplicas(
      *p, {{"replicaId", "r3"}, {"model", {{"name", "m3"}, {"weightsMib", 100}}}}));
}

TEST_F(PersistenceTest, RefusedChangesWriteNothing) {
  auto p = open();
  ASSERT_TRUE(p);
  ASSERT_TRUE(json_api::registerNode(*p, node("n", 1, "A100-80GB")));
  auto rev = store_->loadAll();
  ASSERT_TRUE(rev);
  EXPECT_FALSE(json_api::registerNode(*p, node("n", 1, "A100-80GB")));        // exists
  EXPECT_FALSE(json_api::registerNode(*p, {{"name", "x"}, {"gpus", 3}}));     // malformed
  EXPECT_FALSE(json_api::putModel(*p, {{"name", "m"}, {"weightsMib", -1}}));  // bad value
  EXPECT_FALSE(p->removeReplica("nobody"));
  auto after = store_->loadAll();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->revision, rev->revision);
  EXPECT_EQ(after->documents, rev->documents);
}

// Events are kept by count and by age, in memory and in the store: a month of churn does not
// grow the log. The newest events survive a restart, the old ones are gone from both.
TEST_F(PersistenceTest, EventsAreRetainedByCountAndByAge) {
  Millis calendar = 1'700'000'000'000;
  ControlPlaneConfig config;
  config.eventHistory = 3000;
  config.eventMaxAgeMs = 3600'000;  // an hour
  config.eventClockMs = [&] { return calendar; };
  auto s = store::Store::open(dir_.file("state.db"));
  ASSERT_TRUE(s) << s.error().message;
  store_ = std::move(*s);
  sink_ = std::make_unique<store::SqliteEventSink>(*store_);
  auto created = ControlPlane::create(catalog_, clock_, config, store_.get(), sink_.get());
  ASSERT_TRUE(created) << created.error().message;
  auto plane = std::move(*created);
  ASSERT_TRUE(json_api::registerNode(*plane, node("n1", 1, "L4")));
  // 2,500 cordon/uncordon events, one a minute: about 42 hours.
  for (int i = 0; i < 2500; ++i) {
    calendar += 60'000;
    ASSERT_TRUE(plane->setCordoned("n1", i % 2 == 0));
  }
  const json kept = plane->events(0, 10'000)["events"];
  ASSERT_FALSE(kept.empty());
  EXPECT_LE(kept.size(), 61u);  // the last hour's, not 2,500
  EXPECT_GE(kept.front()["timeMs"].get<Millis>(), calendar - 3600'000);
  auto snapshot = store_->loadAll();
  ASSERT_TRUE(snapshot) << snapshot.error().message;
  EXPECT_LT(snapshot->events.size(), 1024u + 61u);  // compacted every 1024 events
  EXPECT_GT(snapshot->firstRetainedSeq, 1);
  // A restart keeps the retention.
  plane.reset();
  created = ControlPlane::create(catalog_, clock_, config, store_.get(), sink_.get());
  ASSERT_TRUE(created) << created.error().message;
  const json restored = (*created)->events(0, 10'000)["events"];
  EXPECT_EQ(restored.size(), kept.size());
  EXPECT_EQ(restored.back()["seq"], kept.back()["seq"]);
}

// An event sink over the store's events table that refuses the appends it is told to.
class FlakySink final : public store::EventSink {
 public:
  explicit FlakySink(store::Store& s) : inner_(s) {}
  Result<std::int64_t> append(std::string_view kind, std::string_view json, Millis timeMs,
                              std::int64_t minSeq) override {
    ++appends;
    if (refuse > 0) {
      --refuse;
      return fail(Error::internal("disk full"));
    }
    return inner_.append(kind, json, timeMs, minSeq);
  }
  Result<store::EventHistory> recent(std::size_t limit) const override {
    return inner_.recent(limit);
  }
  Result<std::int64_t> compactBefore(std::int64_t seq) override {
    return inner_.compactBefore(seq);
  }
  std::string describe() const override { return "flaky"; }
  int refuse = 0;
  int appends = 0;

 private:
  store::SqliteEventSink inner_;
};

// A state store whose commits fail (the disk is gone) while `broken` is set.
class BreakableStore final : public store::testing::ForwardingStore {
 public:
  explicit BreakableStore(store::Store& s) : ForwardingStore(s) {}
  Result<void> commitAtomically(const store::WriteSet& batch) override {
    if (broken) return fail(Error::internal("I/O error"));
    return ForwardingStore::commitAtomically(batch);
  }
  bool broken = false;
};

std::vector<std::pair<std::int64_t, std::string>> seqAndType(const json& events) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  for (const json& e : events["events"]) out.emplace_back(e["seq"], e["type"]);
  return out;
}

// The documents commit on their own; the sink's failure is counted, never the operation's.
TEST_F(PersistenceTest, AnEventTheSinkRefusesLeavesTheOperationDoneAndCounted) {
  auto s = store::Store::open(dir_.file("state.db"));
  ASSERT_TRUE(s) << s.error().message;
  store_ = std::move(*s);
  FlakySink sink(*store_);
  auto created = ControlPlane::create(catalog_, clock_, config_, store_.get(), &sink);
  ASSERT_TRUE(created) << created.error().message;
  auto& p = **created;
  sink.refuse = 1;
  ASSERT_TRUE(json_api::registerNode(p, node("n", 1, "A100-80GB")));  // its event is refused
  EXPECT_TRUE(store_->get("node", "n").value());                       // the document is stored
  EXPECT_NE(p.metricsText().find("tessera_event_sink_errors_total 1"), std::string::npos)
      << p.metricsText();
  // The event is in memory (GET /events), with a seq of its own.
  auto seen = seqAndType(p.events(0, 100));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].second, "NodeRegistered");
  // The next ones are stored again, after it: seqs stay unique and increasing.
  ASSERT_TRUE(p.setCordoned("n", true));
  ASSERT_TRUE(p.setCordoned("n", false));
  seen = seqAndType(p.events(0, 100));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_LT(seen[0].first, seen[1].first);
  EXPECT_LT(seen[1].first, seen[2].first);
  auto log = store_->eventsAfter(0, 100);
  ASSERT_TRUE(log) << log.error().message;
  ASSERT_EQ(log->events.size(), 2u);  // what the sink stored
  EXPECT_EQ(log->events[0].seq, seen[1].first);
  EXPECT_EQ(log->events[1].seq, seen[2].first);
  EXPECT_NE(p.metricsText().find("tessera_event_sink_errors_total 1"), std::string::npos);
}

// The events live apart from the documents: recording one commits no document revision.
TEST_F(PersistenceTest, EventsAreWrittenApartFromTheDocuments) {
  auto p = open();
  ASSERT_TRUE(p);
  ASSERT_TRUE(json_api::registerNode(*p, node("n", 1, "A100-80GB")));
  // An event that changes no document (a replica that does not fit) is no commit at all.
  ASSERT_FALSE(json_api::placeReplicas(
      *p, {{"replicaId", "giant-0"}, {"model", {{"name", "giant"}, {"weightsMib", 400000}}}}));
  auto snapshot = store_->loadAll();
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->revision, 1);  // the node's document: one commit
  ASSERT_EQ(snapshot->events.size(), 2u);
  EXPECT_EQ(json::parse(snapshot->events[0].json)["type"], "NodeRegistered");
  EXPECT_EQ(json::parse(snapshot->events[1].json)["type"], "ReplicaUnplaceable");
}

// A restart restores what the sink kept, in order, and numbers on after it.
TEST_F(PersistenceTest, ARestartRestoresTheSinksEventsInOrderAndSeqsContinue) {
  std::vector<std::pair<std::int64_t, std::string>> before;
  {
    auto p = open();
    ASSERT_TRUE(p);
    ASSERT_TRUE(json_api::registerNode(*p, node("n", 2, "A100-80GB")));
    ASSERT_TRUE(json_api::putModel(*p, {{"name", "small"}, {"weightsMib", 9000}}));
    ASSERT_TRUE(json_api::placeReplicas(*p, {{"name", "r"}, {"count", 1}, {"model", "small"}}));
    ASSERT_TRUE(p->removeReplica("r-0"));
    before = seqAndType(p->events(0, 100));
  }
  ASSERT_EQ(before.size(), 4u);
  auto p = open();
  ASSERT_TRUE(p);
  EXPECT_EQ(seqAndType(p->events(0, 100)), before);
  ASSERT_TRUE(p->setCordoned("n", true));
  const auto after = seqAndType(p->events(before.back().first, 100));
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].first, before.back().first + 1);
  EXPECT_EQ(after[0].second, "NodeCordoned");
}

// A commit the store refused records no event, in memory or in the sink.
TEST_F(PersistenceTest, ARefusedCommitRecordsNoEvent) {
  auto s = store::Store::open(dir_.file("state.db"));
  ASSERT_TRUE(s) << s.error().message;
  store_ = std::move(*s);
  BreakableStore state(*store_);
  FlakySink sink(*store_);
  auto created = ControlPlane::create(catalog_, clock_, config_, &state, &sink);
  ASSERT_TRUE(created) << created.error().message;
  auto& p = **created;
  ASSERT_TRUE(json_api::registerNode(p, node("n", 1, "A100-80GB")));
  const json before = p.events(0, 100);
  const int appends = sink.appends;
  state.broken = true;
  EXPECT_FALSE(json_api::registerNode(p, node("m", 1, "A100-80GB")));
  EXPECT_FALSE(p.setCordoned("n", true));
  EXPECT_EQ(sink.appends, appends);
  EXPECT_EQ(p.events(0, 100), before);
  EXPECT_FALSE(store_->get("node", "m").value());
  // Once the store takes writes again, the next event follows the last one directly.
  state.broken = false;
  ASSERT_TRUE(p.setCordoned("n", true));
  const auto after = seqAndType(p.events(before["lastSeq"], 100));
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].first, before["lastSeq"].get<std::int64_t>() + 1);
  EXPECT_NE(p.metricsText().find("tessera_event_sink_errors_total 0"), std::string::npos);
}

// The SQLite store behind the one-object-at-a-time path (as the API server is): the
// `failAt`-th put or remove from now on fails (0: none does).
class OneByOneStore final : public store::testing::ForwardingStore {
 public:
  explicit OneByOneStore(store::Store& s) : ForwardingStore(s, /*atomic=*/false) {}
  Result<store::Version> put(std::string_view kind, std::string_view name, std::string_view json,
                             const store::Precondition& pre = {}) override {
    TESSERA_RETURN_IF_ERROR(admit());
    return ForwardingStore::put(kind, name, json, pre);
  }
  Result<void> remove(std::string_view kind, std::string_view name,
                      const store::Precondition& pre = {}) override {
    TESSERA_RETURN_IF_ERROR(admit());
    return ForwardingStore::remove(kind, name, pre);
  }
  int failAt = 0;

 private:
  Result<void> admit() {
    if (failAt > 0 && --failAt == 0) return fail(Error::internal("I/O error (test)"));
    return {};
  }
};

// An operation that writes several documents one object at a time (placing three replicas, a
// forced removal of a node with its replicas) and whose later write fails leaves the store and
// memory as they were: the earlier writes are undone, and a restart reads the same state.
TEST_F(PersistenceTest, AChangeWrittenObjectByObjectIsUndoneWhenALaterWriteFails) {
  json before;
  std::map<std::string, std::string> stored;
  // The view with its replicas by id (a node's forgotten removal puts them back in another
  // order).
  auto sorted = [](json v) {
    std::sort(v["replicas"].begin(), v["replicas"].end(),
              [](const json& x, const json& y) { return x["replica"] < y["replica"]; });
    return v;
  };
  auto documents = [this] {
    std::map<std::string, std::string> out;
    const auto all = store_->loadAll();
    EXPECT_TRUE(all) << all.error().message;
    if (!all) return out;
    for (const store::Document& d : all->documents) out[d.kind + "/" + d.name] = d.json;
    return out;
  };
  {
    auto s = store::Store::open(dir_.file("state.db"));
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(*s);
    OneByOneStore state(*store_);
    auto created = ControlPlane::create(catalog_, clock_, config_, &state, nullptr);
    ASSERT_TRUE(created) << created.error().message;
    auto& p = **created;
    ASSERT_TRUE(json_api::registerNode(p, node("n", 2, "A100-80GB")));
    ASSERT_TRUE(json_api::putModel(p, {{"name", "small"}, {"weightsMib", 9000}, {"computeMilli", 300}}));
    ASSERT_TRUE(json_api::placeReplicas(p, {{"name", "tiny"}, {"count", 3}, {"model", "small"}}));
    before = view(p);
    stored = documents();
    ASSERT_EQ(stored.size(), 5u);  // the node, the model, three replicas

    state.failAt = 2;  // the second of three replicas
    EXPECT_FALSE(json_api::placeReplicas(p, {{"name", "more"}, {"count", 3}, {"model", "small"}}));
    EXPECT_EQ(view(p), before);
    EXPECT_EQ(documents(), stored);

    state.failAt = 3;  // the node goes, then the first replica, then the second fails
    auto removed = p.removeNode("n", /*force=*/true);
    ASSERT_FALSE(removed);
    EXPECT_EQ(removed.error().code, ErrorCode::kInternal) << removed.error().message;
    // Every earlier write was undone: the error says so (it would not if an undo had failed).
    EXPECT_NE(removed.error().message.find("nothing was changed"), std::string::npos)
        << removed.error().message;
    EXPECT_EQ(sorted(view(p)), sorted(before));
    EXPECT_EQ(documents(), stored);
    EXPECT_TRUE(p.state().checkInvariants());
  }
  auto p = open();
  ASSERT_TRUE(p);
  EXPECT_EQ(sorted(view(*p)), sorted(before));
  ASSERT_TRUE(p->removeNode("n", /*force=*/true));
  EXPECT_EQ(documents().size(), 1u);  // the model
}

}  // namespace
}  // namespace tessera::api
