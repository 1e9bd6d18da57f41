// The control plane's state in the API server, through a real KubeClient against the test
// API server: documents round-trip as ConfigMaps and pod annotations, a booking of a pod that
// never bound is dropped (unless its DRA claim, or its claim from a template, pins the GPU), a
// second writer's change is a conflict, a failed batch is undone, and a document that cannot be
// read stops the load by name.
#include "k8s/kube_state_store.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "k8s/kube_client.h"
#include "k8s/testing/fake_apiserver.h"

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
  store::Batch batch;
  batch.upsert("node", "n1", R"({"name":"n1","gpus":[{"type":"A100-80GB"}]})",
               store::kMustNotExist);
  batch.upsert("model", "meta-llama/Llama-3-8B", R"({"name":"meta-llama/Llama-3-8B"})");
  batch.upsert("replica", "ml/llama-0", booking("ml", "llama-0", "n1"));
  batch.upsert("replica", "r-1", R"({"id":"r-1","node":"n1"})");
  batch.appendEvent("event", R"({"type":"Test"})");
  auto done = store.commit(batch);
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_GT(done->lastEventSeq, 0);

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

  // Deletes clear the pod's booking and remove the ConfigMap.
  store::Batch gone;
  gone.remove("replica", "ml/llama-0");
  gone.remove("replica", "r-1");
  ASSERT_TRUE(fresh.commit(gone));
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
  store::Batch batch;
  for (const char* name : {"bound", "unbound", "claimed", "templated"}) {
    batch.upsert("replica", std::string("ml/") + name, booking("ml", name, "n1"));
  }
  ASSERT_TRUE(store.commit(batch));

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

TEST_F(KubeStateStoreTest, AWriterThatHasNotSeenTheLatestVersionGetsAConflict) {
  KubeStateStore first(*a, kNs);
  ASSERT_TRUE(first.loadAll());
  store::Batch create;
  create.upsert("node", "n1", R"({"v":1})");
  ASSERT_TRUE(first.commit(create));

  // A second replica (a new leader) loads and changes it.
  KubeStateStore second(*b, kNs);
  ASSERT_TRUE(second.loadAll());
  store::Batch change;
  change.upsert("node", "n1", R"({"v":2})");
  ASSERT_TRUE(second.commit(change));

  // The first (deposed) one has not seen that version: its write is refused, not applied.
  store::Batch stale;
  stale.upsert("node", "n1", R"({"v":3})");
  auto refused = first.commit(stale);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(refused.error().message.find("another writer"), std::string::npos)
      << refused.error().message;
  // So is a delete, and a create of what exists.
  store::Batch del;
  del.remove("node", "n1");
  EXPECT_EQ(first.commit(del).error().code, ErrorCode::kFailedPrecondition);
  store::Batch again;
  again.upsert("node", "n1", R"({"v":4})", store::kMustNotExist);
  EXPECT_EQ(second.commit(again).error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(documents(*KubeStateStore(*a, kNs).loadAll()).at("node n1"), R"({"v":2})");
}

TEST_F(KubeStateStoreTest, AFailedBatchIsUndoneObjectByObject) {
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  store::Batch first;
  first.upsert("node", "n1", R"({"v":1})");
  ASSERT_TRUE(store.commit(first));

  // The last write fails (its pod does not exist): the new node and the changed one are put
  // back as they were.
  store::Batch batch;
  batch.upsert("node", "n1", R"({"v":2})");
  batch.upsert("node", "n2", R"({"v":1})");
  batch.upsert("replica", "ml/missing", booking("ml", "missing", "n1"));
  auto failed = store.commit(batch);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("pod ml/missing"), std::string::npos)
      << failed.error().message;
  const auto docs = documents(*KubeStateStore(*b, kNs).loadAll());
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs.at("node n1"), R"({"v":1})");

  // And the store goes on from there: its versions are the undone ones.
  store::Batch next;
  next.upsert("node", "n1", R"({"v":5})");
  auto ok = store.commit(next);
  ASSERT_TRUE(ok) << ok.error().message;

  // A refused write (the API server down for writes) is undone the same way.
  api.refuseWrites(
      [](const std::string& resource, const json&) { return resource == "configmaps" ? 0 : 503; });
  ASSERT_TRUE(api.create("pods", storePod("p", "n1")));
  store::Batch refused;
  refused.upsert("node", "n3", R"({"v":1})");
  refused.upsert("replica", "ml/p", booking("ml", "p", "n1"));
  EXPECT_EQ(store.commit(refused).error().code, ErrorCode::kInternal);
  api.refuseWrites(nullptr);
  EXPECT_FALSE(documents(*KubeStateStore(*b, kNs).loadAll()).contains("node n3"));
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

TEST_F(KubeStateStoreTest, MalformedBatchesAreRefusedBeforeAnyWrite) {
  KubeStateStore store(*a, kNs);
  ASSERT_TRUE(store.loadAll());
  store::Batch twice;
  twice.upsert("node", "n1", "{}").upsert("node", "n1", "{}");
  EXPECT_EQ(store.commit(twice).error().code, ErrorCode::kInvalidArgument);
  store::Batch revision;
  revision.upsert("node", "n1", "{}", 7);
  EXPECT_EQ(store.commit(revision).error().code, ErrorCode::kInvalidArgument);
  store::Batch bad;
  bad.upsert("node", "n1", "{");
  EXPECT_EQ(store.commit(bad).error().code, ErrorCode::kInvalidArgument);
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
  old.documents = {{"node", "n1", R"({"name":"n1"})", 3, 0},
                   {"model", "m", R"({"name":"m"})", 4, 0},
                   {"replica", "ml/bound", R"({"placement":{"node":"n1"}})", 5, 0},
                   {"replica", "ml/pending", R"({"placement":{"node":"n1"}})", 6, 0},
                   {"replica", "ml/deleted", R"({"placement":{"node":"n1"}})", 7, 0},
                   {"replica", "chat-0", R"({"placement":{"node":"n1"}})", 8, 0}};
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
