// The ModelDeployment controller against the test API server (src/k8s/testing) and a
// recording fleet: pods for the autoscaler's count, scaling, hot switch and canary rollouts,
// status conditions (with a 409 from a concurrent writer), deletion, nodes.
#include "k8s/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/testing/eventually.h"
#include "k8s/testing/fake_apiserver.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using testing::FakeApiServer;

// Records what the controller asks of Tessera; the test plays the autoscaler.
class RecordingFleet : public Fleet {
 public:
  Result<void> putModel(const json& profile) override {
    std::lock_guard lock(mu);
    models[profile["name"].get<std::string>()] = profile;
    return {};
  }
  Result<void> putDeployment(const json& body) override {
    std::lock_guard lock(mu);
    if (refuseDeployments) return fail(Error::invalid("model: unknown model \"nope\""));
    const std::string name = body["name"];
    if (!deployments.contains(name)) desired[name] = body["minReplicas"].get<int>();
    deployments[name] = body;
    return {};
  }
  Result<void> deleteDeployment(const std::string& name) override {
    std::lock_guard lock(mu);
    deployments.erase(name);
    deleted.push_back(name);
    return {};
  }
  std::optional<Deployment> deployment(const std::string& name) override {
    std::lock_guard lock(mu);
    if (!deployments.contains(name)) return std::nullopt;
    return Deployment{desired[name], 0, "0/2 nodes can take it: MemoryFit rejected 4 GPUs"};
  }
  void replicaReady(const std::string& id) override {
    std::lock_guard lock(mu);
    ready.insert(id);
  }
  void replicaGone(const std::string& id) override {
    std::lock_guard lock(mu);
    gone.insert(id);
  }
  void setNodeCordoned(const std::string& node, bool cordoned) override {
    std::lock_guard lock(mu);
    cordons.push_back(node + (cordoned ? " cordoned" : " uncordoned"));
  }
  std::vector<std::string> kubernetesDeployments() override {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const auto& [name, body] : deployments) out.push_back(name);
    return out;
  }
  std::vector<std::string> replicasOf(const std::string& deployment) override {
    std::lock_guard lock(mu);
    return booked[deployment];
  }
  std::vector<std::string> bookedPods() override {
    std::lock_guard lock(mu);
    return bookedPodIds;
  }
  void setDesired(const std::string& name, int n) {
    std::lock_guard lock(mu);
    desired[name] = n;
  }
  template <typename T>
  T read(const std::function<T(RecordingFleet&)>& fn) {
    std::lock_guard lock(mu);
    return fn(*this);
  }

  std::mutex mu;
  std::map<std::string, json> models, deployments;
  std::map<std::string, int> desired;
  std::vector<std::string> deleted, cordons;
  std::set<std::string> ready, gone;
  std::map<std::string, std::vector<std::string>> booked;  // deployment → replica ids
  std::vector<std::string> bookedPodIds;
  bool refuseDeployments = false;
};

