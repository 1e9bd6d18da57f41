// Deployments in the control plane on a manual clock: the autoscaler's decisions become
// placements and drains; what does not fit waits as pending with a reason; a restart keeps
// the deployments and their replicas.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/control_plane.h"
#include "api/json_api.h"
#include "model/gpu_catalog.h"
#include "store/store.h"
#include "store/testing/temp_dir.h"

namespace tessera::api {
namespace {

using nlohmann::json;

class DeploymentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(p) << p.error().message;
    plane_ = std::move(*p);
  }

  void addNodes(int nodes, int gpus) {
    for (int n = 0; n < nodes; ++n) {
      json list = json::array();
      for (int g = 0; g < gpus; ++g) list.push_back({{"type", "A100-80GB"}});
      ASSERT_TRUE(json_api::registerNode(
          *plane_, {{"name", "node-" + std::to_string(n)}, {"cpu", 128}, {"gpus", list}}));
    }
  }
  json status(const std::string& d) { return (*plane_->getDeployment(d))["status"]; }
  std::vector<std::string> replicasOf(const std::string& d) {
    std::vector<std::string> out;
    const json deployment = *plane_->getDeployment(d);  // the loop must not borrow a temporary
    for (const json& r : deployment["replicas"]) out.push_back(r["replica"]);
    return out;
  }
  void everyReplicaLoadedAndReporting(const std::string& d, double waiting, double running) {
    for (const std::string& id : replicasOf(d)) {
      const json r = *plane_->getReplica(id);
      if (r["phase"] == "reserved") {
        ASSERT_TRUE(plane_->replicaLoaded(id));
      }
      ASSERT_TRUE(json_api::replicaSignals(*plane_, id,
                                           {{"waiting", waiting},
                                            {"running", running},
                                            {"kvCacheUsage", 0.3},
                                            {"gpuUtilization", 0.6}}));
    }
  }
  // Ticks once a second for `seconds`.
  void run(int seconds) {
    for (int i = 0; i < seconds; ++i) {
      clock_.advance(1000);
      plane_->tick();
    }
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1'000'000};
  std::unique_ptr<ControlPlane> plane_;
};

json hpaDeployment(int min, int max) {
  return {{"name", "chat"},
          {"model", "llama-8b"},
          {"minReplicas", min},
          {"maxReplicas", max},
          {"autoscaling", {{"recommender", "hpa"}, {"args", {{"queuePerReplica", 5}}}}}};
}

TEST_F(DeploymentTest, QueueDepthScalesUpThenIdleScalesDownThroughDrains) {
  addNodes(2, 4);
  ASSERT_TRUE(json_api::putModel(
      *plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}, {"computeMilli", 500}}));
  auto created = json_api::putDeployment(*plane_, hpaDeployment(2, 6));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(status("chat")["desired"], 2);
  EXPECT_EQ(status("chat")["loading"], 2);  // placed at once, weights loading
  EXPECT_EQ(replicasOf("chat"), (std::vector<std::string>{"chat-0", "chat-1"}));

  // 20 requests waiting per replica against a target of 5: HPA asks ceil(2 × 4) = 8, the
  // maximum is 6, and the default scale-up policy (4 pods or 100 % per 15 s) allows +4.
  everyReplicaLoadedAndReporting("chat", 20, 8);
  run(15);
  EXPECT_EQ(status("chat")["desired"], 6);
  EXPECT_EQ(replicasOf("chat").size(), 6u);
  EXPECT_EQ(status("chat")["loading"], 4);
  EXPECT_EQ(status("chat")["pending"], 0);
  ASSERT_TRUE(plane_->state().checkInvariants());

  // Idle: the 300 s scale-down window holds the count, then drains take replicas out one
  // phase at a time (drain 10 s, flush until nothing is in flight, free 1 s).
  for (int i = 0; i < 40; ++i) {  // signals stay fresh (they lapse after 60 s)
    everyReplicaLoadedAndReporting("chat", 0, 0);
    run(5);
  }
  EXPECT_EQ(status("chat")["desired"], 6) << "still inside the scale-down stabilisation window";
  for (int i = 0; i < 40; ++i) {
    everyReplicaLoadedAndReporting("chat", 0, 0);
    run(5);
  }
  EXPECT_EQ(status("chat")["desired"], 2);
  EXPECT_EQ(status("chat")["draining"], 0);
  EXPECT_EQ(replicasOf("chat").size(), 2u);
  EXPECT_EQ(plane_->state().liveReplicaCount(), 2);
  ASSERT_TRUE(plane_->state().checkInvariants());
  // The events tell the story.
  std::vector<std::string> types;
  const json events = plane_->events(0, 1000);
  for (const json& e : events["events"]) types.push_back(e["type"]);
  EXPECT_NE(std::find(types.begin(), types.end(), "ScaledUp"), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), "ScaledDown"), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), "ReplicaDraining"), types.end());
}

