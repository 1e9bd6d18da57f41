// The control plane's state in the API server, through a real KubeClient against the test
// API server: documents round-trip as ConfigMaps and pod annotations, a booking of a pod that
// never bound is dropped (unless its DRA claim, or its claim from a template, pins the GPU), a
// second writer's change is a conflict, each object's precondition is the API server's own
// (409), a failed write set is undone object by object (and an undo that fails is named), and a
// document that cannot be read stops the load by name.
#include "k8s/kube_state_store.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "k8s/kube_client.h"
#include "k8s/testing/fake_apiserver.h"
#include "store/testing/seed.h"
#include "store/write_set.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

constexpr const char* kNs = "tessera-system";

json storePod(const std::string& name, const std::string& node) {
  json p = {{"metadata", {{"name", name}, {"namespace", "ml"}}}, {"spec", json::object()}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

std::string booking(const std::string& ns, const std::string& name, const std::string& node) {
  return json{{"id", ns + "/" + name}, {"node", node}, {"pod", {{"namespace", ns}, {"name", name}}}}
      .dump();
}

class KubeStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api.start());
    a = connect();
    b = connect();
  }
  std::unique_ptr<KubeClient> connect() {
    KubeConfig c;
    c.server = api.url();
    auto made = KubeClient::create(c);
    EXPECT_TRUE(made) << made.error().message;
    return std::move(*made);
  }
  static std::map<std::string, std::string> documents(const store::Snapshot& s) {
    std::map<std::string, std::string> out;
    for (const auto& d : s.documents) out[d.kind + " " + d.name] = d.json;
    return out;
  }
  testing::FakeApiServer api;
  std::unique_ptr<KubeClient> a, b;
};

TEST_F(KubeStateStoreTest, DocumentsRoundTripAsConfigMapsAndPodBookings) {
  ASSERT_TRUE(api.create("pods", storePod("llama-0", "n1")));
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  store::WriteSet batch;
  batch.put("node", "n1", R"({"name":"n1","gpus":[{"type":"A100-80GB"}]})",
            store::Precondition::mustNotExist());
  batch.put("model", "meta-llama/Llama-3-8B", R"({"name":"meta-llama/Llama-3-8B"})");
  batch.put("replica", "ml/llama-0", booking("ml", "llama-0", "n1"));
  batch.put("replica", "r-1", R"({"id":"r-1","node":"n1"})");
  auto done = store::writeAll(store, batch);
  ASSERT_TRUE(done) << done.error().message;

  // The pod carries its booking; the rest are labelled ConfigMaps.
  const json p = *api.get("pods", "ml", "llama-0");
  EXPECT_EQ(p["metadata"]["labels"]["tessera.io/booked"], "true");
  EXPECT_EQ(p["metadata"]["annotations"]["tessera.io/booking"], booking("ml", "llama-0", "n1"));
  int maps = 0;
  for (const json& cm : api.list("configmaps")) {
    EXPECT_EQ(cm["metadata"]["namespace"], kNs);
    EXPECT_EQ(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"], "tessera");
    ++maps;
  }
  EXPECT_EQ(maps, 3);

  // A replica with empty disks (a fresh store) reads the same documents back.
  KubeStateStore fresh(*b, kNs);
  auto snap = fresh.loadAll();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto docs = documents(*snap);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs.at("node n1"), R"({"name":"n1","gpus":[{"type":"A100-80GB"}]})");
  EXPECT_EQ(docs.at("model meta-llama/Llama-3-8B"), R"({"name":"meta-llama/Llama-3-8B"})");
  EXPECT_EQ(docs.at("replica ml/llama-0"), booking("ml", "llama-0", "n1"));
  EXPECT_EQ(docs.at("replica r-1"), R"({"id":"r-1","node":"n1"})");
  EXPECT_TRUE(std::is_sorted(snap->documents.begin(), snap->documents.end(),
                             [](const store::Document& x, const store::Document& y) {
                               return std::tie(x.kind, x.name) < std::tie(y.kind, y.name);
                             }));

  // One kind at a time, by name: the replicas are the pod's booking and a ConfigMap.
  auto replicas = fresh.list("replica");
  ASSERT_TRUE(replicas) << replicas.error().message;
  ASSERT_EQ(replicas->size(), 2u);
  EXPECT_EQ((*replicas)[0].name, "ml/llama-0");
  EXPECT_EQ((*replicas)[0].json, booking("ml", "llama-0", "n1"));
  EXPECT_EQ((*replicas)[1].name, "r-1");
  EXPECT_EQ((*replicas)[1].version, fresh.get("replica", "r-1").value()->version);
  EXPECT_EQ(fresh.list("node")->size(), 1u);
  EXPECT_TRUE(fresh.list("deployment")->empty());

  // Deletes clear the pod's booking and remove the ConfigMap.
  store::WriteSet gone;
  gone.remove("replica", "ml/llama-0");
  gone.remove("replica", "r-1");
  ASSERT_TRUE(store::writeAll(fresh, gone));
  const json cleared = *api.get("pods", "ml", "llama-0");
  EXPECT_FALSE(cleared["metadata"].value("labels", json::object()).contains("tessera.io/booked"));
  EXPECT_FALSE(
      cleared["metadata"].value("annotations", json::object()).contains("tessera.io/booking"));
  EXPECT_EQ(documents(*KubeStateStore(*a, kNs).loadAll()).size(), 2u);
}

