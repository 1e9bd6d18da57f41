// The claim webhook's parts (k8s/claim_admission.h): reading an AdmissionReview and a claim's
// ask, the JSONPatch that pins it (applied, as the API server would), and the review against
// the test API server with a booking callback standing in for the control plane. The round
// trip through the real server and engine is src/api/claim_webhook_test.cc.
#include "k8s/claim_admission.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/text.h"
#include "k8s/testing/fake_apiserver.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

json templateClaim(const json& capacity = {{"memory", "20Gi"}, {"compute", "250"}}) {
  json exactly = {{"deviceClassName", "gpu.tessera.io"}};
  if (!capacity.is_null()) exactly["capacity"] = {{"requests", capacity}};
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata",
           {{"generateName", "web-0-gpu-"},
            {"namespace", "ml"},
            {"annotations", {{"resource.kubernetes.io/pod-claim-name", "gpu"}}},
            {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                              {"kind", "Pod"},
                                              {"name", "web-0"},
                                              {"uid", "pod-uid-1"},
                                              {"controller", true},
                                              {"blockOwnerDeletion", true}}})}}},
          {"spec",
           {{"devices", {{"requests", json::array({{{"name", "gpu"}, {"exactly", exactly}}})}}}}}};
}

json review(const json& object, const std::string& uid = "review-1", bool dryRun = false) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", {{"group", "resource.k8s.io"}, {"version", "v1"}, {"kind", "ResourceClaim"}}},
            {"resource",
             {{"group", "resource.k8s.io"}, {"version", "v1"}, {"resource", "resourceclaims"}}},
            {"namespace", "ml"},
            {"operation", "CREATE"},
            {"dryRun", dryRun},
            {"object", object}}}};
}

// What Extender::bookForClaim answers for one shared GPU.
json choice(int gpus = 1) {
  json g = json::array();
  for (int i = 0; i < gpus; ++i) {
    g.push_back({{"id", std::to_string(i)},
                 {"uuid", "GPU-" + std::to_string(i)},
                 {"cardMemoryMib", 81920},
                 {"reservedMib", 24576},
                 {"computeMilli", 250}});
  }
  return {{"replica", "ml/web-0"}, {"node", "node-a"}, {"mode", "shared"}, {"gpus", g}};
}

TEST(AdmissionReviewTest, AMalformedReviewNamesTheField) {
  const json good = review(templateClaim());
  ASSERT_TRUE(readAdmissionReview(good));
  auto message = [](const json& r) {
    auto read = readAdmissionReview(r);
    EXPECT_FALSE(read);
    return read ? std::string() : read.error().message;
  };
  EXPECT_EQ(message(json::array()), "body: expected an AdmissionReview object");
  json v = good;
  v["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_EQ(message(v),
            "apiVersion: expected admission.k8s.io/v1, got \"admission.k8s.io/v1beta1\"");
  json k = good;
  k.erase("kind");
  EXPECT_EQ(message(k), "kind: expected AdmissionReview, got none");
  json noUid = good;
  noUid["request"].erase("uid");
  EXPECT_EQ(message(noUid), "request.uid: missing");
  json op = good;
  op["request"]["operation"] = "MAKE";
  EXPECT_EQ(message(op), "request.operation: expected CREATE, UPDATE, DELETE or CONNECT");
  json dry = good;
  dry["request"]["dryRun"] = "yes";
  EXPECT_EQ(message(dry), "request.dryRun: expected true or false");
  json noObject = good;
  noObject["request"].erase("object");
  EXPECT_EQ(message(noObject), "request.object: expected the object being created");
}