// Pending replicas are a phase, not a naming convention: a deployment whose name holds
// "-pending-" counts its replicas as placed and stays within maxReplicas.
TEST_F(DeploymentTest, ANameHoldingPendingIsJustAName) {
  addNodes(4, 8);
  ASSERT_TRUE(json_api::putModel(
      *plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}, {"computeMilli", 500}}));
  json spec = hpaDeployment(1, 3);
  spec["name"] = "chat-pending-x";
  ASSERT_TRUE(json_api::putDeployment(*plane_, spec));
  for (int i = 0; i < 24; ++i) {
    everyReplicaLoadedAndReporting("chat-pending-x", 20, 8);
    run(5);
    ASSERT_LE(replicasOf("chat-pending-x").size(), 3u) << "after " << 5 * (i + 1) << " s";
  }
  EXPECT_EQ(replicasOf("chat-pending-x").size(), 3u);
  EXPECT_EQ(status("chat-pending-x")["desired"], 3);
  EXPECT_EQ(status("chat-pending-x")["pending"], 0);
}

TEST_F(DeploymentTest, RouterPrefillTimeReachesTessera) {
  addNodes(2, 4);
  ASSERT_TRUE(json_api::putModel(
      *plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}, {"computeMilli", 500}}));
  ASSERT_TRUE(json_api::putDeployment(*plane_, {{"name", "chat"},
                                                {"model", "llama-8b"},
                                                {"minReplicas", 1},
                                                {"maxReplicas", 6},
                                                {"autoscaling", {{"recommender", "tessera"}}}}));
  ASSERT_TRUE(plane_->replicaLoaded("chat-0"));
  auto report = [&](std::optional<double> prefillMs) {
    ASSERT_TRUE(json_api::replicaSignals(
        *plane_, "chat-0", {{"waiting", 0}, {"running", 2}, {"maxConcurrency", 100}}));
    json router = {{"arrivalRatePerSec", 2.6}, {"meanServiceMs", 2000}, {"ttftP99Ms", 1500}};
    if (prefillMs) router["meanPrefillMs"] = *prefillMs;
    ASSERT_TRUE(json_api::deploymentSignals(*plane_, "chat", router));
  };
  // Concurrency alone: 2.6/s × 2 s = 5.2 in service of 80 → 1.
  report(std::nullopt);
  run(15);
  EXPECT_EQ(status("chat")["desired"], 1);
  // Prompts hold the replica 750 ms: it serves 1.33/s, the backlog grows 1.27/s for the 60-s
  // cold start → 76; prefill (2.6 + 76 / 60) × 0.75 = 2.9 replicas → ceil(2.9 / 0.6) = 5.
  report(750);
  run(15);
  EXPECT_EQ(status("chat")["desired"], 5);
  EXPECT_FALSE(json_api::deploymentSignals(*plane_, "chat", {{"meanPrefillMs", -1}}));
}

