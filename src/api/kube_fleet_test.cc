// The ModelDeployment controller driving a real ControlPlane through PlaneFleet, against the
// test API server (src/k8s/testing): the model and a placedBy-kubernetes deployment are
// registered, pods follow the autoscaler's count, bound pods are the deployment's replicas,
// Ready marks them loaded, deleted pods free their bookings, node cordons carry over, and
// deleting the ModelDeployment deletes the deployment.
#include "api/kube_fleet.h"
#include "api/json_api.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "common/testing/eventually.h"
#include "k8s/testing/fake_apiserver.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

class KubeFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(p) << p.error().message;
    plane_ = std::move(*p);
    for (const char* n : {"gpu-1", "gpu-2"}) {
      ASSERT_TRUE(json_api::registerNode(
          *plane_,
          {{"name", n},
           {"cpu", 64},
           {"gpus", json::array({{{"type", "A100-80GB"}, {"uuid", std::string("GPU-") + n}}})}}));
    }
    ASSERT_TRUE(server_.start());
    k8s::KubeConfig config;
    config.server = server_.url();
    auto client = k8s::KubeClient::create(config);
    ASSERT_TRUE(client);
    client_ = std::move(*client);
    fleet_ = std::make_unique<PlaneFleet>([this](const std::function<void(ControlPlane&)>& fn) {
      std::lock_guard lock(mu_);
      fn(*plane_);
    });
    startController(k8s::GpuMode::kDevicePlugin);
  }
  void startController(k8s::GpuMode mode) {
    if (controller_) controller_->stop();
    k8s::ControllerOptions o;
    o.resyncMs = 100;
    o.backoffInitialMs = 10;
    o.gpuMode = mode;
    controller_ = std::make_unique<k8s::Controller>(*client_, *fleet_, o);
  }
  void TearDown() override {
    if (controller_) controller_->stop();
  }
  template <typename T>
  T withPlane(const std::function<T(ControlPlane&)>& fn) {
    std::lock_guard lock(mu_);
    return fn(*plane_);
  }
  std::vector<json> pods() {
    std::vector<json> out;
    for (json& p : server_.list("pods")) {
      if (p["metadata"].value("labels", json::object()).contains("tessera.io/modeldeployment")) {
        out.push_back(std::move(p));
      }
    }
    return out;
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1'000'000};
  std::unique_ptr<ControlPlane> plane_;
  std::mutex mu_;
  k8s::testing::FakeApiServer server_;
  std::unique_ptr<k8s::KubeClient> client_;
  std::unique_ptr<PlaneFleet> fleet_;
  std::unique_ptr<k8s::Controller> controller_;
};