json modelDeployment(const std::string& version, const std::string& strategy = "HotSwitch",
                     int weight = 0, int min = 2) {
  return {
      {"apiVersion", "tessera.io/v1alpha1"},
      {"kind", "ModelDeployment"},
      {"metadata", {{"name", "chat"}, {"namespace", "ml"}}},
      {"spec",
       {{"model",
         {{"name", "llama-8b"}, {"weights", "16Gi"}, {"kvCache", "4Gi"}, {"gpusPerReplica", 1}}},
        {"version", version},
        {"replicas", {{"min", min}, {"max", 8}}},
        {"resources",
         {{"gpuMemory", "20Gi"},
          {"gpuCompute", 500},
          {"gpuTypes", json::array({"A100-80GB", "H100-80GB"})},
          {"sharing", "shared"}}},
        {"rollout", {{"strategy", strategy}, {"canaryWeight", weight}}},
        {"template",
         {{"metadata", {{"labels", {{"team", "search"}}}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "vllm"}, {"image", "vllm/vllm-openai:v0.6"}}})}}}}}}}};
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.start());
    KubeConfig config;
    config.server = server.url();
    auto made = KubeClient::create(config);
    ASSERT_TRUE(made) << made.error().message;
    client = std::move(*made);
    ControllerOptions o;
    o.resyncMs = 200;
    o.backoffInitialMs = 10;
    o.backoffMaxMs = 100;
    controller = std::make_unique<Controller>(*client, fleet, o);
  }
  void TearDown() override { controller->stop(); }

  std::vector<json> livePods() {
    std::vector<json> out;
    for (json& p : server.list("pods")) {
      if (p["metadata"].value("labels", json::object()).value("tessera.io/modeldeployment", "") ==
          "chat") {
        out.push_back(std::move(p));
      }
    }
    return out;
  }
  std::map<std::string, int> versions() {
    std::map<std::string, int> out;
    for (const json& p : livePods()) {
      ++out[p["metadata"]["annotations"]["tessera.io/version"].get<std::string>()];
    }
    return out;
  }
  json md() { return *server.get("modeldeployments", "ml", "chat"); }
  json status() { return md().value("status", json::object()); }
  json condition(const std::string& type) {
    for (const json& c : status().value("conditions", json::array())) {
      if (c["type"] == type) return c;
    }
    return json();
  }
  // Kubelet's part: the pod runs on a node and is ready.
  void makeReady(const json& pod) {
    json p = *server.get("pods", "ml", pod["metadata"]["name"]);
    p["spec"]["nodeName"] = "gpu-1";
    ASSERT_TRUE(server.update("pods", p));
    p = *server.get("pods", "ml", pod["metadata"]["name"]);
    p["status"] = {{"phase", "Running"},
                   {"conditions", json::array({{{"type", "PodScheduled"}, {"status", "True"}},
                                               {{"type", "Ready"}, {"status", "True"}}})}};
    ASSERT_TRUE(server.updateStatus("pods", p));
  }
  void changeSpec(const std::function<void(json&)>& edit) {
    for (;;) {
      json m = md();
      edit(m["spec"]);
      if (server.update("modeldeployments", m)) return;
    }
  }
  // Waits until a full pass has run after now, so that counts seen are settled ones.
  void settle() {
    const int before = controller->stats().reconciles;
    controller->resync();
    ASSERT_TRUE(eventually([&] { return controller->stats().reconciles >= before + 2; }));
  }

  FakeApiServer server;
  std::unique_ptr<KubeClient> client;
  RecordingFleet fleet;
  std::unique_ptr<Controller> controller;
};

TEST(CanaryTest, SplitsByWeightRoundingHalfUpWithAtLeastOne) {
  EXPECT_EQ(canaryReplicas(4, 0), 0);
  EXPECT_EQ(canaryReplicas(4, 25), 1);
  EXPECT_EQ(canaryReplicas(4, 50), 2);
  EXPECT_EQ(canaryReplicas(4, 100), 4);
  EXPECT_EQ(canaryReplicas(4, 10), 1);   // 0.4 rounds to 0, but a canary has one
  EXPECT_EQ(canaryReplicas(10, 25), 3);  // 2.5 rounds up
  EXPECT_EQ(canaryReplicas(3, 99), 3);
  EXPECT_EQ(canaryReplicas(0, 50), 0);
}