TEST_F(DeploymentTest, WhatDoesNotFitWaitsAsPendingWithAReason) {
  addNodes(1, 2);
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "llama-8b"}, {"weights", "60Gi"}}));
  ASSERT_TRUE(json_api::putDeployment(*plane_, hpaDeployment(3, 3)));
  EXPECT_EQ(status("chat")["pending"], 1);
  EXPECT_NE(status("chat")["pendingReason"].get<std::string>().find("MemoryFit"), std::string::npos)
      << status("chat");
  const std::string metrics = plane_->metricsText();
  EXPECT_NE(metrics.find("tessera_pending_replicas{deployment=\"chat\",reason=\"MemoryFit\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tessera_deployment_replicas{deployment=\"chat\",state=\"desired\"} 3"),
            std::string::npos);
  // Room appears: the next sync period places it.
  addNodes(0, 0);
  ASSERT_TRUE(json_api::registerNode(
      *plane_, {{"name", "late"}, {"cpu", 64}, {"gpus", {{{"type", "A100-80GB"}}}}}));
  run(15);
  EXPECT_EQ(status("chat")["pending"], 0);
  EXPECT_EQ(replicasOf("chat").size(), 3u);
}

TEST_F(DeploymentTest, DeletingADeploymentDrainsItsReplicas) {
  addNodes(1, 2);
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}}));
  ASSERT_TRUE(json_api::putDeployment(*plane_, hpaDeployment(2, 4)));
  // One replica is still serving two requests: its flush waits for them.
  ASSERT_TRUE(json_api::replicaSignals(*plane_, "chat-0", {{"running", 2}, {"waiting", 0}}));
  auto deleted = plane_->deleteDeployment("chat");
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->draining, 2);
  run(12);  // drain 10 s, flush: chat-1 has nothing in flight, free 1 s
  EXPECT_FALSE(plane_->getReplica("chat-1"));
  EXPECT_TRUE(plane_->getReplica("chat-0"));  // still flushing two requests
  ASSERT_TRUE(json_api::replicaSignals(*plane_, "chat-0", {{"running", 0}, {"waiting", 0}}));
  run(2);
  EXPECT_FALSE(plane_->getReplica("chat-0"));
  EXPECT_EQ(plane_->listDeployments()["deployments"].size(), 0u);
}

TEST_F(DeploymentTest, DrainingANodeMovesItsReplicasElsewhere) {
  addNodes(3, 1);
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "llama-8b"}, {"weights", "30Gi"}}));
  ASSERT_TRUE(json_api::putDeployment(*plane_, hpaDeployment(2, 2)));
  const json before = *plane_->getDeployment("chat");
  const std::string victimNode = before["replicas"][0]["node"];
  auto drained = plane_->drainNode(victimNode);
  ASSERT_TRUE(drained) << drained.error().message;
  const json onNode = (*plane_->getNode(victimNode))["replicas"];
  EXPECT_EQ(json(drained->draining), onNode);  // every replica there, however many
  EXPECT_TRUE((*plane_->getNode(victimNode))["cordoned"]);
  run(15);  // the next sync period replaces the draining replica on the free node
  const json after = *plane_->getDeployment("chat");
  EXPECT_EQ(after["status"]["draining"], 0) << after;  // drained: 10 s + flush + 1 s
  ASSERT_EQ(after["replicas"].size(), 2u) << after;
  for (const json& r : after["replicas"]) EXPECT_NE(r["node"], victimNode) << after;
  EXPECT_TRUE((*plane_->getNode(victimNode))["replicas"].empty());
  EXPECT_FALSE(plane_->drainNode("ghost"));
}