TEST_F(KubeFleetTest, TheControllerRunsTheDeploymentsReplicasAsPods) {
  ASSERT_TRUE(
      server_.create("modeldeployments",
                     {{"metadata", {{"name", "chat"}, {"namespace", "ml"}}},
                      {"spec",
                       {{"model", {{"name", "llama-8b"}, {"weights", "16Gi"}, {"kvCache", "4Gi"}}},
                        {"version", "v1"},
                        {"replicas", {{"min", 2}, {"max", 4}}},
                        {"autoscaling", {{"policy", "hpa"}, {"targets", {{"queuePerReplica", 5}}}}},
                        {"image", "vllm/vllm-openai:v0.6"}}}}));
  controller_->start();
  ASSERT_TRUE(eventually([&] { return pods().size() == 2; }));
  // The model profile and the deployment exist; the plane placed nothing itself.
  const json d = withPlane<json>([](ControlPlane& p) { return *p.getDeployment("ml.chat"); });
  EXPECT_EQ(d["placedBy"], "kubernetes");
  EXPECT_EQ(d["model"], "llama-8b");
  EXPECT_EQ(d["recommender"], "hpa");
  EXPECT_EQ(d["status"]["desired"], 2);
  EXPECT_TRUE(d["replicas"].empty());
  EXPECT_TRUE(withPlane<bool>([](ControlPlane& p) { return p.findModel("llama-8b").has_value(); }));

  // The extender binds the first pod: its booking carries the deployment's name.
  const json pod = pods()[0];
  const std::string id = "ml/" + pod["metadata"]["name"].get<std::string>();
  ASSERT_EQ(pod["metadata"]["annotations"]["tessera.io/deployment"], "ml.chat");
  auto placed = withPlane<bool>([&](ControlPlane& p) {
    return json_api::placeReplicas(
               p, {{"replicaId", id}, {"model", "llama-8b"}, {"deployment", "ml.chat"}})
        .has_value();
  });
  ASSERT_TRUE(placed);
  // The autoscaler's period: one bound, one still to come.
  withPlane<int>([&](ControlPlane& p) {
    clock_.advance(20'000);
    p.tick();
    return 0;
  });
  const json after = withPlane<json>([](ControlPlane& p) { return *p.getDeployment("ml.chat"); });
  EXPECT_EQ(after["status"]["loading"], 1);
  EXPECT_EQ(after["status"]["pending"], 1);
  EXPECT_EQ(
      withPlane<std::size_t>([](ControlPlane& p) { return p.listReplicas()["replicas"].size(); }),
      1u);  // the plane added no replica of its own

  // Kubelet: the pod runs and is ready → the booking is loaded.
  json running = *server_.get("pods", "ml", pod["metadata"]["name"]);
  running["status"] = {{"phase", "Running"},
                       {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}};
  ASSERT_TRUE(server_.updateStatus("pods", running));
  ASSERT_TRUE(eventually([&] {
    return withPlane<std::string>([&](ControlPlane& p) {
             auto r = p.getReplica(id);
             return r ? (*r)["phase"].get<std::string>() : std::string();
           }) == "loaded";
  }));

  // The pod is deleted: its booking goes and the controller makes a new pod.
  ASSERT_TRUE(server_.remove("pods", "ml", pod["metadata"]["name"]));
  ASSERT_TRUE(eventually([&] {
    return !withPlane<bool>([&](ControlPlane& p) { return p.getReplica(id).has_value(); });
  }));
  ASSERT_TRUE(eventually([&] { return pods().size() == 2; }));

  // Kubernetes cordons a node Tessera knows.
  ASSERT_TRUE(server_.create(
      "nodes", {{"metadata", {{"name", "gpu-2"}}}, {"spec", {{"unschedulable", true}}}}));
  ASSERT_TRUE(eventually([&] {
    return withPlane<bool>(
        [](ControlPlane& p) { return (*p.getNode("gpu-2"))["cordoned"] == true; });
  }));
  EXPECT_EQ(withPlane<json>([](ControlPlane& p) { return (*p.getNode("gpu-1"))["cordoned"]; }),
            false);

  // Deleting the ModelDeployment deletes the deployment and the pods.
  ASSERT_TRUE(server_.remove("modeldeployments", "ml", "chat"));
  ASSERT_TRUE(eventually([&] {
    return !withPlane<bool>([](ControlPlane& p) { return p.hasDeployment("ml.chat"); });
  }));
  ASSERT_TRUE(eventually([&] { return pods().empty(); }));
}

TEST_F(KubeFleetTest, ASpecTesseraRefusesIsReportedOnTheObject) {
  ASSERT_TRUE(server_.create(
      "modeldeployments", {{"metadata", {{"name", "ghost"}, {"namespace", "ml"}}},
                           {"spec", {{"model", {{"name", "never-registered"}}}, {"image", "x"}}}}));
  controller_->start();
  ASSERT_TRUE(eventually([&] {
    const json s = server_.get("modeldeployments", "ml", "ghost")->value("status", json::object());
    for (const json& c : s.value("conditions", json::array())) {
      if (c["type"] == "Degraded" && c["reason"] == "DeploymentRejected") {
        return c["message"].get<std::string>().find("never-registered") != std::string::npos;
      }
    }
    return false;
  }));
  EXPECT_TRUE(pods().empty());
}

TEST_F(KubeFleetTest, ADeploymentWhoseModelDeploymentIsGoneIsDeleted) {
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "m"}, {"weights", "1Gi"}}));
  ASSERT_TRUE(json_api::putDeployment(
      *plane_,
      {{"name", "ml.gone"}, {"model", "m"}, {"minReplicas", 0}, {"placedBy", "kubernetes"}}));
  ASSERT_TRUE(
      json_api::putDeployment(*plane_, {{"name", "native"}, {"model", "m"}, {"minReplicas", 0}}));
  controller_->start();
  ASSERT_TRUE(eventually([&] {
    return !withPlane<bool>([](ControlPlane& p) { return p.hasDeployment("ml.gone"); });
  }));
  EXPECT_TRUE(withPlane<bool>([](ControlPlane& p) { return p.hasDeployment("native"); }));
}

