// The claim webhook end to end (k8s/claim_admission.h): AdmissionReviews over HTTP to the
// real server on loopback, a real ControlPlane booking through its engine, the pod in the test
// API server. The patch the answer carries is applied as the API server would, and the claim
// it yields is handed to the allocator written from the DRA rules
// (src/dra/testing/first_fit_allocator.h) over slices as the agents publish them: it must land
// on exactly the GPU the engine booked, and where first fit alone would land elsewhere.
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <string>

#include "api/control_plane.h"
#include "api/http_server.h"
#include "api/json_api.h"
#include "api/kube_fleet.h"
#include "common/clock.h"
#include "common/testing/eventually.h"
#include "common/text.h"
#include "dra/testing/first_fit_allocator.h"
#include "k8s/claim_admission.h"
#include "k8s/controller.h"
#include "k8s/dra_claims.h"
#include "k8s/testing/fake_apiserver.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

// The nodes' GPUs: node-a has two A100-80GB, node-b one H100-80GB (in that listing order).
const std::map<std::string, std::pair<std::string, int>> kNodes = {{"node-a", {"A100-80GB", 2}},
                                                                   {"node-b", {"H100-80GB", 1}}};

std::string uuidOf(const std::string& node, int index) {
  return "GPU-" + node + "-" + std::to_string(index);
}