// The share rule (scale/reconcile.h) in the server: the deployment's prompts need a small part
// of a GPU, so new replicas book a quarter of one, shared; without an SLO to keep, whole GPUs.
TEST_F(DeploymentTest, PromptsNeedingPartOfAGpuScaleOutOnGpuShares) {
  addNodes(2, 1);
  // The profile books a whole GPU's compute per replica.
  ASSERT_TRUE(json_api::putModel(
      *plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}, {"computeMilli", 1000}}));
  for (const bool withSlo : {true, false}) {
    SCOPED_TRACE(withSlo ? "with sloTtftMs" : "without sloTtftMs");
    json spec = {{"name", "chat"},
                 {"model", "llama-8b"},
                 {"minReplicas", 1},
                 {"maxReplicas", 4},
                 {"autoscaling", {{"recommender", "tessera"}}}};
    if (withSlo) spec["sloTtftMs"] = 2000;
    ASSERT_TRUE(json_api::putDeployment(*plane_, spec));
    ASSERT_TRUE(plane_->replicaLoaded("chat-0"));
    ASSERT_TRUE(json_api::replicaSignals(*plane_, "chat-0",
                                         {{"waiting", 8},
                                          {"running", 4},
                                          {"kvCacheUsage", 0.3},
                                          {"gpuUtilization", 0.9},
                                          {"maxConcurrency", 64}}));
    // 20 prompts a second of 20 ms each (100 ms at p99) on a whole GPU.
    ASSERT_TRUE(json_api::deploymentSignals(*plane_, "chat",
                                            {{"arrivalRatePerSec", 20},
                                             {"meanServiceMs", 8000},
                                             {"meanPrefillMs", 20},
                                             {"prefillP99Ms", 100}}));
    run(15);
    const json d = *plane_->getDeployment("chat");
    EXPECT_EQ(d["status"]["desired"], 4) << d;
    if (withSlo) {
      EXPECT_EQ(d["status"]["pending"], 0) << d;  // whole-GPU replicas would leave 2 pending
      ASSERT_EQ(d["replicas"].size(), 4u) << d;
      // Three more asked for, four replicas in all: on quarters the prompts' wait tail needs 2.1
      // of them (prompts of 80 ms, 5 a second each), which the four carry, and the p99 prompt
      // keeps half its target on 2 × 100 / 2000 = 0.1 of a GPU: a quarter.
      for (const char* id : {"chat-1", "chat-2", "chat-3"}) {
        const json r = *plane_->getReplica(id);
        EXPECT_EQ(r["mode"], "shared") << r;
        EXPECT_EQ(r["gpus"][0]["computeMilli"], 250) << r;
      }
      EXPECT_NE(d["status"]["lastDecision"].get<std::string>().find("share 0.25"),
                std::string::npos)
          << d;
    } else {
      EXPECT_EQ(d["status"]["pending"], 2) << d;
      EXPECT_EQ(d["replicas"].size(), 2u) << d;
      EXPECT_EQ((*plane_->getReplica("chat-1"))["gpus"][0]["computeMilli"], 1000);
    }
    EXPECT_EQ((*plane_->getReplica("chat-0"))["gpus"][0]["computeMilli"], 1000);
    ASSERT_TRUE(plane_->state().checkInvariants());
    ASSERT_TRUE(plane_->deleteDeployment("chat"));
    run(120);  // the drains finish and free the GPUs
    ASSERT_TRUE(plane_->listReplicas()["replicas"].empty()) << plane_->listReplicas();
  }
}

TEST_F(DeploymentTest, ComputeActivityReachesTheRecommenderAsThePromptsOwnWork) {
  addNodes(1, 2);
  ASSERT_TRUE(json_api::putModel(
      *plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}, {"computeMilli", 1000}}));
  ASSERT_TRUE(json_api::putDeployment(*plane_, {{"name", "chat"},
                                                {"model", "llama-8b"},
                                                {"minReplicas", 1},
                                                {"maxReplicas", 2},
                                                {"autoscaling", {{"recommender", "tessera"}}}}));
  ASSERT_TRUE(plane_->replicaLoaded("chat-0"));
  // Out of range: refused, naming the field; what was stored stays.
  auto bad = json_api::replicaSignals(*plane_, "chat-0", {{"computeActive", 1.5}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("computeActive"), std::string::npos) << bad.error().message;
  // 2.6 prompts/s each reading 750 ms (the step its batch shared); the replica's compute units
  // worked 78 % of the time for 2.6 prefills/s: 0.3 s of its own work per prompt.
  ASSERT_TRUE(json_api::replicaSignals(*plane_, "chat-0",
                                       {{"waiting", 0},
                                        {"running", 2},
                                        {"maxConcurrency", 10},
                                        {"computeActive", 0.78},
                                        {"prefillsPerSec", 2.6}}));
  ASSERT_TRUE(json_api::deploymentSignals(*plane_, "chat",
                                          {{"arrivalRatePerSec", 2.6},
                                           {"meanServiceMs", 2000},
                                           {"meanPrefillMs", 750},
                                           {"ttftP99Ms", 900}}));
  run(15);
  const std::string why = status("chat")["lastDecision"];
  EXPECT_NE(why.find("prefill 0.78"), std::string::npos) << why;
  EXPECT_EQ(status("chat")["desired"], 2) << why;  // ceil(0.78 / 0.6)
}