TEST(ReadModelDeploymentTest, TurnsTheSpecIntoADeploymentAndAPod) {
  json object = modelDeployment("v1");
  object["metadata"]["uid"] = "u-1";
  object["metadata"]["generation"] = 3;
  auto spec = readModelDeployment(object);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->tesseraName, "ml.chat");
  EXPECT_EQ(spec->modelName, "llama-8b");
  ASSERT_TRUE(spec->modelProfile);
  EXPECT_EQ((*spec->modelProfile)["weights"], "16Gi");
  EXPECT_EQ(spec->generation, 3);
  EXPECT_EQ(spec->deployment["placedBy"], "kubernetes");
  EXPECT_EQ(spec->deployment["minReplicas"], 2);
  EXPECT_EQ(spec->deployment["maxReplicas"], 8);
  const json pod = podFor(*spec, "v1", "chat-abcde");
  EXPECT_EQ(pod["spec"]["schedulerName"], "tessera-scheduler");
  EXPECT_EQ(pod["metadata"]["annotations"]["tessera.io/model"], "llama-8b");
  EXPECT_EQ(pod["metadata"]["annotations"]["tessera.io/deployment"], "ml.chat");
  EXPECT_EQ(pod["metadata"]["annotations"]["tessera.io/version"], "v1");
  EXPECT_EQ(pod["metadata"]["annotations"]["tessera.io/gpu-types"], "A100-80GB,H100-80GB");
  EXPECT_EQ(pod["metadata"]["annotations"]["tessera.io/sharing"], "shared");
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "search");
  EXPECT_EQ(pod["metadata"]["labels"]["tessera.io/version"], "v1");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["kind"], "ModelDeployment");
  const json& res = pod["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res["requests"]["tessera.io/gpus"], "1");
  EXPECT_EQ(res["requests"]["tessera.io/gpu-memory"], "20480");
  EXPECT_EQ(res["requests"]["tessera.io/gpu-compute"], "500");
  EXPECT_EQ(res["limits"], res["requests"]);

  // HPA's scale-down policies pass to the deployment as written (the API decodes them).
  json scaled = modelDeployment("v1");
  const json policies = json::array({{{"type", "Pods"}, {"value", 1}, {"periodSeconds", 120}}});
  scaled["spec"]["autoscaling"] = {{"policy", "tessera"}, {"scaleDownPolicies", policies}};
  auto scaledSpec = readModelDeployment(scaled);
  ASSERT_TRUE(scaledSpec) << scaledSpec.error().message;
  EXPECT_EQ(scaledSpec->deployment["autoscaling"]["scaleDownPolicies"], policies);
  EXPECT_EQ(scaledSpec->deployment["autoscaling"]["recommender"], "tessera");

  json bad = modelDeployment("v1");
  bad["spec"]["rollout"]["canaryWeight"] = 140;
  EXPECT_NE(readModelDeployment(bad).error().message.find("spec.rollout.canaryWeight"),
            std::string::npos);
  bad = modelDeployment("v1");
  bad["spec"].erase("template");
  EXPECT_NE(readModelDeployment(bad).error().message.find("spec.template"), std::string::npos);
  bad = modelDeployment("v1");
  bad["spec"]["rollout"]["strategy"] = "BlueGreen";
  EXPECT_FALSE(readModelDeployment(bad));
}

TEST_F(ControllerTest, CreatesThePodsTheDeploymentWantsAndReportsStatus) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1")));
  controller->start();
  ASSERT_TRUE(eventually([&] { return livePods().size() == 2; }));
  const json owner = md();
  EXPECT_TRUE(fleet.read<bool>([](RecordingFleet& f) {
    return f.models.contains("llama-8b") && f.deployments.contains("ml.chat") &&
           f.deployments["ml.chat"]["placedBy"] == "kubernetes";
  }));
  for (const json& p : livePods()) {
    EXPECT_EQ(p["spec"]["schedulerName"], "tessera-scheduler");
    EXPECT_EQ(p["metadata"]["annotations"]["tessera.io/version"], "v1");
    EXPECT_EQ(p["metadata"]["ownerReferences"][0]["uid"], owner["metadata"]["uid"]);
  }
  // Not ready yet: not available, progressing.
  ASSERT_TRUE(eventually([&] { return status().value("replicas", 0) == 2; }));
  EXPECT_EQ(status()["readyReplicas"], 0);
  EXPECT_EQ(status()["currentVersion"], "v1");
  EXPECT_EQ(status()["observedGeneration"], 1);
  EXPECT_EQ(condition("Available")["status"], "False");
  EXPECT_EQ(condition("Progressing")["reason"], "WaitingForReady");
  EXPECT_EQ(condition("Degraded")["status"], "False");

  for (const json& p : livePods()) makeReady(p);
  ASSERT_TRUE(eventually([&] { return status().value("readyReplicas", 0) == 2; }));
  ASSERT_TRUE(eventually([&] { return condition("Progressing")["reason"] == "Complete"; }));
  EXPECT_EQ(condition("Available")["status"], "True");
  EXPECT_EQ(condition("Progressing")["status"], "False");
  // Ready pods mark their replicas loaded.
  ASSERT_TRUE(eventually([&] {
    return fleet.read<std::size_t>([](RecordingFleet& f) { return f.ready.size(); }) == 2;
  }));
  settle();
  EXPECT_EQ(livePods().size(), 2u);  // nothing more was created
  EXPECT_EQ(controller->stats().podsCreated, 2);
}