// A node's pool as the agent's driver publishes it (src/dra/slices.cc): one device per GPU,
// shared by consumable memory (MiB steps) and compute (thousandths).
json sliceOf(const std::string& node, int gpus) {
  json devices = json::array();
  for (int i = 0; i < gpus; ++i) {
    devices.push_back(
        {{"name", "gpu-" + std::to_string(i)},
         {"attributes", {{"type", {{"string", "gpu"}}}, {"uuid", {{"string", uuidOf(node, i)}}}}},
         {"capacity",
          {{"memory",
            {{"value", "81920Mi"},
             {"requestPolicy",
              {{"default", "81920Mi"}, {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}},
           {"compute",
            {{"value", "1000"},
             {"requestPolicy",
              {{"default", "0"}, {"validRange", {{"min", "0"}, {"step", "1"}}}}}}}}},
         {"allowMultipleAllocations", true}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.tessera.io-0"}}},
          {"spec",
           {{"driver", "gpu.tessera.io"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

class ClaimWebhookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto plane = ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(plane) << plane.error().message;
    plane_ = std::move(*plane);
    for (const auto& [node, gpus] : kNodes) {
      json list = json::array();
      for (int i = 0; i < gpus.second; ++i) {
        list.push_back({{"type", gpus.first}, {"uuid", uuidOf(node, i)}});
      }
      ASSERT_TRUE(json_api::registerNode(*plane_, {{"name", node}, {"cpu", 64}, {"gpus", list}}));
    }
    ASSERT_TRUE(api_.start());
    k8s::KubeConfig kube;
    kube.server = api_.url();
    auto client = k8s::KubeClient::create(kube);
    ASSERT_TRUE(client) << client.error().message;
    kube_ = std::move(*client);
    admission_ = std::make_unique<k8s::ClaimAdmission>(*kube_);
    startServer([](ServerConfig&) {});
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  void startServer(const std::function<void(ServerConfig&)>& edit) {
    if (server_) server_->stop();
    ServerConfig config;
    config.port = 0;
    config.threads = 2;
    config.admission = admission_.get();
    edit(config);
    server_ = std::make_unique<HttpServer>(*plane_, config);
    auto port = server_->start();
    ASSERT_TRUE(port) << port.error().message;
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client_->set_read_timeout(10);
  }
  // A user's pod taking its claim from the template tessera-gpu, as the API server holds it.
  json makePod(const std::string& name, const std::string& gpuTypes) {
    auto made = api_.create(
        "pods",
        {{"metadata",
          {{"name", name},
           {"namespace", "ml"},
           {"annotations", {{"tessera.io/gpu-types", gpuTypes}}}}},
         {"spec",
          {{"resourceClaims",
            json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "tessera-gpu"}}})},
           {"containers",
            json::array({{{"name", "server"},
                          {"image", "vllm/vllm-openai:v0.6.3"},
                          {"resources", {{"claims", json::array({{{"name", "gpu"}}})}}}}})}}}});
    EXPECT_TRUE(made);
    return made ? *made : json();
  }
  // The claim kube-controller-manager makes from the template for `pod`.
  static json claimFor(const json& pod, const json& exactly) {
    const std::string name = pod["metadata"]["name"];
    return {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata",
         {{"generateName", name + "-gpu-"},
          {"namespace", "ml"},
          {"annotations", {{"resource.kubernetes.io/pod-claim-name", "gpu"}}},
          {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                            {"kind", "Pod"},
                                            {"name", name},
                                            {"uid", pod["metadata"]["uid"]},
                                            {"controller", true},
                                            {"blockOwnerDeletion", true}}})}}},
        {"spec",
         {{"devices", {{"requests", json::array({{{"name", "gpu"}, {"exactly", exactly}}})}}}}}};
  }
  static json reviewOf(const json& claim, const std::string& uid) {
    return {
        {"apiVersion", "admission.k8s.io/v1"},
        {"kind", "AdmissionReview"},
        {"request",
         {{"uid", uid},
          {"kind", {{"group", "resource.k8s.io"}, {"version", "v1"}, {"kind", "ResourceClaim"}}},
          {"resource",
           {{"group", "resource.k8s.io"}, {"version", "v1"}, {"resource", "resourceclaims"}}},
          {"namespace", "ml"},
          {"operation", "CREATE"},
          {"userInfo",
           {{"username", "system:serviceaccount:kube-system:resource-claim-controller"}}},
          {"object", claim},
          {"dryRun", false}}}};
  }
  httplib::Result post(const std::string& body) {
    return client_->Post(std::string(k8s::kAdmissionPath), body, "application/json");
  }
  // The review's answer: checks the envelope the API server insists on.
  json admit(const json& claim, const std::string& uid) {
    auto res = post(reviewOf(claim, uid).dump());
    EXPECT_TRUE(res);
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << res->body;
    const json out = json::parse(res->body);
    EXPECT_EQ(out["apiVersion"], "admission.k8s.io/v1");
    EXPECT_EQ(out["kind"], "AdmissionReview");
    EXPECT_EQ(out["response"]["uid"], uid);
    return out["response"];
  }
  // The claim as the API server stores it: the answer's JSONPatch applied.
  static json applied(const json& claim, const json& response) {
    EXPECT_EQ(response["patchType"], "JSONPatch");
    return claim.patch(json::parse(base64Decode(response["patch"].get<std::string>()).value()));
  }
  dra::testing::FirstFitAllocator allocator() const {
    dra::testing::FirstFitAllocator a;
    a.addClass(k8s::deviceClass());
    for (const auto& [node, gpus] : kNodes) {
      const std::string refused = a.addSlice(sliceOf(node, gpus.second));
      EXPECT_EQ(refused, "");
    }
    return a;
  }
  json replica(const std::string& id) {
    auto r = plane_->getReplica(id);
    EXPECT_TRUE(r) << id << " is not booked";
    return r ? *r : json();
  }
  std::string bookedUuid(const std::string& node, const std::string& gpuId) {
    const auto n = plane_->getNode(node);
    EXPECT_TRUE(n);
    for (const json& g : (*n)["gpus"]) {
      if (g["id"] == gpuId) return g["uuid"];
    }
    ADD_FAILURE() << "no GPU " << gpuId << " on " << node;
    return "";
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1'000'000};
  std::unique_ptr<ControlPlane> plane_;
  k8s::testing::FakeApiServer api_;
  std::unique_ptr<k8s::KubeClient> kube_;
  std::unique_ptr<k8s::ClaimAdmission> admission_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ClaimWebhookTest, ThePatchPinsTheEnginesGpuAndShareAndASecondReviewIsTheSame) {
  // H100s only: the engine must choose node-b, where first fit would take node-a's first GPU.
  const json pod = makePod("web-0", "H100-80GB");
  const json claim =
      claimFor(pod, {{"deviceClassName", "gpu.tessera.io"},
                     {"capacity", {{"requests", {{"memory", "20Gi"}, {"compute", "250"}}}}}});
  {
    auto firstFit = allocator();
    const auto unpinned = firstFit.allocate(claim);
    ASSERT_TRUE(unpinned.ok) << unpinned.why;
    EXPECT_EQ(unpinned.results[0].pool, "node-a");
  }
  const json response = admit(claim, "uid-1");
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("warnings")) << response.dump();
  const json pinned = applied(claim, response);

  const json booked = replica("ml/web-0");
  ASSERT_EQ(booked["node"], "node-b");
  ASSERT_EQ(booked["gpus"].size(), 1u);
  const std::int64_t reservedMib = booked["gpus"][0]["reservedMib"];
  EXPECT_EQ(reservedMib, 24576) << "20 GiB times the 1.2 safety factor";
  EXPECT_EQ(pinned["metadata"]["annotations"]["tessera.io/node"], "node-b");
  EXPECT_EQ(pinned["metadata"]["annotations"]["tessera.io/replica"], "ml/web-0");
  EXPECT_EQ(pinned["metadata"]["labels"]["tessera.io/pinned"], "admission");
  EXPECT_EQ(pinned["spec"]["devices"]["requests"][0]["name"], "gpu");

  auto pinnedFit = allocator();
  const auto outcome = pinnedFit.allocate(pinned);
  ASSERT_TRUE(outcome.ok) << outcome.why << "\n" << pinned.dump(1);
  ASSERT_EQ(outcome.results.size(), 1u);
  EXPECT_EQ(outcome.results[0].pool, "node-b");
  EXPECT_EQ(uuidOf("node-b", std::stoi(outcome.results[0].device.substr(4))),
            bookedUuid("node-b", booked["gpus"][0]["id"]));
  EXPECT_EQ(outcome.results[0].consumed.at("memory"),
            static_cast<double>(reservedMib) * 1024 * 1024);
  EXPECT_EQ(outcome.results[0].consumed.at("compute"), 250);
  // The pin names one card: once the books say it is full, a copy of the claim finds no
  // device anywhere else (kube-scheduler leaves the pod Pending rather than move it).
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(pinnedFit.allocate(pinned).ok) << i;
  EXPECT_FALSE(pinnedFit.allocate(pinned).ok) << "4 x 24576 MiB on an 81920 MiB card";

  // The API server may call again (a retry, reinvocation, a claim made again): same booking,
  // same patch.
  const json second = admit(claim, "uid-2");
  EXPECT_EQ(second["patch"], response["patch"]);
  EXPECT_EQ(plane_->listReplicas()["replicas"].size(), 1u);
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_claim_admissions_total{outcome=\"pinned\"} 2"),
            std::string::npos)
      << metrics->body;
}