TEST_F(KubeStateStoreTest, BookingsOfPodsThatNeverBoundAreDropped) {
  ASSERT_TRUE(api.create("pods", storePod("bound", "n1")));
  ASSERT_TRUE(api.create("pods", storePod("unbound", "")));
  // A pod of GPU mode dra that kube-scheduler has not bound yet: its claim pins the GPU.
  json dra = storePod("claimed", "");
  dra["spec"]["resourceClaims"] =
      json::array({{{"name", "tessera-gpu"}, {"resourceClaimName", "claimed-gpu"}}});
  ASSERT_TRUE(api.create("pods", dra));
  // A pod of its own whose claim from a template the claim webhook pinned.
  json own = storePod("templated", "");
  own["spec"]["resourceClaims"] =
      json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "tessera-gpu"}}});
  ASSERT_TRUE(api.create("pods", own));
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  store::WriteSet batch;
  for (const char* name : {"bound", "unbound", "claimed", "templated"}) {
    batch.put("replica", std::string("ml/") + name, booking("ml", name, "n1"));
  }
  ASSERT_TRUE(store::writeAll(store, batch));

  auto snap = KubeStateStore(*b, kNs).loadAll();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto docs = documents(*snap);
  EXPECT_TRUE(docs.contains("replica ml/bound"));
  EXPECT_FALSE(docs.contains("replica ml/unbound"));
  EXPECT_TRUE(docs.contains("replica ml/claimed"));
  EXPECT_TRUE(docs.contains("replica ml/templated"));
  // The stale booking was cleared from the pod, so kube-scheduler's next try starts clean.
  const json u = *api.get("pods", "ml", "unbound");
  EXPECT_FALSE(u["metadata"].value("annotations", json::object()).contains("tessera.io/booking"));
}

// The load clears an unbound pod's booking only as it listed the pod: a Binding that lands
// between the list and the clear leaves the booking the bound pod now needs.
TEST_F(KubeStateStoreTest, AnUnboundBookingIsNotClearedOnceItsPodIsBound) {
  ASSERT_TRUE(api.create("pods", storePod("late", "")));
  KubeStateStore writer(*a, kNs);
  ASSERT_TRUE(writer.loadAll());
  ASSERT_TRUE(writer.put("replica", "ml/late", booking("ml", "late", "n1")));
  bool bound = false;
  api.refuseWrites([this, &bound](const std::string& resource, const json&) {
    if (resource != "pods" || bound) return 0;
    bound = true;
    json pod = *api.get("pods", "ml", "late");
    pod["spec"]["nodeName"] = "n1";  // the Binding, as another client lands it
    EXPECT_TRUE(api.update("pods", pod));
    return 0;
  });
  auto snap = KubeStateStore(*b, kNs).loadAll();
  api.refuseWrites(nullptr);
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_TRUE(bound);  // the load did try to clear it
  const json pod = *api.get("pods", "ml", "late");
  EXPECT_EQ(pod["metadata"]["annotations"].value("tessera.io/booking", ""),
            booking("ml", "late", "n1"));
  // The next load sees it bound, with its booking.
  auto again = KubeStateStore(*b, kNs).loadAll();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE(documents(*again).contains("replica ml/late"));
}