TEST_F(ControllerTest, FollowsTheAutoscalersCountDeletingTheLeastUsefulPodsFirst) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1")));
  controller->start();
  ASSERT_TRUE(eventually([&] { return livePods().size() == 2; }));
  fleet.setDesired("ml.chat", 5);
  ASSERT_TRUE(eventually([&] { return livePods().size() == 5; }));
  settle();
  EXPECT_EQ(livePods().size(), 5u);
  ASSERT_TRUE(eventually([&] { return status().value("replicas", 0) == 5; }));

  // Two pods run; scaling to 2 keeps exactly those.
  std::set<std::string> keep;
  for (const json& p : livePods()) {
    if (keep.size() == 2) break;
    makeReady(p);
    keep.insert(p["metadata"]["name"].get<std::string>());
  }
  ASSERT_TRUE(eventually([&] {
    return fleet.read<std::size_t>([](RecordingFleet& f) { return f.ready.size(); }) == 2;
  }));
  fleet.setDesired("ml.chat", 2);
  ASSERT_TRUE(eventually([&] { return livePods().size() == 2; }));
  settle();
  std::set<std::string> left;
  for (const json& p : livePods()) left.insert(p["metadata"]["name"].get<std::string>());
  EXPECT_EQ(left, keep);
  // The deleted pods' bookings were freed.
  ASSERT_TRUE(eventually([&] {
    return fleet.read<std::size_t>([](RecordingFleet& f) { return f.gone.size(); }) == 3;
  }));
  ASSERT_TRUE(eventually([&] { return condition("Progressing")["reason"] == "Complete"; }));
}

TEST_F(ControllerTest, ReplacesAPodDeletedBehindItsBack) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1")));
  controller->start();
  ASSERT_TRUE(eventually([&] { return livePods().size() == 2; }));
  const std::string victim = livePods()[0]["metadata"]["name"];
  ASSERT_TRUE(server.remove("pods", "ml", victim));
  ASSERT_TRUE(eventually([&] {
    return fleet.read<bool>([&](RecordingFleet& f) { return f.gone.contains("ml/" + victim); });
  }));
  ASSERT_TRUE(eventually([&] { return controller->stats().podsCreated == 3; }));
  EXPECT_EQ(livePods().size(), 2u);
  EXPECT_FALSE(server.get("pods", "ml", victim));
}

