// The metrics the shipped dashboards and alerts (deploy/grafana, deploy/prometheus) rely on
// beyond the books: each node's heartbeat age, the queue depth per deployment, reservations
// lapsing without telemetry, and replica load times.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "api/control_plane.h"
#include "api/json_api.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

// The value of the sample line that starts with `series` (name plus labels), or -1.
double sampleValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.starts_with(series) && line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

class OpsMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControlPlaneConfig config;
    config.profile.options.reservationTtlMs = 30'000;
    auto p = ControlPlane::create(catalog_, clock_, config);
    ASSERT_TRUE(p) << p.error().message;
    plane_ = std::move(*p);
    for (const char* node : {"gpu-a", "gpu-b"}) {
      ASSERT_TRUE(json_api::registerNode(
          *plane_,
          {{"name", node}, {"cpu", 64}, {"gpus", json::array({{{"type", "A100-80GB"}}})}}));
    }
    ASSERT_TRUE(json_api::putModel(
        *plane_, {{"name", "llama-8b"}, {"weights", "16Gi"}, {"computeMilli", 500}}));
  }
  std::string metrics() const { return plane_->metricsText(); }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{5'000'000};
  std::unique_ptr<ControlPlane> plane_;
};

TEST_F(OpsMetricsTest, HeartbeatAgeGrowsUntilTheAgentReportsAndGoesWithTheNode) {
  clock_.advance(90'000);
  ASSERT_TRUE(json_api::heartbeat(*plane_, "gpu-a",
                                  {{"gpus", json::array({{{"id", "0"}, {"usedMib", 0}}})}}));
  clock_.advance(15'000);
  EXPECT_EQ(sampleValue(metrics(), "tessera_node_heartbeat_age_seconds{node=\"gpu-a\"}"), 15);
  EXPECT_EQ(sampleValue(metrics(), "tessera_node_heartbeat_age_seconds{node=\"gpu-b\"}"), 105);
  ASSERT_TRUE(plane_->removeNode("gpu-b", true));
  EXPECT_EQ(metrics().find("node=\"gpu-b\""), std::string::npos);
}

TEST_F(OpsMetricsTest, QueueDepthSumsFreshReplicaQueuesAndTheRouterBuffer) {
  ASSERT_TRUE(json_api::putDeployment(
      *plane_, {{"name", "chat"}, {"model", "llama-8b"}, {"minReplicas", 2}, {"maxReplicas", 2}}));
  const std::string series =
      "tessera_deployment_queue_depth{deployment=\"chat\",model=\"llama-8b\"}";
  EXPECT_EQ(sampleValue(metrics(), series), 0);
  ASSERT_TRUE(json_api::replicaSignals(*plane_, "chat-0", {{"waiting", 7}, {"running", 3}}));
  ASSERT_TRUE(json_api::replicaSignals(*plane_, "chat-1", {{"waiting", 4}, {"running", 3}}));
  ASSERT_TRUE(json_api::deploymentSignals(*plane_, "chat", {{"bufferedRequests", 2}}));
  EXPECT_EQ(sampleValue(metrics(), series), 13);
  clock_.advance(61'000);  // past the signal TTL: stale signals count as missing
  EXPECT_EQ(sampleValue(metrics(), series), 0);
}

TEST_F(OpsMetricsTest, ReservationsLapsingWithoutTelemetryAreCountedBySilence) {
  const std::string none = "tessera_reservations_expired_total{telemetry=\"none\"}";
  const std::string unattributed = "tessera_reservations_expired_total{telemetry=\"unattributed\"}";
  EXPECT_EQ(sampleValue(metrics(), none), 0);
  EXPECT_EQ(sampleValue(metrics(), unattributed), 0);
  // Two replicas; only chat-0's node reports, and its agent does not attribute memory to
  // replicas. Whatever is on the other node lapses with no telemetry at all.
  // 60 % of a card's compute each: the two cannot share a GPU, so they are on both nodes.
  ASSERT_TRUE(json_api::putModel(
      *plane_, {{"name", "busy-8b"}, {"weights", "16Gi"}, {"computeMilli", 600}}));
  ASSERT_TRUE(json_api::putDeployment(
      *plane_, {{"name", "chat"}, {"model", "busy-8b"}, {"minReplicas", 2}, {"maxReplicas", 2}}));
  EXPECT_EQ(sampleValue(metrics(), "tessera_reservations"), 2);
  const std::string reporting = (*plane_->getReplica("chat-0"))["node"];
  ASSERT_NE((*plane_->getReplica("chat-1"))["node"], reporting);
  ASSERT_TRUE(json_api::heartbeat(*plane_, reporting,
                                  {{"gpus", json::array({{{"id", "0"}, {"usedMib", 20000}}})}}));
  clock_.advance(31'000);
  plane_->tick();
  EXPECT_EQ(sampleValue(metrics(), "tessera_reservations"), 0);
  EXPECT_EQ(sampleValue(metrics(), unattributed), 1);
  EXPECT_EQ(sampleValue(metrics(), none), 1);
}

TEST_F(OpsMetricsTest, AReservationConfirmedByTelemetryIsNotCounted) {
  ASSERT_TRUE(json_api::putDeployment(
      *plane_, {{"name", "chat"}, {"model", "llama-8b"}, {"minReplicas", 1}, {"maxReplicas", 1}}));
  const json replica = *plane_->getReplica("chat-0");
  const std::string node = replica["node"];
  ASSERT_TRUE(plane_->replicaLoaded("chat-0"));
  ASSERT_TRUE(json_api::heartbeat(
      *plane_, node,
      {{"gpus",
        json::array(
            {{{"id", "0"}, {"usedMib", 17000}, {"replicaUsedMib", {{"chat-0", 17000}}}}})}}));
  EXPECT_EQ(sampleValue(metrics(), "tessera_reservations"), 0);  // settled
  clock_.advance(31'000);
  plane_->tick();
  EXPECT_EQ(sampleValue(metrics(), "tessera_reservations_expired_total{telemetry=\"none\"}"), 0);
  EXPECT_EQ(
      sampleValue(metrics(), "tessera_reservations_expired_total{telemetry=\"unattributed\"}"), 0);
}

TEST_F(OpsMetricsTest, LoadDurationIsObservedOnceFromPlacementToLoaded) {
  ASSERT_TRUE(json_api::putDeployment(
      *plane_, {{"name", "chat"}, {"model", "llama-8b"}, {"minReplicas", 1}, {"maxReplicas", 1}}));
  clock_.advance(12'000);
  ASSERT_TRUE(plane_->replicaLoaded("chat-0"));
  ASSERT_TRUE(plane_->replicaLoaded("chat-0"));  // a repeated report is not a second load
  const std::string text = metrics();
  EXPECT_EQ(sampleValue(text, "tessera_replica_load_duration_seconds_count{model=\"llama-8b\"}"),
            1);
  EXPECT_EQ(sampleValue(text, "tessera_replica_load_duration_seconds_sum{model=\"llama-8b\"}"), 12);
  EXPECT_EQ(sampleValue(
                text, "tessera_replica_load_duration_seconds_bucket{model=\"llama-8b\",le=\"10\"}"),
            0);
  EXPECT_EQ(sampleValue(
                text, "tessera_replica_load_duration_seconds_bucket{model=\"llama-8b\",le=\"20\"}"),
            1);
}

}  // namespace
}  // namespace tessera::api