TEST_F(DeploymentTest, BadSpecsAreRefusedNamingTheField) {
  addNodes(1, 1);
  ASSERT_TRUE(json_api::putModel(*plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}}));
  struct Case {
    json body;
    std::string mention;
  };
  json unknownArg = hpaDeployment(1, 2);
  unknownArg["autoscaling"]["args"]["queuePerReplicaa"] = 5;
  json badRecommender = hpaDeployment(1, 2);
  badRecommender["autoscaling"]["recommender"] = "magic";
  json extra = hpaDeployment(1, 2);
  extra["colour"] = "blue";
  for (const Case& c :
       {Case{{{"name", "x"}, {"model", "nope"}}, "nope"}, Case{hpaDeployment(5, 2), "maxReplicas"},
        Case{{{"name", "Bad Name"}, {"model", "llama-8b"}}, "name"},
        Case{unknownArg, "queuePerReplicaa"}, Case{badRecommender, "magic"},
        Case{extra, "colour"}}) {
    auto out = json_api::putDeployment(*plane_, c.body);
    ASSERT_FALSE(out) << c.body;
    EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(out.error().message.find(c.mention), std::string::npos) << out.error().message;
  }
  EXPECT_EQ(plane_->listDeployments()["deployments"].size(), 0u);
  EXPECT_EQ(plane_->state().liveReplicaCount(), 0);
  EXPECT_FALSE(json_api::replicaSignals(*plane_, "nobody", json::object()));
  EXPECT_FALSE(json_api::deploymentSignals(*plane_, "nobody", json::object()));
}

TEST(DeploymentRestart, DeploymentsAndTheirReplicasSurviveARestart) {
  store::testing::TempDir dir;
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock{5'000'000};
  json before;
  {
    auto s = store::Store::open(dir.file("s.db"));
    ASSERT_TRUE(s);
    auto p = ControlPlane::create(catalog, clock, {}, s->get());
    ASSERT_TRUE(p);
    ASSERT_TRUE(json_api::registerNode(
        *(*p), {{"name", "n"},
                {"cpu", 64},
                {"gpus", {{{"type", "H100-80GB"}}, {{"type", "H100-80GB"}}}}}));
    ASSERT_TRUE(json_api::putModel(*(*p), {{"name", "llama-8b"}, {"weights", "16Gi"}}));
    ASSERT_TRUE(json_api::putDeployment(*(*p), hpaDeployment(3, 5)));
    before = (*p)->getDeployment("chat")->at("replicas");
  }
  auto s = store::Store::open(dir.file("s.db"));
  ASSERT_TRUE(s);
  auto p = ControlPlane::create(catalog, clock, {}, s->get());
  ASSERT_TRUE(p) << p.error().message;
  auto d = (*p)->getDeployment("chat");
  ASSERT_TRUE(d);
  EXPECT_EQ((*d)["replicas"], before);
  EXPECT_EQ((*d)["status"]["desired"], 3);
  EXPECT_EQ((*d)["recommender"], "hpa");
}

}  // namespace
}  // namespace tessera::api