TEST_F(ControllerTest, HotSwitchKeepsThePodsAndRewritesTheirVersion) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1", "HotSwitch", 0, 3)));
  controller->start();
  ASSERT_TRUE(eventually([&] { return livePods().size() == 3; }));
  for (const json& p : livePods()) makeReady(p);
  ASSERT_TRUE(eventually([&] { return condition("Progressing")["reason"] == "Complete"; }));
  std::set<std::string> before;
  for (const json& p : livePods()) before.insert(p["metadata"]["name"].get<std::string>());

  changeSpec([](json& spec) { spec["version"] = "v2"; });
  ASSERT_TRUE(eventually([&] { return versions() == std::map<std::string, int>{{"v2", 3}}; }));
  ASSERT_TRUE(eventually([&] { return status().value("currentVersion", "") == "v2"; }));
  EXPECT_EQ(status()["observedGeneration"], 2);
  std::set<std::string> after;
  for (const json& p : livePods()) {
    after.insert(p["metadata"]["name"].get<std::string>());
    EXPECT_EQ(p["metadata"]["labels"]["tessera.io/version"], "v2");
  }
  EXPECT_EQ(after, before);  // the same pods
  EXPECT_EQ(controller->stats().podsCreated, 3);
  EXPECT_EQ(controller->stats().podsDeleted, 0);
  EXPECT_EQ(controller->stats().podsSwitched, 3);
  // The Tessera deployment carries the new version.
  EXPECT_TRUE(fleet.read<bool>(
      [](RecordingFleet& f) { return f.deployments["ml.chat"]["version"] == "v2"; }));
}

TEST_F(ControllerTest, CanarySplitsTheReplicasByWeightUntilItIsComplete) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1", "Canary", 0, 4)));
  controller->start();
  ASSERT_TRUE(eventually([&] { return versions() == std::map<std::string, int>{{"v1", 4}}; }));
  ASSERT_TRUE(eventually([&] { return status().value("currentVersion", "") == "v1"; }));

  const std::vector<std::pair<int, std::map<std::string, int>>> steps = {
      {0, {{"v1", 4}}},
      {25, {{"v1", 3}, {"v2", 1}}},
      {50, {{"v1", 2}, {"v2", 2}}},
      {100, {{"v2", 4}}},
  };
  for (const auto& [weight, want] : steps) {
    changeSpec([w = weight](json& spec) {
      spec["version"] = "v2";
      spec["rollout"]["canaryWeight"] = w;
    });
    ASSERT_TRUE(eventually([&, w = want] { return versions() == w; })) << "weight " << weight;
    settle();
    EXPECT_EQ(versions(), want) << "weight " << weight;
    if (weight < 100) {
      ASSERT_TRUE(eventually([&] { return condition("Progressing")["reason"] == "Canary"; }));
      EXPECT_EQ(status()["currentVersion"], "v1") << "weight " << weight;
    }
  }
  ASSERT_TRUE(eventually([&] { return status().value("currentVersion", "") == "v2"; }));
  // Once rolled out, v2 is the version new pods get, and a scale-up adds only v2.
  fleet.setDesired("ml.chat", 6);
  ASSERT_TRUE(eventually([&] { return versions() == std::map<std::string, int>{{"v2", 6}}; }));
}

TEST_F(ControllerTest, StatusWriteRetriesAfterAConflictWithAnotherWriter) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1")));
  controller->start();
  ASSERT_TRUE(eventually([&] { return status().value("replicas", 0) == 2; }));
  // Just before the controller's next status write, someone else changes the object.
  std::atomic<bool> touched{false};
  server.beforeNextStatusPut([&] {
    json m = md();
    m["metadata"]["labels"]["touched-by"] = "someone-else";
    touched.store(server.update("modeldeployments", m).has_value());
  });
  fleet.setDesired("ml.chat", 3);
  ASSERT_TRUE(eventually([&] { return status().value("replicas", 0) == 3; }));
  EXPECT_TRUE(touched);
  EXPECT_GE(server.conflicts(), 1);
  EXPECT_GE(controller->stats().statusConflicts, 1);
  EXPECT_EQ(md()["metadata"]["labels"]["touched-by"], "someone-else");  // not overwritten
}

