// Events are self-contained: a log of every event applied to a ClusterState replays onto a
// fresh state, whose clock reads another time, and gives the same books. And the node patch
// (NodePatched) changes only what it names.
//
// The replay test prints its master seed; TESSERA_SEED=<seed> runs it again, and
// TESSERA_FUZZ_ITERATIONS=<n> runs n cases instead of the default.

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/gpu_catalog.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/testing/decision_checks.h"
#include "sched/testing/random_cluster.h"

namespace tessera::sched {
namespace {

using testkit::Rng;

// ---- Comparing books by name ---------------------------------------------------------------

std::string gpuKey(const ClusterState& s, GpuId g) {
  return s.node(s.gpu(g).node).spec.name + "/" + s.gpu(g).spec.id;
}

std::vector<std::string> replicaNames(const ClusterState& s, const std::vector<ReplicaId>& ids) {
  std::vector<std::string> out;
  for (ReplicaId r : ids) out.push_back(s.replica(r).placement.replicaId);
  std::sort(out.begin(), out.end());
  return out;
}

// Every difference between two states' books, named (dense ids may differ; tombstones and
// generations are not books).
std::vector<std::string> booksDifferences(const ClusterState& a, const ClusterState& b) {
  std::vector<std::string> out;
  auto differ = [&](bool same, const std::string& what) {
    if (!same) out.push_back(what);
  };
  differ(a.liveNodeCount() == b.liveNodeCount(), "live node count");
  differ(a.liveGpuCount() == b.liveGpuCount(), "live GPU count");
  differ(a.liveReplicaCount() == b.liveReplicaCount(), "live replica count");
  differ(a.activeReservationCount() == b.activeReservationCount(), "active reservation count");
  differ(a.nextReservationExpiryMs() == b.nextReservationExpiryMs(), "next reservation expiry");
  for (const NodeRecord& n : a.nodes()) {
    if (n.removed) continue;
    const std::string& name = n.spec.name;
    const auto other = b.findNode(name);
    if (!other) {
      out.push_back("node " + name + " is missing");
      continue;
    }
    const NodeRecord& m = b.node(*other);
    differ(n.spec.labels == m.spec.labels && n.spec.taints.size() == m.spec.taints.size() &&
               n.spec.healthy == m.spec.healthy && n.spec.cordoned == m.spec.cordoned &&
               n.spec.cachedModels == m.spec.cachedModels && n.spec.cpuMilli == m.spec.cpuMilli &&
               n.spec.hostMemoryMib == m.spec.hostMemoryMib && n.rank == m.rank,
           "node " + name + ": spec or rank");
    for (std::size_t t = 0; t < std::min(n.spec.taints.size(), m.spec.taints.size()); ++t) {
      differ(n.spec.taints[t].key == m.spec.taints[t].key &&
                 n.spec.taints[t].value == m.spec.taints[t].value &&
                 n.spec.taints[t].effect == m.spec.taints[t].effect,
             "node " + name + ": taint " + std::to_string(t));
    }
    differ(n.bookedCpuMilli == m.bookedCpuMilli && n.bookedHostMemoryMib == m.bookedHostMemoryMib,
           "node " + name + ": booked CPU or host memory");
    differ(replicaNames(a, n.replicas) == replicaNames(b, m.replicas),
           "node " + name + ": replicas");
    differ(n.gpuIds.size() == m.gpuIds.size(), "node " + name + ": GPU count");
    for (GpuId g : n.gpuIds) {
      const GpuRecord& x = a.gpu(g);
      const std::string where = gpuKey(a, g);
      const auto og = b.findGpu(name, x.spec.id);
      if (!og) {
        out.push_back(where + " is missing");
        continue;
      }
      const GpuRecord& y = b.gpu(*og);
      differ(x.freeMemoryMib() == y.freeMemoryMib(),
             where + ": free memory " + std::to_string(x.freeMemoryMib()) + " vs " +
                 std::to_string(y.freeMemoryMib()));
      differ(x.freeComputeMilli() == y.freeComputeMilli(), where + ": free compute");
      differ(x.chargedMib == y.chargedMib && x.foreignMib == y.foreignMib,
             where + ": charged or foreign memory");
      differ(x.bookedBandwidthGBps == y.bookedBandwidthGBps, where + ": booked bandwidth");
      differ(x.exclusive == y.exclusive && x.migSlotsUsed == y.migSlotsUsed,
             where + ": exclusive hold or MIG slices");
      differ(x.healthy() == y.healthy(), where + ": health");
      differ(x.hasTelemetry == y.hasTelemetry && x.telemetryUsedMib == y.telemetryUsedMib &&
                 x.utilizationMilli == y.utilizationMilli,
             where + ": telemetry");
      differ(x.telemetryAtMs == y.telemetryAtMs, where + ": telemetry time " +
                                                     std::to_string(x.telemetryAtMs) + " vs " +
                                                     std::to_string(y.telemetryAtMs));
      differ(replicaNames(a, x.replicas) == replicaNames(b, y.replicas), where + ": replicas");
      auto instances = [](const ClusterState& s, const GpuRecord& r) {
        std::vector<std::tuple<int, int, std::string, bool>> v;
        for (const MigInstance& i : r.migInstances) {
          v.emplace_back(i.profile, i.start,
                         i.occupant < 0 ? std::string() : s.replica(i.occupant).placement.replicaId,
                         i.dynamic);
        }
        std::sort(v.begin(), v.end());
        return v;
      };
      differ(instances(a, x) == instances(b, y), where + ": MIG instances");
    }
  }
  for (const ReplicaRecord& r : a.replicas()) {
    if (r.removed) continue;
    const std::string& id = r.placement.replicaId;
    const auto other = b.findReplica(id);
    if (!other) {
      out.push_back("replica " + id + " is missing");
      continue;
    }
    const ReplicaRecord& q = b.replica(*other);
    differ(a.node(r.placement.node).spec.name == b.node(q.placement.node).spec.name,
           "replica " + id + ": node");
    differ(r.placement.gpus.size() == q.placement.gpus.size(), "replica " + id + ": GPU count");
    for (std::size_t i = 0; i < std::min(r.placement.gpus.size(), q.placement.gpus.size()); ++i) {
      const GpuAssignment& x = r.placement.gpus[i];
      const GpuAssignment& y = q.placement.gpus[i];
      differ(gpuKey(a, x.gpu) == gpuKey(b, y.gpu) && x.estimateMib == y.estimateMib &&
                 x.reservedMib == y.reservedMib && x.computeMilli == y.computeMilli &&
                 x.bandwidthGBps == y.bandwidthGBps && x.migProfile == y.migProfile &&
                 x.migStart == y.migStart,
             "replica " + id + ": GPU share " + std::to_string(i));
    }
    differ(r.phase == q.phase, "replica " + id + ": phase");
    differ(r.placedAtMs == q.placedAtMs, "replica " + id + ": placed at " +
                                             std::to_string(r.placedAtMs) + " vs " +
                                             std::to_string(q.placedAtMs));
    differ(r.lastActiveMs == q.lastActiveMs, "replica " + id + ": last active");
    differ(r.reservationActive == q.reservationActive,
           "replica " + id + ": reservation " + (r.reservationActive ? "active" : "lapsed") +
               " vs " + (q.reservationActive ? "active" : "lapsed"));
    differ(r.chargeMib == q.chargeMib && r.attributedMib == q.attributedMib,
           "replica " + id + ": charge or attributed usage");
    differ(r.placement.cpuMilli == q.placement.cpuMilli &&
               r.placement.hostMemoryMib == q.placement.hostMemoryMib &&
               r.placement.mode == q.placement.mode && r.placement.priority == q.placement.priority,
           "replica " + id + ": booking");
  }
  return out;
}

// ---- A random history, recorded ------------------------------------------------------------

struct Logged {
  Event event;
  bool accepted = false;
};

class History {
 public:
  History(const model::GpuCatalog& catalog, testkit::Engines& engines, std::uint64_t seed)
      : rng_(seed),
        catalog_(catalog),
        options_(randomOptions(rng_)),
        clock_(rng_.between(0, 1'000'000)),
        state_(catalog, clock_, options_),
        engine_(engines.fresh(options_)) {
    testkit::ClusterShape shape;
    shape.maxNodes = 8;
    for (const auto& n : testkit::randomCluster(rng_, catalog, shape)) record(NodeAdded{n});
    for (int i = 0, n = static_cast<int>(rng_.between(2, 6)); i < n; ++i) {
      deployments_.push_back(
          testkit::randomDeployment(rng_, catalog, "m" + std::to_string(i), requestShape_));
    }
  }