// GPU mode dra (docs/dra.md): each replica is booked by the engine before its pod exists; the
// controller writes a ResourceClaim pinning the booked GPU and share, and a pod with that
// claim and node affinity, without tessera.io/* resources. Deleting the pod deletes its claim
// and frees the booking; a claim the API server refuses leaves nothing booked and no pod.
TEST_F(KubeFleetTest, DraModeWritesAClaimPinningTheEnginesChoiceForEachReplica) {
  // What the cluster and the books hold, for a wait that timed out.
  auto dump = [&] {
    std::string out = "pods:";
    for (const json& p : pods()) out += " " + p["metadata"]["name"].get<std::string>();
    out += "; claims:";
    for (const json& c : server_.list("resourceclaims")) {
      out += " " + c["metadata"]["name"].get<std::string>();
    }
    out +=
        "; bookings: " + withPlane<json>([](ControlPlane& p) { return p.listReplicas(); }).dump();
    out += "; controller: created " + std::to_string(controller_->stats().podsCreated) + " pods, " +
           std::to_string(controller_->stats().claimsCreated) + " claims";
    return out;
  };
  startController(k8s::GpuMode::kDra);
  ASSERT_TRUE(
      server_.create("modeldeployments",
                     {{"metadata", {{"name", "chat"}, {"namespace", "ml"}, {"uid", "md-1"}}},
                      {"spec",
                       {{"model", {{"name", "llama-8b"}, {"weights", "16Gi"}, {"kvCache", "4Gi"}}},
                        {"version", "v1"},
                        {"replicas", {{"min", 2}, {"max", 4}}},
                        {"resources", {{"gpuMemory", "24Gi"}, {"gpuCompute", "250m"}}},
                        {"image", "vllm/vllm-openai:v0.6"}}}}));
  controller_->start();
  ASSERT_TRUE(eventually([&] { return pods().size() == 2; })) << dump();
  for (const json& pod : pods()) {
    const std::string name = pod["metadata"]["name"];
    SCOPED_TRACE(name);
    const std::string id = "ml/" + name;
    // The booking: the engine's node and GPU.
    const auto replica = withPlane<std::optional<json>>([&](ControlPlane& p) {
      auto r = p.getReplica(id);
      return r ? std::optional<json>(*r) : std::nullopt;
    });
    ASSERT_TRUE(replica) << "no booking for " << id;
    const std::string node = (*replica)["node"];
    // The pod: the claim, the node, no extended resources.
    const json& spec = pod["spec"];
    EXPECT_EQ(spec["resourceClaims"],
              json::array({{{"name", "tessera-gpu"}, {"resourceClaimName", name + "-gpu"}}}));
    EXPECT_EQ(spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                  ["nodeSelectorTerms"][0]["matchFields"][0]["values"],
              json::array({node}));
    const json resources = spec["containers"][0].value("resources", json::object());
    EXPECT_FALSE(resources.value("requests", json::object()).contains("tessera.io/gpus"))
        << resources.dump();
    EXPECT_EQ(spec["containers"][0]["resources"]["claims"],
              json::array({{{"name", "tessera-gpu"}}}));
    // The claim: the booked GPU's uuid and the booked share, owned by the ModelDeployment.
    const auto claim = server_.get("resourceclaims", "ml", name + "-gpu");
    ASSERT_TRUE(claim) << "no claim for " << name;
    const json& request = (*claim)["spec"]["devices"]["requests"][0]["exactly"];
    EXPECT_EQ(request["deviceClassName"], "gpu.tessera.io");
    const std::string uuid = "GPU-" + node;
    EXPECT_NE(
        request["selectors"][0]["cel"]["expression"].get<std::string>().find("'" + uuid + "'"),
        std::string::npos)
        << request.dump();
    EXPECT_EQ(request["capacity"]["requests"]["compute"], "250");
    EXPECT_EQ(request["capacity"]["requests"]["memory"],
              std::to_string((*replica)["gpus"][0]["reservedMib"].get<std::int64_t>()) + "Mi");
    EXPECT_EQ((*claim)["metadata"]["ownerReferences"][0]["kind"], "ModelDeployment");
    EXPECT_EQ((*claim)["metadata"]["annotations"]["tessera.io/replica"], id);
  }
  EXPECT_EQ(controller_->stats().claimsCreated, 2);

  // kube-scheduler's allocator disagrees with the engine: the pod gets one Warning event with
  // the engine's choice and kube-scheduler's message, however often the pod is updated.
  {
    json pending = pods()[1];
    pending["status"] = {
        {"phase", "Pending"},
        {"conditions",
         json::array({{{"type", "PodScheduled"},
                       {"status", "False"},
                       {"reason", "Unschedulable"},
                       {"message", "0/2 nodes are available: 2 cannot allocate all claims."}}})}};
    ASSERT_TRUE(server_.updateStatus("pods", pending));
    ASSERT_TRUE(eventually([&] { return server_.list("events").size() == 1; })) << dump();
    pending = *server_.get("pods", "ml", pending["metadata"]["name"]);
    pending["status"]["conditions"][0]["message"] = "0/2 nodes are available: still no.";
    ASSERT_TRUE(server_.updateStatus("pods", pending));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::vector<json> events = server_.list("events");
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0]["reason"], "TesseraClaimUnsatisfied");
    EXPECT_EQ(events[0]["type"], "Warning");
    EXPECT_EQ(events[0]["involvedObject"]["name"], pending["metadata"]["name"]);
    const std::string message = events[0]["message"];
    EXPECT_NE(message.find("cannot allocate all claims"), std::string::npos) << message;
    EXPECT_NE(message.find("Tessera chose node gpu-"), std::string::npos) << message;
    EXPECT_NE(message.find("uuid"), std::string::npos) << message;
  }

  // A pod deleted: its claim goes, its booking is freed, a new pod and claim come.
  const std::string first = pods()[0]["metadata"]["name"];
  ASSERT_TRUE(server_.remove("pods", "ml", first));
  ASSERT_TRUE(eventually([&] { return !server_.get("resourceclaims", "ml", first + "-gpu"); }))
      << dump();
  ASSERT_TRUE(eventually([&] {
    return !withPlane<bool>(
        [&](ControlPlane& p) { return p.getReplica("ml/" + first).has_value(); });
  })) << dump();
  ASSERT_TRUE(
      eventually([&] { return pods().size() == 2 && server_.list("resourceclaims").size() == 2; }));

  // The API server refuses claims: no pod is made, and nothing stays booked for it.
  server_.refuseWrites([](const std::string& resource, const json&) {
    return resource == "resourceclaims" ? 503 : 0;
  });
  const std::size_t bookedBefore =
      withPlane<std::size_t>([](ControlPlane& p) { return p.listReplicas()["replicas"].size(); });
  ASSERT_TRUE(server_.remove("pods", "ml", pods()[0]["metadata"]["name"]));
  ASSERT_TRUE(eventually([&] { return pods().size() == 1; })) << dump();
  // Several reconciles are refused meanwhile. Each books, fails to write the claim and takes
  // the booking back: at most the one in flight is ever seen, and none stays.
  auto booked = [&] {
    return withPlane<std::size_t>(
        [](ControlPlane& p) { return p.listReplicas()["replicas"].size(); });
  };
  for (int i = 0; i < 20; ++i) {
    EXPECT_LE(booked(), bookedBefore);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(pods().size(), 1u);
  EXPECT_TRUE(eventually([&] { return booked() == bookedBefore - 1; }));
  server_.refuseWrites({});
  ASSERT_TRUE(eventually([&] { return pods().size() == 2; })) << dump();
}

}  // namespace
}  // namespace tessera::api