TEST_F(ControllerTest, UnplaceablePodsMakeItDegradedWithTheEnginesReason) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1")));
  controller->start();
  ASSERT_TRUE(eventually([&] { return livePods().size() == 2; }));
  // kube-scheduler reports the extender's refusal on the pod.
  json p = livePods()[0];
  p["status"] = {
      {"phase", "Pending"},
      {"conditions",
       json::array({{{"type", "PodScheduled"},
                     {"status", "False"},
                     {"reason", "Unschedulable"},
                     {"message", "0/3 nodes are available: MemoryFit rejected 6 GPUs"}}})}};
  ASSERT_TRUE(server.updateStatus("pods", p));
  ASSERT_TRUE(eventually([&] { return condition("Degraded")["status"] == "True"; }))
      << status().dump() << "\n"
      << server.get("pods", "ml", p["metadata"]["name"])->dump();
  EXPECT_EQ(condition("Degraded")["reason"], "Unschedulable");
  EXPECT_NE(condition("Degraded")["message"].get<std::string>().find("MemoryFit rejected 6 GPUs"),
            std::string::npos);
}

TEST_F(ControllerTest, AnInvalidSpecIsReportedAndCreatesNothing) {
  json bad = modelDeployment("v1");
  bad["spec"]["rollout"]["strategy"] = "BlueGreen";
  ASSERT_TRUE(server.create("modeldeployments", bad));
  controller->start();
  ASSERT_TRUE(eventually([&] { return condition("Degraded")["reason"] == "InvalidSpec"; }));
  EXPECT_NE(condition("Degraded")["message"].get<std::string>().find("spec.rollout.strategy"),
            std::string::npos);
  EXPECT_TRUE(livePods().empty());
  // A refusal by Tessera is reported too.
  {
    std::lock_guard lock(fleet.mu);
    fleet.refuseDeployments = true;
  }
  changeSpec([](json& spec) { spec["rollout"]["strategy"] = "HotSwitch"; });
  ASSERT_TRUE(eventually([&] { return condition("Degraded")["reason"] == "DeploymentRejected"; }));
  EXPECT_TRUE(livePods().empty());
}

TEST_F(ControllerTest, DeletingTheModelDeploymentDeletesItsPodsAndTheDeployment) {
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1")));
  ASSERT_TRUE(server.create("pods", {{"metadata", {{"name", "other"}, {"namespace", "ml"}}},
                                     {"spec", {{"schedulerName", "tessera-scheduler"}}}}));
  controller->start();
  ASSERT_TRUE(eventually([&] { return livePods().size() == 2; }));
  ASSERT_TRUE(server.remove("modeldeployments", "ml", "chat"));
  ASSERT_TRUE(eventually([&] { return livePods().empty(); }));
  ASSERT_TRUE(eventually([&] {
    return fleet.read<bool>([](RecordingFleet& f) {
      return !f.deployments.contains("ml.chat") && f.deleted == std::vector<std::string>{"ml.chat"};
    });
  }));
  EXPECT_TRUE(server.get("pods", "ml", "other"));  // not ours
}

TEST_F(ControllerTest, CleansUpWhatItMissedWhileNotWatching) {
  // Tessera still has a deployment whose ModelDeployment was deleted meanwhile, and bookings
  // of two pods of which one is gone.
  {
    std::lock_guard lock(fleet.mu);
    fleet.deployments["ml.old"] = {{"name", "ml.old"}, {"placedBy", "kubernetes"}};
    fleet.booked["ml.chat"] = {"ml/ghost", "ml/alive"};
  }
  ASSERT_TRUE(server.create("pods", {{"metadata", {{"name", "alive"}, {"namespace", "ml"}}},
                                     {"spec", {{"schedulerName", "tessera-scheduler"}}}}));
  ASSERT_TRUE(server.create("modeldeployments", modelDeployment("v1")));
  controller->start();
  ASSERT_TRUE(eventually([&] {
    return fleet.read<bool>([](RecordingFleet& f) {
      return f.deleted == std::vector<std::string>{"ml.old"} && f.gone.contains("ml/ghost");
    });
  }));
  settle();
  EXPECT_FALSE(fleet.read<bool>([](RecordingFleet& f) { return f.gone.contains("ml/alive"); }));
  EXPECT_TRUE(
      fleet.read<bool>([](RecordingFleet& f) { return f.deployments.contains("ml.chat"); }));
}

