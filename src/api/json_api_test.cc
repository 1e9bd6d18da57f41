// The JSON codec in front of the plane's typed operations (api/json_api.h): what a decoder
// leaves to the plane (a model named by name, the object a path names, a heartbeat's figures
// against the card) and the stored deployment document, the fields as given.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/codec.h"
#include "api/control_plane.h"
#include "api/json_api.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

class JsonApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(p) << p.error().message;
    plane_ = std::move(*p);
    ASSERT_TRUE(json_api::registerNode(
        *plane_, {{"name", "n1"}, {"cpu", 64}, {"gpus", json::array({{{"type", "A100-80GB"}}})}}));
    ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "m"}, {"weights", "16Gi"}, {"priority", 7}}));
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1'000'000};
  std::unique_ptr<ControlPlane> plane_;
};

// A request that names a registered model is decoded with no lock (the name only), and the
// plane puts in the profile registered when it runs: the replica gets the model's priority.
TEST_F(JsonApiTest, AModelNamedByNameIsTheOneRegisteredWhenThePlaneRuns) {
  auto request = json_api::decodePlaceReplicas({{"replicaId", "r-0"}, {"model", "m"}}, catalog_);
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(request->registeredModel, "m");
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "m"}, {"weights", "16Gi"}, {"priority", 9}}));
  auto placed = plane_->placeReplicas(std::move(*request));
  ASSERT_TRUE(placed) << placed.error().error.message;
  EXPECT_EQ((*placed)["replicas"][0]["priority"], 9) << placed->dump();

  // One written inline needs nothing registered.
  auto inline_ = json_api::decodePlaceReplicas(
      {{"replicaId", "r-1"}, {"model", {{"name", "x"}, {"weightsMib", 100}}}}, catalog_);
  ASSERT_TRUE(inline_) << inline_.error().message;
  EXPECT_FALSE(inline_->registeredModel);
  EXPECT_EQ(inline_->requests.at(0).model.weightsMib, 100);

  // Not registered (any more): the files' error, naming the body's field, and nothing booked.
  ASSERT_TRUE(plane_->removeReplica("r-0"));
  ASSERT_TRUE(plane_->deleteModel("m"));
  auto gone = json_api::placeReplicas(*plane_, {{"name", "r"}, {"count", 2}, {"model", "m"}});
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().error.message,
            R"(model: unknown model "m"; no models are declared (add them under `models:` or )"
            "write the profile inline)");
  EXPECT_EQ(plane_->listReplicas()["replicas"].size(), 0u);
  auto explained = json_api::explain(*plane_, {{"replicaId", "r"}, {"model", "m"}});
  ASSERT_FALSE(explained);
  EXPECT_EQ(explained.error().message, gone.error().error.message);
}

// A body that does not decode is answered with its error, unless what the path names does not
// exist: then the plane's 404, as it answered before it looked at a body.
TEST_F(JsonApiTest, AMissingObjectIsAnswered404BeforeAMalformedBody) {
  const json bad = {{"bogus", 1}};
  auto missing = json_api::heartbeat(*plane_, "n9", bad);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "node n9 is not registered");
  auto malformed = json_api::heartbeat(*plane_, "n1", bad);
  ASSERT_FALSE(malformed);
  EXPECT_EQ(malformed.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(malformed.error().message.starts_with("bogus: unknown field"))
      << malformed.error().message;

  EXPECT_EQ(json_api::replicaSignals(*plane_, "r-9", bad).error().message,
            "replica r-9 is not placed");
  EXPECT_EQ(json_api::deploymentSignals(*plane_, "d", bad).error().message,
            "deployment d does not exist");
  EXPECT_EQ(json_api::confirmAllocation(*plane_, "n9", bad).error().message,
            "node n9 is not registered");
  EXPECT_TRUE(json_api::confirmAllocation(*plane_, "n1", bad)
                  .error()
                  .message.starts_with("bogus: unknown field"));
}

// What the decoder cannot know, the card a GPU id names, the plane checks with the texts the
// API has always answered.
TEST_F(JsonApiTest, AHeartbeatsFiguresAreCheckedAgainstTheNodesCards) {
  auto request = json_api::decodeHeartbeat(
      {{"gpus", {{{"id", "0"}, {"usedMib", 1'000'000}, {"replicaUsedMib", {{"a", 1.5}}}}}}});
  ASSERT_TRUE(request) << request.error().message;
  auto over = plane_->heartbeat("n1", *request);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().message, "gpus[0].usedMib: must be between 0 and 81920, got 1000000");
  request->gpus[0].usedMib = 100;
  auto fraction = plane_->heartbeat("n1", *request);
  ASSERT_FALSE(fraction);
  EXPECT_EQ(fraction.error().message,
            "gpus[0].replicaUsedMib.a: expected a MiB count from 0 to the card's 81920");
  request->gpus[0].id = "7";
  EXPECT_EQ(plane_->heartbeat("n1", *request).error().message,
            R"(gpus[0].id: node n1 has no GPU "7")");
  auto ok = json_api::heartbeat(*plane_, "n1", {{"gpus", {{{"id", "0"}, {"usedMib", 100}}}}});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(*ok, (json{{"node", "n1"}, {"gpus", 1}}));
}

