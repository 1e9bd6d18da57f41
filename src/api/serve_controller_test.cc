// `tessera serve` with a Kubernetes API runs the ModelDeployment controller: against the test
// API server (src/k8s/testing), a ModelDeployment becomes a Tessera deployment, pods and a
// status; --controller=false leaves it off. In GPU mode dra it serves the claim webhook too.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/testing/serve_process.h"
#include "common/testing/eventually.h"
#include "k8s/testing/fake_apiserver.h"

namespace {

// The real binary starts its informer and controller: give them up to a minute.
bool inAMinute(const std::function<bool()>& pred) {
  return tessera::eventually(pred, std::chrono::seconds(60), std::chrono::milliseconds(20));
}

using nlohmann::json;

json modelDeployment() {
  return {{"metadata", {{"name", "chat"}, {"namespace", "ml"}}},
          {"spec",
           {{"model", {{"name", "llama-8b"}, {"weights", "16Gi"}}},
            {"version", "v1"},
            {"replicas", {{"min", 2}, {"max", 4}}},
            {"image", "vllm/vllm-openai:v0.6"}}}};
}

TEST(ServeController, AModelDeploymentBecomesADeploymentPodsAndAStatus) {
  tessera::k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  ASSERT_TRUE(api.create("modeldeployments", modelDeployment()));
  tessera::api::testing::ServeProcess serve(
      TESSERA_BINARY,
      {"--listen", "127.0.0.1:0", "--store", ":memory:", "--kube-api-server", api.url()});
  ASSERT_GT(serve.port(), 0) << serve.banner();
  EXPECT_NE(serve.banner().find("watching ModelDeployments"), std::string::npos)
      << serve.banner();

  auto pods = [&] {
    int n = 0;
    for (const json& p : api.list("pods")) {
      n += p["metadata"]["annotations"].value("tessera.io/deployment", "") == "ml.chat" ? 1 : 0;
    }
    return n;
  };
  ASSERT_TRUE(inAMinute([&] { return pods() == 2; }));
  httplib::Client http("127.0.0.1", serve.port());
  auto d = http.Get("/api/v1/deployments/ml.chat");
  ASSERT_TRUE(d);
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body)["placedBy"], "kubernetes") << d->body;
  EXPECT_TRUE(json::parse(d->body)["replicas"].empty()) << d->body;  // pods, not placements
  ASSERT_TRUE(inAMinute([&] {
    const json status = api.get("modeldeployments", "ml", "chat")->value("status", json());
    return status.is_object() && status.value("replicas", 0) == 2 &&
           status.value("currentVersion", "") == "v1";
  }));
}

TEST(ServeController, IsOffWithControllerFalse) {
  tessera::k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  tessera::api::testing::ServeProcess serve(
      TESSERA_BINARY, {"--listen", "127.0.0.1:0", "--store", ":memory:", "--kube-api-server",
                       api.url(), "--controller=false"});
  ASSERT_GT(serve.port(), 0) << serve.banner();
  EXPECT_EQ(serve.banner().find("watching ModelDeployments"), std::string::npos)
      << serve.banner();
  EXPECT_NE(serve.banner().find("posts bindings to " + api.url()), std::string::npos)
      << serve.banner();
}

TEST(ServeController, InGpuModeDraTheClaimWebhookPinsAClaimMadeFromATemplate) {
  tessera::k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  auto pod = api.create(
      "pods", {{"metadata", {{"name", "embed-0"}, {"namespace", "ml"}}},
               {"spec",
                {{"resourceClaims",
                  json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "tessera-gpu"}}})},
                 {"containers", json::array({{{"name", "server"}, {"image", "x"}}})}}}});
  ASSERT_TRUE(pod);
  const json claim = {
      {"metadata",
       {{"generateName", "embed-0-gpu-"},
        {"namespace", "ml"},
        {"annotations", {{"resource.kubernetes.io/pod-claim-name", "gpu"}}},
        {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                          {"kind", "Pod"},
                                          {"name", "embed-0"},
                                          {"uid", (*pod)["metadata"]["uid"]},
                                          {"controller", true}}})}}},
      {"spec",
       {{"devices",
         {{"requests",
           json::array({{{"name", "gpu"},
                         {"exactly",
                          {{"deviceClassName", "gpu.tessera.io"},
                           {"capacity", {{"requests", {{"memory", "10Gi"}}}}}}}}})}}}}}};
  const json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "r-1"},
        {"kind", {{"group", "resource.k8s.io"}, {"version", "v1"}, {"kind", "ResourceClaim"}}},
        {"namespace", "ml"},
        {"operation", "CREATE"},
        {"object", claim}}}};
  tessera::api::testing::ServeProcess serve(
      TESSERA_BINARY, {"--listen", "127.0.0.1:0", "--store", ":memory:", "--kube-api-server",
                       api.url(), "--gpu-mode", "dra"});
  ASSERT_GT(serve.port(), 0) << serve.banner();
  EXPECT_NE(serve.banner().find("claim webhook at /admission/resourceclaims"), std::string::npos)
      << serve.banner();
  httplib::Client http("127.0.0.1", serve.port());
  auto node = http.Post("/api/v1/nodes",
                        json{{"name", "gpu-a"},
                             {"cpu", 16},
                             {"gpus", json::array({{{"type", "L4"}, {"uuid", "GPU-a0"}}})}}
                            .dump(),
                        "application/json");
  ASSERT_TRUE(node);
  ASSERT_EQ(node->status, 201) << node->body;
  auto res = http.Post("/admission/resourceclaims", review.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json answer = json::parse(res->body)["response"];
  EXPECT_EQ(answer["uid"], "r-1");
  EXPECT_EQ(answer["allowed"], true);
  EXPECT_EQ(answer["patchType"], "JSONPatch") << answer.dump();
  auto booked = http.Get("/api/v1/replicas/ml/embed-0");
  ASSERT_TRUE(booked);
  EXPECT_EQ(booked->status, 200) << booked->body;
  EXPECT_EQ(json::parse(booked->body)["node"], "gpu-a");

  // Without the controller nothing would free the booking: the webhook pins nothing.
  tessera::api::testing::ServeProcess off(
      TESSERA_BINARY, {"--listen", "127.0.0.1:0", "--store", ":memory:", "--kube-api-server",
                       api.url(), "--gpu-mode", "dra", "--controller=false"});
  ASSERT_GT(off.port(), 0) << off.banner();
  EXPECT_NE(off.banner().find("--controller=false"), std::string::npos) << off.banner();
  httplib::Client offHttp("127.0.0.1", off.port());
  res = offHttp.Post("/admission/resourceclaims", review.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_FALSE(json::parse(res->body)["response"].contains("patch")) << res->body;
}

}  // namespace