TEST_F(ControllerTest, CordonedOrDeletedNodesAreCordonedInTessera) {
  ASSERT_TRUE(
      server.create("nodes", {{"metadata", {{"name", "gpu-1"}}}, {"spec", json::object()}}));
  ASSERT_TRUE(
      server.create("nodes", {{"metadata", {{"name", "gpu-2"}}}, {"spec", json::object()}}));
  ASSERT_TRUE(server.create(
      "nodes", {{"metadata", {{"name", "gpu-3"}}}, {"spec", {{"unschedulable", true}}}}));
  controller->start();
  ASSERT_TRUE(eventually([&] {
    return fleet.read<std::vector<std::string>>([](RecordingFleet& f) { return f.cordons; }) ==
           std::vector<std::string>{"gpu-3 cordoned"};
  }));
  json n1 = *server.get("nodes", "", "gpu-1");
  n1["spec"]["unschedulable"] = true;
  ASSERT_TRUE(server.update("nodes", n1));
  ASSERT_TRUE(eventually([&] {
    return fleet.read<std::size_t>([](RecordingFleet& f) { return f.cordons.size(); }) == 2;
  }));
  n1 = *server.get("nodes", "", "gpu-1");
  n1["spec"]["unschedulable"] = false;
  ASSERT_TRUE(server.update("nodes", n1));
  ASSERT_TRUE(server.remove("nodes", "", "gpu-2"));
  ASSERT_TRUE(eventually([&] {
    return fleet.read<std::size_t>([](RecordingFleet& f) { return f.cordons.size(); }) == 4;
  }));
  EXPECT_EQ(fleet.read<std::vector<std::string>>([](RecordingFleet& f) { return f.cordons; }),
            (std::vector<std::string>{"gpu-3 cordoned", "gpu-1 cordoned", "gpu-1 uncordoned",
                                      "gpu-2 cordoned"}));
}