TEST_F(KubeStateStoreTest, AWriterThatHasNotSeenTheLatestVersionGetsAConflict) {
  KubeStateStore first(*a, kNs);
  ASSERT_TRUE(first.loadAll());
  store::WriteSet create;
  create.put("node", "n1", R"({"v":1})");
  ASSERT_TRUE(store::writeAll(first, create));

  // A second replica (a new leader) loads and changes it.
  KubeStateStore second(*b, kNs);
  ASSERT_TRUE(second.loadAll());
  store::WriteSet change;
  change.put("node", "n1", R"({"v":2})");
  ASSERT_TRUE(store::writeAll(second, change));

  // The first (deposed) one has not seen that version: its write is refused, not applied.
  store::WriteSet stale;
  stale.put("node", "n1", R"({"v":3})");
  auto refused = store::writeAll(first, stale);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(refused.error().message.find("another writer"), std::string::npos)
      << refused.error().message;
  // So is a delete, and a create of what exists.
  store::WriteSet del;
  del.remove("node", "n1");
  EXPECT_EQ(store::writeAll(first, del).error().code, ErrorCode::kFailedPrecondition);
  store::WriteSet again;
  again.put("node", "n1", R"({"v":4})", store::Precondition::mustNotExist());
  EXPECT_EQ(store::writeAll(second, again).error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(documents(*KubeStateStore(*a, kNs).loadAll()).at("node n1"), R"({"v":2})");
}

TEST_F(KubeStateStoreTest, AFailedWriteSetIsUndoneObjectByObject) {
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  store::WriteSet first;
  first.put("node", "n1", R"({"v":1})");
  ASSERT_TRUE(store::writeAll(store, first));

  // The last write fails (its pod does not exist): the new node and the changed one are put
  // back as they were.
  store::WriteSet batch;
  batch.put("node", "n1", R"({"v":2})");
  batch.put("node", "n2", R"({"v":1})");
  batch.put("replica", "ml/missing", booking("ml", "missing", "n1"));
  auto failed = store::writeAll(store, batch);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("pod ml/missing"), std::string::npos)
      << failed.error().message;
  const auto docs = documents(*KubeStateStore(*b, kNs).loadAll());
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs.at("node n1"), R"({"v":1})");

  // And the store goes on from there: its versions are the undone ones.
  store::WriteSet next;
  next.put("node", "n1", R"({"v":5})");
  auto ok = store::writeAll(store, next);
  ASSERT_TRUE(ok) << ok.error().message;

  // A refused write (the API server down for writes) is undone the same way.
  api.refuseWrites(
      [](const std::string& resource, const json&) { return resource == "configmaps" ? 0 : 503; });
  ASSERT_TRUE(api.create("pods", storePod("p", "n1")));
  store::WriteSet refused;
  refused.put("node", "n3", R"({"v":1})");
  refused.put("replica", "ml/p", booking("ml", "p", "n1"));
  EXPECT_EQ(store::writeAll(store, refused).error().code, ErrorCode::kInternal);
  api.refuseWrites(nullptr);
  EXPECT_FALSE(documents(*KubeStateStore(*b, kNs).loadAll()).contains("node n3"));
}