TEST_F(ClaimWebhookTest, SeveralWholeGpusArePinnedOneRequestEach) {
  const json pod = makePod("train-0", "A100-80GB");
  const json claim = claimFor(pod, {{"deviceClassName", "gpu.tessera.io"}, {"count", 2}});
  const json response = admit(claim, "uid-3");
  EXPECT_EQ(response["allowed"], true);
  const json pinned = applied(claim, response);
  const json booked = replica("ml/train-0");
  ASSERT_EQ(booked["node"], "node-a");
  ASSERT_EQ(booked["gpus"].size(), 2u);
  auto fit = allocator();
  const auto outcome = fit.allocate(pinned);
  ASSERT_TRUE(outcome.ok) << outcome.why << "\n" << pinned.dump(1);
  ASSERT_EQ(outcome.results.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(outcome.results[i].request, "gpu-" + std::to_string(i));
    EXPECT_EQ(outcome.results[i].pool, "node-a");
    EXPECT_EQ(uuidOf("node-a", std::stoi(outcome.results[i].device.substr(4))),
              bookedUuid("node-a", booked["gpus"][i]["id"]));
    // Exclusive: the whole card, so no other claim fits beside it.
    EXPECT_EQ(outcome.results[i].consumed.at("memory"), 81920.0 * 1024 * 1024);
  }
}

TEST_F(ClaimWebhookTest, APodThatCannotBePlacedIsAllowedUnpinnedWithTheEnginesReason) {
  const json pod = makePod("huge-0", "A100-80GB");
  const json claim = claimFor(pod, {{"deviceClassName", "gpu.tessera.io"},
                                    {"capacity", {{"requests", {{"memory", "200Gi"}}}}}});
  const json response = admit(claim, "uid-4");
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("patch"));
  ASSERT_EQ(response["warnings"].size(), 1u);
  const std::string warning = response["warnings"][0];
  EXPECT_NE(warning.find("Tessera did not pin claim ml/huge-0-gpu-*"), std::string::npos)
      << warning;
  EXPECT_NE(warning.find("huge-0"), std::string::npos) << warning;
  EXPECT_FALSE(plane_->getReplica("ml/huge-0"));
  // The engine's reason, on the pod for `kubectl describe`.
  const auto events = api_.list("events");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "TesseraClaimNotPinned");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "huge-0");
  const std::string message = events[0]["message"];
  EXPECT_NE(message.find("fits nowhere"), std::string::npos) << message;
  EXPECT_LE(warning.size(), 256u);
}

TEST_F(ClaimWebhookTest, ClaimsNotFromATesseraTemplatePassUntouched) {
  const json pod = makePod("web-1", "A100-80GB");
  json other = claimFor(pod, {{"deviceClassName", "gpu.nvidia.com"}});
  json response = admit(other, "uid-5");
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("patch"));
  EXPECT_FALSE(response.contains("warnings"));
  json standalone = claimFor(pod, {{"deviceClassName", "gpu.tessera.io"}});
  standalone["metadata"].erase("ownerReferences");
  standalone["metadata"].erase("annotations");
  response = admit(standalone, "uid-6");
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("patch"));
  EXPECT_TRUE(plane_->listReplicas()["replicas"].empty());
}