TEST(AdmissionReviewTest, TheAnswerEchoesTheUidAndCarriesTheBase64Patch) {
  const json patch = json::array({{{"op", "add"}, {"path", "/a"}, {"value", 1}}});
  const json a = admissionAnswer("u-1", true, patch, {"careful"});
  EXPECT_EQ(a["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(a["kind"], "AdmissionReview");
  EXPECT_EQ(a["response"]["uid"], "u-1");
  EXPECT_EQ(a["response"]["allowed"], true);
  EXPECT_EQ(a["response"]["patchType"], "JSONPatch");
  EXPECT_EQ(json::parse(base64Decode(a["response"]["patch"].get<std::string>()).value()), patch);
  EXPECT_EQ(a["response"]["warnings"], json::array({"careful"}));
  const json no = admissionAnswer("u-2", false, nullptr, {}, "later");
  EXPECT_FALSE(no["response"].contains("patch"));
  EXPECT_EQ(no["response"]["status"]["message"], "later");
  for (const auto& [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foobar", "Zm9vYmFy"}}) {
    EXPECT_EQ(base64Encode(in), out);
  }
}

TEST(ClaimAskTest, ReadsCountMemoryAndComputeOfTesserasRequestOnly) {
  auto ask = readClaimAsk(templateClaim());
  ASSERT_TRUE(ask && *ask);
  EXPECT_EQ((*ask)->requestName, "gpu");
  EXPECT_EQ((*ask)->gpus, 1);
  EXPECT_EQ((*ask)->memoryMib, 20480);
  EXPECT_EQ((*ask)->computeMilli, 250);
  json whole = templateClaim(nullptr);
  whole["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2;
  ask = readClaimAsk(whole);
  ASSERT_TRUE(ask && *ask);
  EXPECT_EQ((*ask)->gpus, 2);
  EXPECT_FALSE((*ask)->memoryMib);
  json other = templateClaim();
  other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.nvidia.com";
  ask = readClaimAsk(other);
  ASSERT_TRUE(ask);
  EXPECT_FALSE(*ask);
}

TEST(ClaimAskTest, WhatCannotBePinnedIsNamed) {
  auto message = [](const std::function<void(json&)>& edit) {
    json c = templateClaim();
    edit(c["spec"]["devices"]["requests"][0]["exactly"]);
    auto ask = readClaimAsk(c);
    EXPECT_FALSE(ask);
    return ask ? std::string() : ask.error().message;
  };
  EXPECT_EQ(message([](json& e) { e["allocationMode"] = "All"; }),
            "spec.devices.requests[0].exactly.allocationMode: All cannot be pinned; Tessera "
            "places ExactCount requests");
  EXPECT_EQ(message([](json& e) { e["count"] = 17; }),
            "spec.devices.requests[0].exactly.count: expected a whole number from 1 to 16");
  EXPECT_NE(message([](json& e) {
              e["selectors"] = json::array({{{"cel", {{"expression", "true"}}}}});
            }).find("exactly.selectors: Tessera replaces the selectors"),
            std::string::npos);
  EXPECT_EQ(message([](json& e) { e["capacity"]["requests"]["memory"] = "lots"; }),
            "spec.devices.requests[0].exactly.capacity.requests.memory: quantity \"lots\": "
            "expected a size such as 20Gi");
  EXPECT_EQ(message([](json& e) { e["capacity"]["requests"]["compute"] = "2000"; }),
            "spec.devices.requests[0].exactly.capacity.requests.compute: quantity \"2000\": "
            "expected thousandths of a card, 0 to 1000");
  EXPECT_EQ(message([](json& e) { e["capacity"]["requests"]["bandwidth"] = "1"; }),
            "spec.devices.requests[0].exactly.capacity.requests.bandwidth: Tessera's GPUs have "
            "the capacities memory and compute only");
  json two = templateClaim();
  two["spec"]["devices"]["requests"].push_back(two["spec"]["devices"]["requests"][0]);
  two["spec"]["devices"]["requests"][1]["name"] = "more";
  auto ask = readClaimAsk(two);
  ASSERT_FALSE(ask);
  EXPECT_NE(ask.error().message.find("spec.devices.requests[1]: a second request"),
            std::string::npos);
}

TEST(PinPatchTest, AppliedItPinsTheChoiceAndKeepsTheOtherRequests) {
  json claim = templateClaim();
  // Another driver's request before Tessera's, and tolerations on Tessera's.
  json& requests = claim["spec"]["devices"]["requests"];
  requests[0]["exactly"]["tolerations"] =
      json::array({{{"key", "gpu.tessera.io/unhealthy"}, {"operator", "Exists"}}});
  requests.insert(requests.begin(),
                  json{{"name", "nic"}, {"exactly", {{"deviceClassName", "rdma.example.com"}}}});
  auto ask = readClaimAsk(claim);
  ASSERT_TRUE(ask && *ask);
  EXPECT_EQ((*ask)->index, 1u);
  const json pinned = claim.patch(pinPatch(claim, **ask, choice()));
  const json& r = pinned["spec"]["devices"]["requests"];
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["name"], "nic");
  EXPECT_EQ(r[1]["name"], "gpu");  // containers may name the request
  EXPECT_EQ(r[1]["exactly"]["selectors"][0]["cel"]["expression"],
            "device.attributes['gpu.tessera.io'].type == 'gpu' && "
            "device.attributes['gpu.tessera.io'].uuid == 'GPU-0'");
  EXPECT_EQ(r[1]["exactly"]["capacity"]["requests"],
            json({{"memory", "24576Mi"}, {"compute", "250"}}));
  EXPECT_EQ(r[1]["exactly"]["tolerations"], requests[1]["exactly"]["tolerations"]);
  EXPECT_EQ(pinned["metadata"]["labels"]["tessera.io/pinned"], "admission");
  EXPECT_EQ(pinned["metadata"]["annotations"]["tessera.io/replica"], "ml/web-0");
  EXPECT_EQ(pinned["metadata"]["annotations"]["tessera.io/node"], "node-a");
  // kube-controller-manager's annotation and owner stay.
  EXPECT_EQ(pinned["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"], "gpu");
  EXPECT_EQ(pinned["metadata"]["ownerReferences"], claim["metadata"]["ownerReferences"]);

  // Two GPUs: one pinned request each; applying the same patch again changes nothing.
  json two = templateClaim();
  two["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2;
  two["metadata"]["labels"] = {{"team", "search"}};
  ask = readClaimAsk(two);
  ASSERT_TRUE(ask && *ask);
  const json patch = pinPatch(two, **ask, choice(2));
  const json once = two.patch(patch);
  EXPECT_EQ(once["spec"]["devices"]["requests"][0]["name"], "gpu-0");
  EXPECT_EQ(once["spec"]["devices"]["requests"][1]["name"], "gpu-1");
  EXPECT_EQ(once["metadata"]["labels"],
            json({{"team", "search"}, {"tessera.io/pinned", "admission"}}));
  EXPECT_EQ(once.patch(patch), once);
}

TEST(PodAskingTest, TheClaimsAskBecomesTheResourcesTheEngineReads) {
  const json pod = {{"metadata", {{"annotations", {{"tessera.io/gpu-types", "A100-80GB"}}}}},
                    {"spec", {{"containers", json::array({{{"name", "a"}}, {{"name", "b"}}})}}}};
  ClaimAsk share;
  share.gpus = 2;
  share.memoryMib = 20480;
  share.computeMilli = 250;
  const json shared = podAsking(pod, share);
  EXPECT_EQ(shared["spec"]["containers"][0]["resources"]["requests"],
            json({{"tessera.io/gpus", "2"},
                  {"tessera.io/gpu-memory", "20480"},
                  {"tessera.io/gpu-compute", "250"}}));
  EXPECT_FALSE(shared["spec"]["containers"][1].contains("resources"));
  EXPECT_EQ(shared["metadata"], pod["metadata"]);
  ClaimAsk whole;
  EXPECT_EQ(podAsking(pod, whole)["spec"]["containers"][0]["resources"]["requests"],
            json({{"nvidia.com/gpu", "1"}}));
}

class ClaimAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.start());
    KubeConfig config;
    config.server = server.url();
    auto made = KubeClient::create(config);
    ASSERT_TRUE(made) << made.error().message;
    client = std::move(*made);
    admission = std::make_unique<ClaimAdmission>(*client);
  }
  // The pod as the API server holds it; its claim's owner reference carries its uid.
  json makePod(const json& resources = json::object()) {
    json c = {{"name", "server"}, {"image", "x"}};
    if (!resources.empty()) c["resources"] = resources;
    auto made = server.create(
        "pods", {{"metadata", {{"name", "web-0"}, {"namespace", "ml"}}},
                 {"spec",
                  {{"resourceClaims",
                    json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "tessera-gpu"}}})},
                   {"containers", json::array({c})}}}});
    EXPECT_TRUE(made);
    return *made;
  }
  json claimOf(const json& pod) {
    json c = templateClaim();
    c["metadata"]["ownerReferences"][0]["uid"] = pod["metadata"]["uid"];
    return c;
  }
  Result<json> run(const json& body, const ClaimAdmission::Book& book) {
    return admission->review(body, book);
  }
  std::vector<json> events() { return server.list("events"); }

  testing::FakeApiServer server;
  std::unique_ptr<KubeClient> client;
  std::unique_ptr<ClaimAdmission> admission;
};