// GPU mode dra: a claim the claim webhook pinned for a pod of its own (k8s/claim_admission.h)
// that goes frees the pod's booking, unless a newer claim names the same pod; a booked pod
// neither watch shows is looked up at a resync and freed when gone or finished.
TEST_F(ControllerTest, BookingsFollowTheClaimsTheWebhookPinned) {
  controller->stop();
  ControllerOptions o;
  o.resyncMs = 100;
  o.backoffInitialMs = 10;
  o.backoffMaxMs = 100;
  o.gpuMode = GpuMode::kDra;
  controller = std::make_unique<Controller>(*client, fleet, o);
  // As kube-controller-manager makes it (owned by its pod) and the webhook pins it.
  auto claim = [](const std::string& name, const std::string& replica, bool pinned = true,
                  const std::string& owner = "") {
    json c = {
        {"metadata",
         {{"name", name},
          {"namespace", "ml"},
          {"annotations", {{"tessera.io/replica", replica}}},
          {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                            {"kind", "Pod"},
                                            {"name", owner.empty() ? replica.substr(3) : owner},
                                            {"controller", true}}})}}},
        {"spec", json::object()}};
    if (pinned) c["metadata"]["labels"] = {{"tessera.io/pinned", "admission"}};
    return c;
  };
  ASSERT_TRUE(server.create("resourceclaims", claim("web-0-gpu-a", "ml/web-0")));
  ASSERT_TRUE(server.create("resourceclaims", claim("web-1-gpu-a", "ml/web-1")));
  ASSERT_TRUE(server.create("resourceclaims", claim("web-1-gpu-b", "ml/web-1")));
  ASSERT_TRUE(server.create("resourceclaims", claim("mine", "ml/mine", false)));
  // Pinned, but naming a pod that does not own it: not followed.
  ASSERT_TRUE(server.create("resourceclaims", claim("forged", "ml/victim", true, "attacker")));
  controller->start();
  ASSERT_TRUE(eventually([&] { return controller->synced(); }));

  ASSERT_TRUE(server.remove("resourceclaims", "ml", "web-0-gpu-a"));
  ASSERT_TRUE(eventually([&] { return controller->stats().pinnedClaimsGone == 1; }));
  EXPECT_TRUE(fleet.read<bool>([](RecordingFleet& f) { return f.gone.contains("ml/web-0"); }));
  // The pod made again under its name has the second claim: the first going frees nothing.
  ASSERT_TRUE(server.remove("resourceclaims", "ml", "web-1-gpu-a"));
  ASSERT_TRUE(server.remove("resourceclaims", "ml", "mine"));  // not pinned: not followed
  ASSERT_TRUE(server.remove("resourceclaims", "ml", "forged"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the worker has seen them
  EXPECT_FALSE(fleet.read<bool>([](RecordingFleet& f) { return f.gone.contains("ml/web-1"); }));
  ASSERT_TRUE(server.remove("resourceclaims", "ml", "web-1-gpu-b"));
  ASSERT_TRUE(eventually([&] { return controller->stats().pinnedClaimsGone == 2; }));
  EXPECT_TRUE(fleet.read<bool>([](RecordingFleet& f) { return f.gone.contains("ml/web-1"); }));
  EXPECT_FALSE(fleet.read<bool>([](RecordingFleet& f) { return f.gone.contains("ml/mine"); }));
  EXPECT_FALSE(fleet.read<bool>([](RecordingFleet& f) { return f.gone.contains("ml/victim"); }));

  // Bookings no watch shows: a running pod keeps its, a finished or missing one is freed.
  for (const char* name : {"alive", "done"}) {
    ASSERT_TRUE(server.create("pods", {{"metadata", {{"name", name}, {"namespace", "ml"}}},
                                       {"spec", {{"containers", json::array()}}}}));
  }
  json done = *server.get("pods", "ml", "done");
  done["status"] = {{"phase", "Succeeded"}};
  ASSERT_TRUE(server.updateStatus("pods", done));
  fleet.read<int>([](RecordingFleet& f) {
    f.bookedPodIds = {"ml/alive", "ml/done", "ml/ghost"};
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return controller->stats().bookingsCollected == 2; }));
  fleet.read<int>([](RecordingFleet& f) {
    EXPECT_TRUE(f.gone.contains("ml/done"));
    EXPECT_TRUE(f.gone.contains("ml/ghost"));
    EXPECT_FALSE(f.gone.contains("ml/alive"));
    return 0;
  });

  // A user's own claim that happens to carry the name the controller gives its replicas'
  // claims (<pod>-gpu) is not the controller's to delete when a pod of Tessera's scheduler goes.
  ASSERT_TRUE(server.create(
      "resourceclaims",
      {{"metadata", {{"name", "solo-gpu"}, {"namespace", "ml"}}}, {"spec", json::object()}}));
  ASSERT_TRUE(server.create(
      "pods", {{"metadata", {{"name", "solo"}, {"namespace", "ml"}}},
               {"spec", {{"schedulerName", o.schedulerName}, {"containers", json::array()}}}}));
  ASSERT_TRUE(server.remove("pods", "ml", "solo"));
  ASSERT_TRUE(eventually([&] {
    return fleet.read<bool>([](RecordingFleet& f) { return f.gone.contains("ml/solo"); });
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the claim's turn came after
  EXPECT_TRUE(server.get("resourceclaims", "ml", "solo-gpu").has_value());
  EXPECT_EQ(controller->stats().claimsDeleted, 0);
}

}  // namespace
}  // namespace tessera::k8s