// Per object, a precondition is the API server's: a create is a POST (409 when it exists), a
// version to match rides on the PUT or the DELETE (409 when another writer changed it, and a
// conflict too when it is gone), and the versions are the objects' resourceVersions.
TEST_F(KubeStateStoreTest, EachWritesPreconditionIsTheApiServersConflict) {
  using store::Precondition;
  KubeStateStore first(*a, kNs);
  KubeStateStore second(*b, kNs);
  ASSERT_TRUE(first.loadAll());
  ASSERT_TRUE(second.loadAll());
  EXPECT_FALSE(first.get("node", "n1").value());

  auto v1 = first.put("node", "n1", R"({"v":1})", Precondition::mustNotExist());
  ASSERT_TRUE(v1) << v1.error().message;
  auto read = second.get("node", "n1");
  ASSERT_TRUE(read && *read) << (read ? "absent" : read.error().message);
  EXPECT_EQ((*read)->json, R"({"v":1})");
  EXPECT_EQ((*read)->version, *v1);  // the ConfigMap's resourceVersion
  EXPECT_EQ((*api.get("configmaps", kNs,
                      KubeStateStore::configMapName("node", "n1")))["metadata"]["resourceVersion"],
            *v1);

  // A create of what exists is a conflict, on either replica.
  EXPECT_EQ(second.put("node", "n1", "{}", Precondition::mustNotExist()).error().code,
            ErrorCode::kFailedPrecondition);
  // The second replica changes it with the version it read...
  auto v2 = second.put("node", "n1", R"({"v":2})", Precondition::matching(*v1));
  ASSERT_TRUE(v2) << v2.error().message;
  EXPECT_NE(*v2, *v1);
  // ...after which the first one's version is stale: a put and a delete that name it conflict.
  auto stale = first.put("node", "n1", R"({"v":3})", Precondition::matching(*v1));
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kFailedPrecondition) << stale.error().message;
  EXPECT_EQ(first.remove("node", "n1", Precondition::matching(*v1)).error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_EQ(first.get("node", "n1").value()->json, R"({"v":2})");
  // With the current version both go through.
  auto v3 = first.put("node", "n1", R"({"v":3})", Precondition::matching(*v2));
  ASSERT_TRUE(v3) << v3.error().message;
  ASSERT_TRUE(second.remove("node", "n1", Precondition::matching(*v3)));
  EXPECT_FALSE(first.get("node", "n1").value());
  // A version to match on what is gone is a conflict; an unconditional delete is not.
  EXPECT_EQ(first.put("node", "n1", "{}", Precondition::matching(*v3)).error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_EQ(first.remove("node", "n1", Precondition::matching(*v3)).error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(second.remove("node", "n1"));

  // A booking on its pod: its version is the booking's, checked on the pod.
  ASSERT_TRUE(api.create("pods", storePod("p", "n1")));
  auto b1 = first.put("replica", "ml/p", booking("ml", "p", "n1"), Precondition::mustNotExist());
  ASSERT_TRUE(b1) << b1.error().message;
  EXPECT_EQ(second.get("replica", "ml/p").value()->version, *b1);
  EXPECT_EQ(second.put("replica", "ml/p", booking("ml", "p", "n2"), Precondition::mustNotExist())
                .error()
                .code,
            ErrorCode::kFailedPrecondition);
  auto b2 = second.put("replica", "ml/p", booking("ml", "p", "n2"), Precondition::matching(*b1));
  ASSERT_TRUE(b2) << b2.error().message;
  EXPECT_EQ(first.remove("replica", "ml/p", Precondition::matching(*b1)).error().code,
            ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(first.remove("replica", "ml/p", Precondition::matching(*b2)));
  EXPECT_FALSE(second.get("replica", "ml/p").value());
  const auto listed = first.list("node");
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_TRUE(listed->empty());
}

// A booking's precondition holds when the write lands, not only when it was checked: another
// writer that changes the booking between this store's read of the pod and its PATCH gets
// this write a conflict (the PATCH carries the pod's resourceVersion), and the other writer's
// booking stands. A change that only moves the pod's resourceVersion (as kubelet's status
// updates do) is not a conflict: the write is checked and sent again, up to five times.
TEST_F(KubeStateStoreTest, ABookingChangedBetweenCheckAndWriteIsAConflict) {
  using store::Precondition;
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  ASSERT_TRUE(api.create("pods", storePod("p", "n1")));
  auto b1 = store.put("replica", "ml/p", booking("ml", "p", "n1"), Precondition::mustNotExist());
  ASSERT_TRUE(b1) << b1.error().message;

  // Before the next PATCH on a pod lands, `change` rewrites the pod as another client would.
  auto beforeNextPodPatch = [&](std::function<void(json&)> change) {
    auto pending = std::make_shared<std::function<void(json&)>>(std::move(change));
    api.refuseWrites([this, pending](const std::string& resource, const json&) {
      if (resource != "pods" || !*pending) return 0;
      json pod = *api.get("pods", "ml", "p");
      (*pending)(pod);
      *pending = nullptr;
      EXPECT_TRUE(api.update("pods", pod));
      return 0;
    });
  };
  const std::string other = booking("ml", "p", "n7");
  beforeNextPodPatch(
      [&](json& pod) { pod["metadata"]["annotations"][std::string(kBookingAnnotation)] = other; });
  auto lost = store.put("replica", "ml/p", booking("ml", "p", "n2"), Precondition::matching(*b1));
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code, ErrorCode::kFailedPrecondition) << lost.error().message;
  const auto afterLost = store.get("replica", "ml/p").value();
  ASSERT_TRUE(afterLost);
  EXPECT_EQ(afterLost->json, other);

  // The same race on a delete: the other writer's booking is not cleared.
  const std::string third = booking("ml", "p", "n8");
  beforeNextPodPatch(
      [&](json& pod) { pod["metadata"]["annotations"][std::string(kBookingAnnotation)] = third; });
  auto removed = store.remove("replica", "ml/p", Precondition::matching(afterLost->version));
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code, ErrorCode::kFailedPrecondition) << removed.error().message;
  const auto afterRemove = store.get("replica", "ml/p").value();
  ASSERT_TRUE(afterRemove);
  EXPECT_EQ(afterRemove->json, third);

  // A status update in between moves the pod's version but not its booking: the write goes
  // through on the second try.
  beforeNextPodPatch([](json& pod) { pod["status"]["phase"] = "Running"; });
  auto b2 = store.put("replica", "ml/p", booking("ml", "p", "n3"),
                      Precondition::matching(afterRemove->version));
  ASSERT_TRUE(b2) << b2.error().message;
  EXPECT_EQ(store.get("replica", "ml/p").value()->json, booking("ml", "p", "n3"));
  beforeNextPodPatch([](json& pod) { pod["status"]["phase"] = "Succeeded"; });
  ASSERT_TRUE(store.remove("replica", "ml/p", Precondition::matching(*b2)));
  EXPECT_FALSE(store.get("replica", "ml/p").value());

  // A pod whose version moves before every write: five tries, then the conflict, unwritten.
  auto b3 = store.put("replica", "ml/p", booking("ml", "p", "n4"), Precondition::mustNotExist());
  ASSERT_TRUE(b3) << b3.error().message;
  int patches = 0;
  api.refuseWrites([this, &patches](const std::string& resource, const json&) {
    if (resource != "pods") return 0;
    ++patches;
    EXPECT_TRUE(api.update("pods", *api.get("pods", "ml", "p")));
    return 0;
  });
  auto busy = store.put("replica", "ml/p", booking("ml", "p", "n5"), Precondition::matching(*b3));
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, ErrorCode::kFailedPrecondition) << busy.error().message;
  EXPECT_NE(busy.error().message.find("changed under 5 writes in a row"), std::string::npos)
      << busy.error().message;
  EXPECT_EQ(patches, 5);
  api.refuseWrites(nullptr);
  EXPECT_EQ(store.get("replica", "ml/p").value()->json, booking("ml", "p", "n4"));

  // A precondition on a pod that is not there writes nothing: a booking needs its pod.
  auto nopod = store.put("replica", "ml/q", booking("ml", "q", "n1"), Precondition::mustNotExist());
  ASSERT_FALSE(nopod);
  EXPECT_EQ(nopod.error().code, ErrorCode::kNotFound) << nopod.error().message;
}