TEST_F(ClaimWebhookTest, AMalformedReviewIsA400NamingWhatIsWrong) {
  auto error = [&](const std::string& body) {
    auto res = post(body);
    EXPECT_TRUE(res);
    if (!res) return std::string();
    EXPECT_EQ(res->status, 400) << res->body;
    return json::parse(res->body)["error"]["message"].get<std::string>();
  };
  EXPECT_NE(error("{not json").find("body"), std::string::npos);
  const json pod = makePod("web-2", "A100-80GB");
  json review = reviewOf(claimFor(pod, {{"deviceClassName", "gpu.tessera.io"}}), "uid-7");
  review["request"].erase("uid");
  EXPECT_EQ(error(review.dump()), "request.uid: missing");
  review["request"]["uid"] = "uid-7";
  review["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_EQ(error(review.dump()),
            "apiVersion: expected admission.k8s.io/v1, got \"admission.k8s.io/v1beta1\"");
  EXPECT_TRUE(plane_->listReplicas()["replicas"].empty());
}

TEST_F(ClaimWebhookTest, AStandbyAnswers503AndAPlaneWithoutDraPinsNothing) {
  const json pod = makePod("web-3", "A100-80GB");
  const json claim = claimFor(pod, {{"deviceClassName", "gpu.tessera.io"}});
  startServer([](ServerConfig& c) {
    c.leader = [] { return false; };
    c.leaderName = [] { return std::string("tessera-0"); };
  });
  auto res = post(reviewOf(claim, "uid-8").dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(json::parse(res->body)["error"]["code"], "not_leader");
  startServer([](ServerConfig& c) {
    c.admission = nullptr;
    c.admissionOff = "tessera serve runs GPU mode device-plugin";
  });
  const json response = admit(claim, "uid-9");
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("patch"));
  EXPECT_EQ(response["warnings"], json::array({"tessera serve runs GPU mode device-plugin"}));
  EXPECT_TRUE(plane_->listReplicas()["replicas"].empty());
}

// The booking lives as long as the claim: the controller (GPU mode dra) frees it when the
// stored claim is deleted (kube-controller-manager deletes it with its pod), and finds the
// booking of a pod deleted before its claim was ever stored at its next resync.
TEST_F(ClaimWebhookTest, TheBookingGoesWithTheClaimOrThePod) {
  PlaneFleet fleet(
      [this](const std::function<void(ControlPlane&)>& fn) { server_->withPlane(fn); });
  k8s::ControllerOptions o;
  o.gpuMode = k8s::GpuMode::kDra;
  o.resyncMs = 100;
  o.backoffInitialMs = 10;
  k8s::Controller controller(*kube_, fleet, o);
  auto booked = [&](const std::string& id) {
    bool out = false;
    server_->withPlane([&](ControlPlane& p) { out = p.getReplica(id).has_value(); });
    return out;
  };

  const json pod = makePod("web-0", "A100-80GB");
  const json claim =
      claimFor(pod, {{"deviceClassName", "gpu.tessera.io"},
                     {"capacity", {{"requests", {{"memory", "20Gi"}, {"compute", "250"}}}}}});
  const json pinned = applied(claim, admit(claim, "uid-10"));
  auto stored = api_.create("resourceclaims", pinned);  // as the API server stores it
  ASSERT_TRUE(stored) << stored.error().message;
  // Another pod, booked, deleted before its claim was stored (a later admission step refused).
  const json gone = makePod("web-1", "A100-80GB");
  (void)admit(claimFor(gone, {{"deviceClassName", "gpu.tessera.io"}}), "uid-11");
  ASSERT_TRUE(booked("ml/web-0") && booked("ml/web-1"));
  ASSERT_TRUE(api_.remove("pods", "ml", "web-1"));

  controller.start();
  ASSERT_TRUE(eventually([&] { return !booked("ml/web-1"); })) << "the resync frees it";
  EXPECT_EQ(controller.stats().bookingsCollected, 1);
  EXPECT_TRUE(booked("ml/web-0")) << "its claim is still there";
  ASSERT_TRUE(api_.remove("resourceclaims", "ml", (*stored)["metadata"]["name"]));
  ASSERT_TRUE(eventually([&] { return !booked("ml/web-0"); }));
  EXPECT_EQ(controller.stats().pinnedClaimsGone, 1);
  controller.stop();
}

}  // namespace
}  // namespace tessera::api