TEST_F(ClaimAdmissionTest, BooksThePodAsTheClaimAsksAndAnswersThePin) {
  const json pod = makePod();
  json booked;
  auto out = run(review(claimOf(pod)), [&](const json& p) -> Result<json> {
    booked = p;
    return choice();
  });
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ((*out)["response"]["uid"], "review-1");
  EXPECT_EQ((*out)["response"]["allowed"], true);
  ASSERT_TRUE((*out)["response"].contains("patch"));
  EXPECT_FALSE((*out)["response"].contains("warnings"));
  EXPECT_EQ(booked["metadata"]["uid"], pod["metadata"]["uid"]);
  EXPECT_EQ(booked["spec"]["containers"][0]["resources"]["requests"]["tessera.io/gpu-memory"],
            "20480");
  EXPECT_EQ(admission->stats().pinned, 1);
}

TEST_F(ClaimAdmissionTest, WhatItDoesNotPinIsAllowedAsItIs) {
  const json pod = makePod();
  int calls = 0;
  auto book = [&](const json&) -> Result<json> {
    ++calls;
    return choice();
  };
  // Not made from a template (no pod-claim-name annotation): not the webhook's.
  json plain = claimOf(pod);
  plain["metadata"].erase("annotations");
  auto out = run(review(plain), book);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["response"]["allowed"], true);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  EXPECT_FALSE((*out)["response"].contains("warnings"));
  // Another class.
  json other = claimOf(pod);
  other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.nvidia.com";
  out = run(review(other), book);
  ASSERT_TRUE(out);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  // A dry run books nothing and says so.
  out = run(review(claimOf(pod), "dry", true), book);
  ASSERT_TRUE(out);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  EXPECT_EQ((*out)["response"]["warnings"].size(), 1u);
  // A claim that already carries the pin (reinvoked): the pin stands, nothing is booked again.
  const json pinned =
      claimOf(pod).patch(pinPatch(claimOf(pod), *readClaimAsk(claimOf(pod)).value(), choice()));
  out = run(review(pinned), book);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["response"]["allowed"], true);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  EXPECT_FALSE((*out)["response"].contains("warnings"));
  // The claim of a pod that is gone, or of an older pod of the same name.
  json stale = claimOf(pod);
  stale["metadata"]["ownerReferences"][0]["uid"] = "another-uid";
  out = run(review(stale), book);
  ASSERT_TRUE(out);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  ASSERT_TRUE(server.remove("pods", "ml", "web-0"));
  out = run(review(claimOf(pod)), book);
  ASSERT_TRUE(out);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(events().empty());
}