// When an undo fails too (the API server refuses it), the error says which objects are left
// as the failed change wrote them; the ones that could be undone are.
TEST_F(KubeStateStoreTest, AnUndoThatFailsIsNamed) {
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  ASSERT_TRUE(store.put("node", "n1", R"({"v":1})"));
  // n3's write fails, and so does putting n1 back.
  api.refuseWrites([](const std::string& resource, const json& body) {
    if (resource != "configmaps" || !body.contains("data")) return 0;
    const json& data = body["data"];
    const bool n3 = data.value("name", "") == "n3";
    const bool restoreN1 =
        data.value("name", "") == "n1" && data.value("document", "") == R"({"v":1})";
    return n3 || restoreN1 ? 503 : 0;
  });
  store::WriteSet writes;
  writes.put("node", "n1", R"({"v":2})").put("node", "n2", "{}").put("node", "n3", "{}");
  auto failed = store::writeAll(store, writes);
  api.refuseWrites(nullptr);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kInternal);
  const std::string& m = failed.error().message;
  EXPECT_NE(m.find("node n3"), std::string::npos) << m;
  EXPECT_NE(m.find("undoing"), std::string::npos) << m;
  EXPECT_NE(m.find("node n1:"), std::string::npos) << m;
  EXPECT_EQ(m.find("node n2:"), std::string::npos) << m;
  const auto docs = documents(*KubeStateStore(*b, kNs).loadAll());
  EXPECT_EQ(docs.at("node n1"), R"({"v":2})");  // left as the failed change wrote it
  EXPECT_FALSE(docs.contains("node n2"));       // undone
  EXPECT_FALSE(docs.contains("node n3"));
}

