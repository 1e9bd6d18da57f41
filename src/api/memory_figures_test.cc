// Issue 14, bug 5: one figure for the memory a replica is charged, everywhere it is shown.
// The replica's per-GPU chargedMib is what the books charge it (the reservation while active,
// then the observed use or the estimate); the GPUs' chargedMib adds those up; the reservation
// stays its own field; an exclusive card is charged whole.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "api/control_plane.h"
#include "api/json_api.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

class MemoryFiguresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControlPlaneConfig config;
    config.profile.options.reservationTtlMs = 30'000;
    auto p = ControlPlane::create(catalog_, clock_, config);
    ASSERT_TRUE(p) << p.error().message;
    plane_ = std::move(*p);
    ASSERT_TRUE(json_api::registerNode(
        *plane_,
        {{"name", "gpu-a"}, {"cpu", 64}, {"gpus", json::array({{{"type", "H100-80GB"}}})}}));
  }
  json gpu() const {
    const json nodes = plane_->listNodes();
    return nodes["nodes"][0]["gpus"][0];
  }

  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1'000'000};
  std::unique_ptr<ControlPlane> plane_;
};

TEST_F(MemoryFiguresTest, AReplicaIsChargedTheSameFigureItsGpuAddsUp) {
  ASSERT_TRUE(
      json_api::putModel(*plane_, {{"name", "m"}, {"weights", "40Gi"}, {"sharing", {"shared"}}}));
  ASSERT_TRUE(json_api::placeReplicas(*plane_, {{"replicaId", "r-0"}, {"model", "m"}}));
  json r = *plane_->getReplica("r-0");
  const std::int64_t reserved = r["gpus"][0]["reservedMib"];
  EXPECT_EQ(reserved, 49152);  // 40 GiB x 1.2
  EXPECT_EQ(r["gpus"][0]["chargedMib"], reserved);  // while the reservation is active
  EXPECT_EQ(gpu()["chargedMib"], reserved);

  // Loaded, and telemetry names it at 30 GiB: the reservation settles, the charge follows the
  // observed use on the replica and on the GPU alike; the reservation is still shown as such.
  ASSERT_TRUE(plane_->replicaLoaded("r-0"));
  ASSERT_TRUE(json_api::heartbeat(
      *plane_, "gpu-a",
      {{"gpus",
        json::array({{{"id", "0"}, {"usedMib", 30720}, {"replicaUsedMib", {{"r-0", 30720}}}}})}}));
  r = *plane_->getReplica("r-0");
  EXPECT_FALSE(r["reservationActive"].get<bool>());
  EXPECT_EQ(r["gpus"][0]["reservedMib"], reserved);
  EXPECT_EQ(r["gpus"][0]["chargedMib"], 30720);
  EXPECT_EQ(r["memoryChargedMib"], 30720);
  EXPECT_EQ(gpu()["chargedMib"], 30720);
  EXPECT_EQ(gpu()["freeMib"], 81920 - 30720);
}

TEST_F(MemoryFiguresTest, AnExclusiveCardIsChargedWholeWhateverItsReplicaUses) {
  ASSERT_TRUE(json_api::putModel(
      *plane_, {{"name", "big"}, {"weights", "20Gi"}, {"sharing", {"exclusive"}}}));
  ASSERT_TRUE(json_api::placeReplicas(*plane_, {{"replicaId", "x-0"}, {"model", "big"}}));
  ASSERT_TRUE(plane_->replicaLoaded("x-0"));
  // It uses a third of the card, and something unattributed shows up too: the card is still
  // the replica's whole, with nothing free and nothing foreign.
  ASSERT_TRUE(json_api::heartbeat(
      *plane_, "gpu-a",
      {{"gpus",
        json::array({{{"id", "0"}, {"usedMib", 30000}, {"replicaUsedMib", {{"x-0", 25000}}}}})}}));
  clock_.advance(31'000);
  plane_->tick();
  const json r = *plane_->getReplica("x-0");
  EXPECT_FALSE(r["reservationActive"].get<bool>());
  EXPECT_EQ(r["gpus"][0]["chargedMib"], 81920);
  const json g = gpu();
  EXPECT_TRUE(g["exclusive"].get<bool>());
  EXPECT_EQ(g["chargedMib"], 81920);
  EXPECT_EQ(g["foreignMib"], 0);
  EXPECT_EQ(g["freeMib"], 0);
}

// Issue 14, item 14: a heartbeat's device pool is checked field by field, shown on the node,
// and a malformed one is refused whole (the last good one stays).
TEST_F(MemoryFiguresTest, TheDevicePoolAHeartbeatReportsIsShownOnTheNode) {
  EXPECT_TRUE(plane_->listNodes()["nodes"][0]["devicePool"].is_null());
  const json pool = {{"blockBytes", 2 << 20},
                     {"blocks", 100},
                     {"freeBlocks", 60},
                     {"resident", {{{"model", "m"}, {"version", "v1"}, {"blocks", 40}}}},
                     {"loading", json::array()}};
  ASSERT_TRUE(json_api::heartbeat(*plane_, "gpu-a", {{"devicePool", pool}}));
  const json shown = plane_->listNodes()["nodes"][0]["devicePool"];
  EXPECT_EQ(shown["freeBlocks"], 60);
  EXPECT_EQ(shown["resident"][0]["version"], "v1");
  EXPECT_TRUE(shown.contains("reportedAtMs"));
  for (const json& bad : {json{{"blockBytes", 1}, {"blocks", 4}, {"freeBlocks", 5}},
                          json{{"blockBytes", 1}, {"blocks", 4}, {"extra", 1}},
                          json{{"blockBytes", 1}, {"blocks", 4}, {"resident", {{{"blocks", 1}}}}},
                          json("nope")}) {
    auto refused = json_api::heartbeat(*plane_, "gpu-a", {{"devicePool", bad}});
    ASSERT_FALSE(refused) << bad.dump();
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.error().message.find("devicePool"), std::string::npos)
        << refused.error().message;
  }
  EXPECT_EQ(plane_->listNodes()["nodes"][0]["devicePool"]["freeBlocks"], 60);
}

}  // namespace
}  // namespace tessera::api