  void step() {
    switch (rng_.weighted({30, 8, 5, 3, 14, 10, 4, 6, 2, 2, 3})) {
      case 0:
        place();
        break;
      case 1:
        replicaEvent<ReplicaLoaded>();
        break;
      case 2:
        replicaEvent<ReplicaUnloaded>();
        break;
      case 3:
        replicaEvent<ReplicaActivity>();
        break;
      case 4:
        telemetry();
        break;
      case 5:
        advanceClock();
        break;
      case 6:
        updateNode();
        break;
      case 7:
        patchNode();
        break;
      case 8:
        removeNode();
        break;
      case 9:
        addNode();
        break;
      default:
        restoreReplica();
        break;
    }
  }

  const ClusterState& state() const { return state_; }
  const EngineOptions& options() const { return options_; }
  const std::vector<Logged>& log() const { return log_; }
  Millis now() const { return clock_.nowMs(); }

 private:
  static EngineOptions randomOptions(Rng& rng) {
    EngineOptions o;
    o.memorySafetyFactor = rng.pick(std::vector<double>{1.0, 1.2, 1.5});
    o.reservationTtlMs = rng.pick(std::vector<Millis>{1, 500, 30'000});
    o.migCreation = !rng.chance(0.25);
    return o;
  }

  void record(Event e) {
    const bool accepted = state_.apply(e).has_value();
    log_.push_back({std::move(e), accepted});
  }

  std::vector<std::string> liveReplicas() const { return testkit::liveReplicaIds(state_); }
  std::vector<NodeId> liveNodes() const { return testkit::liveNodes(state_); }

  model::NodeSpec specOf(NodeId id) const {
    const NodeRecord& n = state_.node(id);
    model::NodeSpec spec = n.spec;
    spec.gpus.clear();
    for (GpuId g : n.gpuIds) spec.gpus.push_back(state_.gpu(g).spec);
    return spec;
  }

  void place() {
    model::PlacementRequest r = rng_.pick(deployments_);
    r.replicaId = "r" + std::to_string(nextId_++);
    const Decision d = engine_->decide(state_, r);
    if (d.placement) record(replicaPlaced(state_, *d.placement, clock_.nowMs()));
  }

  template <typename E>
  void replicaEvent() {
    const auto ids = liveReplicas();
    E e;
    e.replicaId = ids.empty() || rng_.chance(0.05) ? "ghost" : rng_.pick(ids);
    if constexpr (std::is_same_v<E, ReplicaActivity>) {
      e.atMs = clock_.nowMs() + rng_.between(-1000, 1000);
    }
    record(e);
  }

  void telemetry() {
    std::vector<GpuId> gpus;
    for (NodeId n : liveNodes()) {
      for (GpuId g : state_.node(n).gpuIds) gpus.push_back(g);
    }
    if (gpus.empty()) return;
    GpuTelemetry t = testkit::randomTelemetry(rng_, state_, rng_.pick(gpus));
    t.atMs = clock_.nowMs();
    record(t);
  }

  void advanceClock() {
    const auto next = state_.nextReservationExpiryMs();
    if (next && rng_.chance(0.4)) {
      clock_.set(std::max(clock_.nowMs(), *next + rng_.between(-1, 0)));
    } else {
      clock_.advance(rng_.between(0, 2 * options_.reservationTtlMs));
    }
    if (rng_.chance(0.85)) record(ReservationsExpired{clock_.nowMs()});
  }

  void updateNode() {
    const auto nodes = liveNodes();
    if (nodes.empty()) return;
    model::NodeSpec spec = specOf(rng_.pick(nodes));
    spec.cordoned = rng_.chance(0.3);
    spec.healthy = !rng_.chance(0.1);
    spec.taints.clear();
    if (rng_.chance(0.3)) spec.taints.push_back(rng_.pick(testkit::taintPool()));
    for (auto& g : spec.gpus) {
      if (rng_.chance(0.2)) g.healthy = !g.healthy;
    }
    if (rng_.chance(0.2)) spec.cpuMilli = rng_.between(0, 64'000);  // may be refused
    record(NodeUpdated{spec});
  }

  void patchNode() {
    const auto nodes = liveNodes();
    NodePatched p;
    p.name = nodes.empty() || rng_.chance(0.05) ? "no-such-node"
                                                : state_.node(rng_.pick(nodes)).spec.name;
    if (rng_.chance(0.5)) p.cordoned = rng_.chance(0.5);
    if (rng_.chance(0.3)) p.healthy = !rng_.chance(0.2);
    if (rng_.chance(0.3)) {
      p.cachedModels.emplace();
      for (const auto& d : deployments_) {
        if (rng_.chance(0.5)) p.cachedModels->push_back(d.model.name);
      }
    }
    if (rng_.chance(0.2)) {
      const auto& [k, v] = rng_.pick(testkit::labelPool());
      p.labels = std::map<std::string, std::string>{{k, v}};
    }
    if (rng_.chance(0.2)) p.taints = std::vector<model::Taint>{};
    if (const auto id = state_.findNode(p.name); id && rng_.chance(0.4)) {
      const auto& gpus = state_.node(*id).gpuIds;
      if (!gpus.empty()) p.gpuHealthy[state_.gpu(rng_.pick(gpus)).spec.id] = rng_.chance(0.7);
      if (rng_.chance(0.05)) p.gpuHealthy["no-such-gpu"] = true;  // refused whole
    }
    record(p);
  }

  void removeNode() {
    const auto nodes = liveNodes();
    if (nodes.empty()) return;
    record(NodeRemoved{state_.node(rng_.pick(nodes)).spec.name, rng_.chance(0.5)});
  }

  void addNode() {
    testkit::ClusterShape shape;
    // A new name, or a removed node's name (its slot is reused).
    std::string name = "node-x" + std::to_string(nextId_++);
    for (const NodeRecord& n : state_.nodes()) {
      if (n.removed && rng_.chance(0.5)) name = n.spec.name;
    }
    record(NodeAdded{testkit::randomNode(rng_, catalog_, name, shape)});
  }

  // A rollback as the control plane does one: unload, then put back as it was booked.
  void restoreReplica() {
    const auto ids = liveReplicas();
    if (ids.empty()) return;
    const ReplicaRecord before = state_.replica(*state_.findReplica(rng_.pick(ids)));
    const NamedPlacement named = state_.named(before.placement);
    record(ReplicaUnloaded{before.placement.replicaId});
    record(ReplicaRestored{named, before.placedAtMs, before.reservationActive,
                           before.phase == ReplicaPhase::kLoaded, before.attributedMib,
                           clock_.nowMs()});
  }

  Rng rng_;
  const model::GpuCatalog& catalog_;
  EngineOptions options_;
  ManualClock clock_;
  ClusterState state_;
  std::unique_ptr<PlacementEngine> engine_;
  testkit::RequestShape requestShape_;
  std::vector<model::PlacementRequest> deployments_;
  std::vector<Logged> log_;
  int nextId_ = 0;
};

TEST(EventReplay, ALogReplayedOnAFreshStateWithAnotherClockGivesTheSameBooks) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  testkit::Engines engines;
  const std::uint64_t master = testkit::fuzzSeed();
  std::cout << "master seed " << master << " (TESSERA_SEED=" << master << ")\n";
  const int cases = testkit::fuzzIterations(100);
  int placed = 0, refused = 0, lapsed = 0;
  for (int c = 0; c < cases; ++c) {
    const std::uint64_t seed = testkit::caseSeed(master, c);
    SCOPED_TRACE("case seed " + std::to_string(seed));
    History history(catalog, engines, seed);
    for (int i = 0; i < 250; ++i) history.step();
    const ClusterState& original = history.state();
    ASSERT_TRUE(original.checkInvariants() || original.checkInvariants().error().message.find(
                                                  "memory over-committed") != std::string::npos)
        << original.checkInvariants().error().message;

    // The replay's clock is far from the recording's: apply must not read it.
    ManualClock elsewhere(history.now() + 7'777'777'777);
    ClusterState replay(catalog, elsewhere, history.options());
    for (std::size_t i = 0; i < history.log().size(); ++i) {
      const Logged& l = history.log()[i];
      const auto outcome = replay.apply(l.event);
      ASSERT_EQ(outcome.has_value(), l.accepted)
          << "event " << i << " (" << eventName(l.event) << ") was "
          << (l.accepted ? "accepted" : "refused") << " when recorded, and "
          << (outcome ? "accepted" : "refused: " + outcome.error().message) << " on replay";
      placed += l.accepted && std::holds_alternative<ReplicaPlaced>(l.event);
      refused += !l.accepted;
    }
    const auto differences = booksDifferences(original, replay);
    EXPECT_TRUE(differences.empty())
        << differences.size()
        << " differences, first: " << (differences.empty() ? "" : differences.front());
    EXPECT_TRUE(booksDifferences(replay, original).empty());
    for (const ReplicaRecord& r : original.replicas()) lapsed += !r.removed && !r.reservationActive;
    if (HasFailure()) return;
  }
  // The histories exercised what the test is about.
  EXPECT_GT(placed, cases);
  EXPECT_GT(refused, 0);
  EXPECT_GT(lapsed, 0);
  std::cout << cases << " histories: " << placed << " placements, " << refused
            << " refused events replayed as refused, " << lapsed << " lapsed reservations\n";
}

// ---- Names, not ids ------------------------------------------------------------------------

model::NodeSpec l4Node(const std::string& name, int gpus) {
  model::NodeSpec n;
  n.name = name;
  n.cpuMilli = 32'000;
  n.hostMemoryMib = 128 * 1024;
  for (int i = 0; i < gpus; ++i) {
    model::GpuSpec g;
    g.id = "gpu" + std::to_string(i);
    g.type = "L4";
    n.gpus.push_back(g);
  }
  return n;
}

// Two states that hold the same nodes, added in another order, number them otherwise; one
// event books the same named node and GPU in both.
TEST(EventReplay, APlacementEventBooksTheNamedNodeWhateverItsId) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock(100);
  ClusterState first(catalog, clock), second(catalog, clock);
  ASSERT_TRUE(first.apply(NodeAdded{l4Node("a", 2)}));
  ASSERT_TRUE(first.apply(NodeAdded{l4Node("b", 2)}));
  ASSERT_TRUE(second.apply(NodeAdded{l4Node("b", 2)}));
  ASSERT_TRUE(second.apply(NodeAdded{l4Node("a", 2)}));
  ASSERT_NE(*first.findNode("b"), *second.findNode("b"));

  Placement p;
  p.replicaId = "r";
  p.deployment = p.modelName = "m";
  p.node = *first.findNode("b");
  p.gpus.push_back({*first.findGpu("b", "gpu1"), 4'000, 5'000, 200, 0, -1, -1});
  const ReplicaPlaced event = replicaPlaced(first, p, 42);
  EXPECT_EQ(event.placement.node, "b");
  ASSERT_EQ(event.placement.gpus.size(), 1u);
  EXPECT_EQ(event.placement.gpus[0].gpuId, "gpu1");

  for (ClusterState* s : {&first, &second}) {
    ASSERT_TRUE(s->apply(event));
    const ReplicaRecord& r = s->replica(*s->findReplica("r"));
    EXPECT_EQ(s->node(r.placement.node).spec.name, "b");
    EXPECT_EQ(r.placement.gpus[0].gpu, *s->findGpu("b", "gpu1"));
    EXPECT_EQ(r.placedAtMs, 42);
    EXPECT_EQ(s->gpu(*s->findGpu("b", "gpu1")).freeMemoryMib(), 24'576 - 5'000);
    EXPECT_EQ(s->gpu(*s->findGpu("a", "gpu1")).freeMemoryMib(), 24'576);
  }
}

TEST(EventReplay, UnknownNamesAreRefusedAndChangeNothing) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock(0);
  ClusterState s(catalog, clock);
  ASSERT_TRUE(s.apply(NodeAdded{l4Node("a", 1)}));
  NamedPlacement p;
  p.replicaId = "r";
  p.node = "nowhere";
  p.gpus.push_back({"gpu0", 1'000, 1'000, 100, 0, -1, -1});
  auto noNode = s.apply(ReplicaPlaced{p, 0});
  ASSERT_FALSE(noNode);
  EXPECT_EQ(noNode.error().code, ErrorCode::kNotFound);
  EXPECT_NE(noNode.error().message.find("nowhere"), std::string::npos);
  p.node = "a";
  p.gpus[0].gpuId = "gpu7";
  auto noGpu = s.apply(ReplicaPlaced{p, 0});
  ASSERT_FALSE(noGpu);
  EXPECT_NE(noGpu.error().message.find("gpu7"), std::string::npos);
  EXPECT_FALSE(s.apply(ReplicaRestored{p, 0, true, false, {}, 0}));
  EXPECT_EQ(s.liveReplicaCount(), 0);
  EXPECT_EQ(s.gpu(*s.findGpu("a", "gpu0")).freeMemoryMib(), 24'576);
}

// A decision that names a GPU of another node (same id "gpu0" on both) is refused, not moved
// onto the named node's GPU of that id.
TEST(EventReplay, AGpuOfAnotherNodeIsNotRenamedOntoThisOne) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock(0);
  ClusterState s(catalog, clock);
  ASSERT_TRUE(s.apply(NodeAdded{l4Node("a", 1)}));
  ASSERT_TRUE(s.apply(NodeAdded{l4Node("b", 1)}));
  Placement p;
  p.replicaId = "r";
  p.node = *s.findNode("a");
  p.gpus.push_back({*s.findGpu("b", "gpu0"), 1'000, 1'000, 100, 0, -1, -1});
  EXPECT_FALSE(s.checkPlacement(p));
  const ReplicaPlaced event = replicaPlaced(s, p, 0);
  EXPECT_EQ(event.placement.gpus[0].gpuId, "");
  EXPECT_FALSE(s.apply(event));
  EXPECT_EQ(s.liveReplicaCount(), 0);
}

// ---- Times come with the events ------------------------------------------------------------

// The state's clock stands far from every event's time: what the books record and when a
// reservation lapses follow the events alone.
TEST(EventReplay, ApplyTakesEveryTimeFromTheEvent) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock(5'000'000);
  EngineOptions options;
  options.reservationTtlMs = 1'000;
  ClusterState s(catalog, clock, options);
  ASSERT_TRUE(s.apply(NodeAdded{l4Node("a", 2)}));
  NamedPlacement p;
  p.replicaId = "r";
  p.deployment = p.modelName = "m";
  p.node = "a";
  p.gpus.push_back({"gpu0", 4'000, 5'000, 100, 0, -1, -1});
  ASSERT_TRUE(s.apply(ReplicaPlaced{p, 10'000}));
  const ReplicaId r = *s.findReplica("r");
  EXPECT_EQ(s.replica(r).placedAtMs, 10'000);
  EXPECT_EQ(s.nextReservationExpiryMs(), 11'000);

  GpuTelemetry t{"a", "gpu0", 3'000, 100, {}, true, 10'500};
  ASSERT_TRUE(s.apply(t));
  EXPECT_EQ(s.gpu(*s.findGpu("a", "gpu0")).telemetryAtMs, 10'500);

  ASSERT_TRUE(s.apply(ReservationsExpired{10'999}));  // the clock says long past: ignored
  EXPECT_TRUE(s.replica(r).reservationActive);
  ASSERT_TRUE(s.apply(ReservationsExpired{11'000}));
  EXPECT_FALSE(s.replica(r).reservationActive);

  // A restore judges its TTL at the restore's own time, not the clock's.
  p.replicaId = "back";
  p.gpus[0].gpuId = "gpu1";
  ASSERT_TRUE(s.apply(ReplicaRestored{p, 20'000, true, false, {}, 20'999}));
  EXPECT_TRUE(s.replica(*s.findReplica("back")).reservationActive);
  p.replicaId = "late";
  ASSERT_TRUE(s.apply(ReplicaRestored{p, 20'000, true, false, {}, 21'000}));
  EXPECT_FALSE(s.replica(*s.findReplica("late")).reservationActive);
}

// ---- The node patch ------------------------------------------------------------------------

class NodePatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::NodeSpec n = l4Node("a", 2);
    n.labels = {{"zone", "z1"}, {"pool", "p"}};
    n.taints = {{"dedicated", "ml", "NoSchedule"}};
    n.cachedModels = {"m1"};
    ASSERT_TRUE(s_.apply(NodeAdded{n}));
    NamedPlacement p;
    p.replicaId = "r";
    p.deployment = p.modelName = "m";
    p.node = "a";
    p.gpus.push_back({"gpu0", 4'000, 5'000, 100, 0, -1, -1});
    ASSERT_TRUE(s_.apply(ReplicaPlaced{p, 0}));
  }
  const NodeRecord& node() const { return s_.node(*s_.findNode("a")); }
  const GpuRecord& gpu(const std::string& id) const { return s_.gpu(*s_.findGpu("a", id)); }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  ClusterState s_{catalog_, clock_};
};

TEST_F(NodePatchTest, ACordonChangesOnlyTheCordon) {
  // GPU health learnt from telemetry, which a whole-spec update from a stale copy would undo.
  ASSERT_TRUE(s_.apply(GpuTelemetry{"a", "gpu1", 0, 0, {}, false, 5}));
  NodePatched cordon;
  cordon.name = "a";
  cordon.cordoned = true;
  ASSERT_TRUE(s_.apply(cordon));
  EXPECT_TRUE(node().spec.cordoned);
  EXPECT_FALSE(gpu("gpu1").healthy());  // kept
  EXPECT_TRUE(gpu("gpu0").healthy());
  EXPECT_TRUE(node().spec.healthy);
  EXPECT_EQ(node().spec.labels.size(), 2u);
  EXPECT_EQ(node().spec.taints.size(), 1u);
  EXPECT_EQ(node().spec.cachedModels, std::vector<std::string>{"m1"});
  EXPECT_EQ(node().replicas.size(), 1u);
  EXPECT_EQ(gpu("gpu0").freeMemoryMib(), 24'576 - 5'000);
  EXPECT_TRUE(s_.checkInvariants());

  cordon.cordoned = false;
  ASSERT_TRUE(s_.apply(cordon));
  EXPECT_FALSE(node().spec.cordoned);
  EXPECT_FALSE(gpu("gpu1").healthy());
}

TEST_F(NodePatchTest, EachFieldPresentIsReplacedAndTheRestKept) {
  const std::uint64_t before = node().generation;
  NodePatched p;
  p.name = "a";
  p.healthy = false;
  p.cachedModels = std::vector<std::string>{"m2", "m3"};
  ASSERT_TRUE(s_.apply(p));
  EXPECT_FALSE(node().spec.healthy);
  EXPECT_EQ(node().spec.cachedModels, (std::vector<std::string>{"m2", "m3"}));
  EXPECT_FALSE(node().spec.cordoned);
  EXPECT_EQ(node().spec.labels.at("zone"), "z1");
  EXPECT_NE(node().generation, before);  // plugins that memoise per node see the change

  NodePatched q;
  q.name = "a";
  q.labels = std::map<std::string, std::string>{{"zone", "z2"}};
  q.taints = std::vector<model::Taint>{};
  q.gpuHealthy = {{"gpu0", false}};
  ASSERT_TRUE(s_.apply(q));
  EXPECT_EQ(node().spec.labels, (std::map<std::string, std::string>{{"zone", "z2"}}));
  EXPECT_TRUE(node().spec.taints.empty());
  EXPECT_FALSE(gpu("gpu0").healthy());
  EXPECT_EQ(s_.indexedPlaceableMib(*s_.findGpu("a", "gpu0")), -1);  // off the capacity index
  EXPECT_TRUE(gpu("gpu1").healthy());
  EXPECT_FALSE(node().spec.healthy);  // from the first patch
  EXPECT_EQ(node().spec.cachedModels, (std::vector<std::string>{"m2", "m3"}));
  // Health changes no booking.
  EXPECT_EQ(gpu("gpu0").freeMemoryMib(), 24'576 - 5'000);
  EXPECT_TRUE(s_.checkInvariants());
}

TEST_F(NodePatchTest, AnUnknownNodeOrGpuIsRefusedWhole) {
  NodePatched nobody;
  nobody.name = "b";
  nobody.cordoned = true;
  auto refused = s_.apply(nobody);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kNotFound);

  NodePatched p;
  p.name = "a";
  p.cordoned = true;
  p.gpuHealthy = {{"gpu0", false}, {"gpu9", false}};
  const std::uint64_t before = node().generation;
  auto bad = s_.apply(p);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("gpu9"), std::string::npos);
  EXPECT_FALSE(node().spec.cordoned);
  EXPECT_TRUE(gpu("gpu0").healthy());
  EXPECT_EQ(node().generation, before);
}

}  // namespace
}  // namespace tessera::sched