// Random write sets (creates, changes and deletes, with and without preconditions) against
// the API server, the k-th POST or PUT of the set refused: the API server then holds what it
// held before, else what the set wrote. Each case starts from what the one before left.
TEST_F(KubeStateStoreTest, RandomWriteSetsAreStoredWholeOrUndone) {
  const std::uint64_t master = store::testing::fuzzSeed();
  const int cases = store::testing::fuzzIterations(40);
  std::printf("KubeStateStore write sets seed: TESSERA_SEED=%llu (%d cases)\n",
              static_cast<unsigned long long>(master), cases);
  store::testing::Rng seeds(master);
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  const char* kinds[] = {"node", "model"};
  int stored = 0, undone = 0;  // cases that stored their set, and that undid earlier writes
  for (int c = 0; c < cases; ++c) {
    const std::uint64_t seed = c == 0 ? master : seeds.next();
    SCOPED_TRACE("case seed TESSERA_SEED=" + std::to_string(seed) + " TESSERA_FUZZ_ITERATIONS=1");
    store::testing::Rng rng(seed);
    auto loaded = KubeStateStore(*b, kNs).loadAll();
    ASSERT_TRUE(loaded) << loaded.error().message;
    const auto current = documents(*loaded);
    auto expected = current;
    store::WriteSet writes;
    int puts = 0;
    std::set<std::string> used;
    for (int w = 0; w < static_cast<int>(rng.between(1, 5)); ++w) {
      const std::string kind = kinds[rng.between(0, 1)];
      const std::string name = "d" + std::to_string(rng.between(0, 3));
      if (!used.insert(kind + " " + name).second) continue;
      auto doc = store.get(kind, name);
      ASSERT_TRUE(doc) << doc.error().message;
      store::Precondition pre;
      if (rng.chance(0.5)) {
        pre = *doc ? store::Precondition::matching((*doc)->version)
                   : store::Precondition::mustNotExist();
      }
      if (*doc && rng.chance(0.3)) {
        writes.remove(kind, name, pre);
        expected.erase(kind + " " + name);
      } else {
        const std::string text = json{{"case", c}, {"write", w}}.dump();
        writes.put(kind, name, text, pre);
        expected[kind + " " + name] = text;
        ++puts;
      }
    }
    const int refused = puts == 0 || rng.chance(0.25) ? 0 : static_cast<int>(rng.between(1, puts));
    auto seen = std::make_shared<int>(0);
    api.refuseWrites([seen, refused](const std::string& resource, const json&) {
      return resource == "configmaps" && ++*seen == refused ? 503 : 0;
    });
    auto done = store::writeAll(store, writes);
    api.refuseWrites(nullptr);
    auto after = KubeStateStore(*b, kNs).loadAll();
    ASSERT_TRUE(after) << after.error().message;
    if (refused == 0) {
      ASSERT_TRUE(done) << done.error().message;
      ASSERT_EQ(documents(*after), expected);
      ++stored;
    } else {
      undone += refused > 1 ? 1 : 0;
      ASSERT_FALSE(done);
      ASSERT_EQ(done.error().code, ErrorCode::kInternal) << done.error().message;
      ASSERT_EQ(done.error().message.find("undoing"), std::string::npos) << done.error().message;
      ASSERT_EQ(documents(*after), current) << done.error().message;
    }
  }
  if (cases >= 20) {  // the generator reaches both outcomes
    EXPECT_GT(stored, 0);
    EXPECT_GT(undone, 0);
  }
}

TEST_F(KubeStateStoreTest, ADocumentThatCannotBeReadStopsTheLoadByName) {
  ASSERT_TRUE(api.create(
      "configmaps",
      {{"metadata",
        {{"name", "tessera-node-broken"},
         {"namespace", kNs},
         {"labels",
          {{"app.kubernetes.io/managed-by", "tessera"}, {"tessera.io/state-kind", "node"}}}}},
       {"data", {{"name", "n1"}, {"document", "{not json"}}}}));
  auto snap = KubeStateStore(*a, kNs).loadAll();
  ASSERT_FALSE(snap);
  EXPECT_NE(snap.error().message.find("tessera-system/tessera-node-broken"), std::string::npos)
      << snap.error().message;
  // Nothing was deleted on the way.
  EXPECT_TRUE(api.get("configmaps", kNs, "tessera-node-broken"));
}