// The store keeps a deployment as given: the fields written, and no default filled in (the
// model's priority is taken again when the document is read back). Read back, it is the same
// document.
TEST_F(JsonApiTest, ADeploymentIsStoredAsGiven) {
  const json body = {{"name", "chat"},
                     {"model", "m"},
                     {"maxReplicas", 4},
                     {"placedBy", nullptr},
                     {"autoscaling", {{"recommender", "hpa"}, {"args", {{"queuePerReplica", 5}}}}}};
  auto request = json_api::decodePutDeployment(body);
  ASSERT_TRUE(request) << request.error().message;
  const json stored = deploymentDocument(request->spec);
  EXPECT_EQ(
      stored,
      (json{{"name", "chat"},
            {"model", "m"},
            {"maxReplicas", 4},
            {"autoscaling", {{"recommender", "hpa"}, {"args", {{"queuePerReplica", 5.0}}}}}}));
  auto again = json_api::decodePutDeployment(stored);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(deploymentDocument(again->spec), stored);

  auto put = plane_->putDeployment(std::move(*request));
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_EQ((*put)["priority"], 7);
  EXPECT_EQ((*put)["minReplicas"], 1);
  EXPECT_EQ((*put)["recommender"], "hpa");

  // HPA's scale-down policies ride along: stored as given, and the autoscaler takes them in
  // place of the recommender's own.
  const json policies = {
      {"name", "chat"},
      {"model", "m"},
      {"autoscaling",
       {{"recommender", "tessera"},
        {"scaleDownPolicies",
         json::array({{{"type", "Percent"}, {"value", 100}, {"periodSeconds", 15}},
                      {{"type", "Pods"}, {"value", 2}, {"periodSeconds", 60}}})}}}};
  auto withPolicies = json_api::decodePutDeployment(policies);
  ASSERT_TRUE(withPolicies) << withPolicies.error().message;
  EXPECT_EQ(deploymentDocument(withPolicies->spec), policies);
  const scale::AutoscalerConfig config = withPolicies->spec.autoscalerConfig();
  ASSERT_EQ(config.behavior.scaleDown.policies.size(), 2u);
  EXPECT_EQ(config.behavior.scaleDown.policies[0].type, scale::PolicyType::kPercent);
  EXPECT_EQ(config.behavior.scaleDown.policies[0].value, 100);
  EXPECT_EQ(config.behavior.scaleDown.policies[0].periodSeconds, 15);
  EXPECT_EQ(config.behavior.scaleDown.policies[1].type, scale::PolicyType::kPods);
  EXPECT_EQ(config.behavior.scaleDown.policies[1].value, 2);
  for (const auto& [bad, says] : std::vector<std::pair<json, std::string>>{
           {json::array(), "autoscaling.scaleDownPolicies: expected an array of 1 to 10"},
           {json::array({{{"type", "Ratio"}, {"value", 1}, {"periodSeconds", 15}}}),
            "autoscaling.scaleDownPolicies[0].type: expected Pods or Percent"},
           {json::array({{{"type", "Pods"}, {"value", 0}, {"periodSeconds", 15}}}),
            "autoscaling.scaleDownPolicies[0].value: expected a whole number from 1 to 100000"},
           {json::array({{{"type", "Pods"}, {"value", 1}, {"periodSeconds", 3600}}}),
            "autoscaling.scaleDownPolicies[0].periodSeconds: expected a whole number from 1 to "
            "1800"},
           {json::array({{{"type", "Pods"}, {"value", 1}}}),
            "autoscaling.scaleDownPolicies[0]: value and periodSeconds are required"},
           {json::array({{{"type", "Pods"}, {"value", 1}, {"periodSeconds", 15}, {"x", 1}}}),
            "autoscaling.scaleDownPolicies[0].x: unknown field"}}) {
    json body = policies;
    body["autoscaling"]["scaleDownPolicies"] = bad;
    auto refused = json_api::decodePutDeployment(body);
    ASSERT_FALSE(refused) << bad;
    EXPECT_TRUE(refused.error().message.starts_with(says)) << refused.error().message;
  }
  // null is absent, as for the other optional fields: the recommender's own policy.
  json none = policies;
  none["autoscaling"]["scaleDownPolicies"] = nullptr;
  auto withNone = json_api::decodePutDeployment(none);
  ASSERT_TRUE(withNone) << withNone.error().message;
  EXPECT_TRUE(withNone->spec.autoscalerConfig().behavior.scaleDown.policies.empty());

  // A recommender that refuses its settings is a malformed body: refused by the decoder.
  auto refused = json_api::decodePutDeployment(
      {{"name", "chat"}, {"model", "m"}, {"autoscaling", {{"recommender", "nope"}}}});
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().message.starts_with("autoscaling: ")) << refused.error().message;
  // An unknown model is the plane's to say: the decoder does not know the books.
  auto unknown = json_api::decodePutDeployment({{"name", "d2"}, {"model", "zz"}});
  ASSERT_TRUE(unknown) << unknown.error().message;
  EXPECT_EQ(plane_->putDeployment(std::move(*unknown)).error().message,
            R"(model: unknown model "zz" (register it with POST /api/v1/models first))");
}

}  // namespace
}  // namespace tessera::api