TEST_F(ClaimAdmissionTest, ARefusalIsAllowedUnpinnedWithTheReasonOnThePod) {
  const json pod = makePod();
  auto out = run(review(claimOf(pod)), [](const json&) -> Result<json> {
    return fail(Error::exhausted("pod ml/web-0 fits nowhere: MemoryFit rejected 2 GPUs"));
  });
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["response"]["allowed"], true);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  const std::string warning = (*out)["response"]["warnings"][0];
  EXPECT_NE(warning.find("MemoryFit rejected 2 GPUs"), std::string::npos) << warning;
  const auto e = events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["reason"], "TesseraClaimNotPinned");
  EXPECT_EQ(e[0]["type"], "Warning");
  EXPECT_EQ(e[0]["involvedObject"]["uid"], pod["metadata"]["uid"]);
  EXPECT_EQ(e[0]["message"], warning);
  // A pod that also asks through extended resources is not pinned either.
  ASSERT_TRUE(server.remove("pods", "ml", "web-0"));
  const json both = makePod({{"limits", {{"tessera.io/gpus", "1"}}}});
  out = run(review(claimOf(both)), [](const json&) -> Result<json> { return choice(); });
  ASSERT_TRUE(out);
  EXPECT_FALSE((*out)["response"].contains("patch"));
  EXPECT_NE((*out)["response"]["warnings"][0].get<std::string>().find("tessera.io/gpus"),
            std::string::npos);
}

TEST_F(ClaimAdmissionTest, ALongReasonIsShortenedForTheWarningAndTheEvent) {
  const json pod = makePod();
  const std::string reason = "pod ml/web-0 fits nowhere: " + std::string(3000, 'x');
  auto out = run(review(claimOf(pod)),
                 [&](const json&) -> Result<json> { return fail(Error::exhausted(reason)); });
  ASSERT_TRUE(out);
  const std::string warning = (*out)["response"]["warnings"][0];
  EXPECT_EQ(warning.size(), 256u);
  EXPECT_TRUE(warning.ends_with("xx..."));
  const auto e = events();
  ASSERT_EQ(e.size(), 1u);
  const std::string message = e[0]["message"];
  EXPECT_EQ(message.size(), 1024u);
  EXPECT_TRUE(message.starts_with(warning.substr(0, 253))) << message;
}

TEST_F(ClaimAdmissionTest, AFailedBookingWriteRefusesTheClaimSoItIsMadeAgain) {
  const json pod = makePod();
  auto out = run(review(claimOf(pod)), [](const json&) -> Result<json> {
    return fail(Error::internal("the booking of ml/web-0 could not be stored"));
  });
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["response"]["allowed"], false);
  EXPECT_EQ((*out)["response"]["status"]["code"], 503);
  EXPECT_NE((*out)["response"]["status"]["message"].get<std::string>().find("could not be stored"),
            std::string::npos);
  EXPECT_EQ(admission->stats().refused, 1);
}

}  // namespace
}  // namespace tessera::k8s