TEST_F(KubeStateStoreTest, MalformedWritesAreRefusedBeforeAnyWrite) {
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  store::WriteSet twice;
  twice.put("node", "n1", "{}").put("node", "n1", "{}");
  EXPECT_EQ(store::writeAll(store, twice).error().code, ErrorCode::kInvalidArgument);
  store::WriteSet createDelete;
  createDelete.remove("node", "n1", store::Precondition::mustNotExist());
  EXPECT_EQ(store::writeAll(store, createDelete).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store.remove("node", "n1", store::Precondition::mustNotExist()).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store.put("node", "n1", "{").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store.put("", "n1", "{}").error().code, ErrorCode::kInvalidArgument);
  store::WriteSet bad;
  bad.put("node", "n1", "{");
  EXPECT_EQ(store::writeAll(store, bad).error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(api.list("configmaps").empty());
}

TEST_F(KubeStateStoreTest, ConfigMapNamesAreDistinctDnsNames) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  const std::string alphabet = "abcXYZ019-_./:@ ";
  std::set<std::string> names, inputs;
  for (int i = 0; i < 2000; ++i) {
    std::string name;
    const int len = 1 + static_cast<int>(rng() % 300);
    for (int j = 0; j < len; ++j) name += alphabet[rng() % alphabet.size()];
    if (!inputs.insert(name).second) continue;
    const std::string cm = KubeStateStore::configMapName("replica", name);
    ASSERT_LE(cm.size(), 253u) << name;
    for (const char c : cm) {
      ASSERT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') << cm;
    }
    ASSERT_NE(cm.back(), '-');
    ASSERT_TRUE(names.insert(cm).second) << "seed " << seed << ": " << name << " -> " << cm;
  }
  // Kind is part of the identity.
  EXPECT_NE(KubeStateStore::configMapName("node", "x"),
            KubeStateStore::configMapName("model", "x"));
}

TEST_F(KubeStateStoreTest, AnUpgradeImportsTheSqliteDocumentsAndPutsBookingsOnTheirPods) {
  ASSERT_TRUE(api.create("pods", storePod("bound", "n1")));
  ASSERT_TRUE(api.create("pods", storePod("pending", "")));
  // What the single-replica install kept: replica documents of pods carried no `pod` member.
  store::Snapshot old;
  old.documents = {{"node", "n1", R"({"name":"n1"})", 3, 0, "3"},
                   {"model", "m", R"({"name":"m"})", 4, 0, "4"},
                   {"replica", "ml/bound", R"({"placement":{"node":"n1"}})", 5, 0, "5"},
                   {"replica", "ml/pending", R"({"placement":{"node":"n1"}})", 6, 0, "6"},
                   {"replica", "ml/deleted", R"({"placement":{"node":"n1"}})", 7, 0, "7"},
                   {"replica", "chat-0", R"({"placement":{"node":"n1"}})", 8, 0, "8"}};
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  auto report = store.importSnapshot(old);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->imported, 4);
  EXPECT_EQ(report->skipped, 2);  // the unbound pod and the deleted one hold no GPUs

  const auto docs = documents(*KubeStateStore(*b, kNs).loadAll());
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(json::parse(docs.at("replica ml/bound"))["pod"],
            json({{"namespace", "ml"}, {"name", "bound"}}));
  EXPECT_TRUE(docs.contains("replica chat-0"));  // placed by Tessera itself: a ConfigMap
  EXPECT_EQ((*api.get("pods", "ml", "bound"))["metadata"]["labels"]["tessera.io/booked"], "true");

  // A second import (another replica, or the same command again) conflicts and changes
  // nothing.
  auto again = KubeStateStore(*b, kNs).importSnapshot(old);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kFailedPrecondition) << again.error().message;
  EXPECT_EQ(documents(*KubeStateStore(*a, kNs).loadAll()).size(), 4u);
}

}  // namespace
}  // namespace tessera::k8s
