// The demo driven on a manual clock: it seeds the fleet, and its synthetic traffic makes the
// real control plane place, load, scale up, scale down and drain replicas, the same way on
// every run.

#include "demo/demo.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/gpu_catalog.h"

namespace tessera::demo {
namespace {

using nlohmann::json;

struct DemoRun {
  std::vector<std::string> events;  // "type subject", in order
  int refused = 0;
  int loaded = 0;
  json nodes;
};

// Runs the demo for `seconds` of plane time, one step and one tick per second, as the server does.
DemoRun runDemo(int seconds, DemoOptions options = {}) {
  ManualClock clock(1'000'000);
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto plane = api::ControlPlane::create(catalog, clock);
  EXPECT_TRUE(plane.has_value());
  DemoRun run;
  if (!plane) return run;
  auto seeded = seedFleet(**plane);
  EXPECT_TRUE(seeded.has_value()) << (seeded ? "" : seeded.error().message);
  Simulation sim(options);
  for (int s = 0; s < seconds; ++s) {
    const StepReport r = sim.step(**plane, clock.nowMs());
    run.refused += r.refused;
    run.loaded += r.loaded;
    (*plane)->tick();
    clock.advance(1000);
  }
  const json events = (*plane)->events(0, 5000)["events"];
  for (const json& e : events) {
    run.events.push_back(e["type"].get<std::string>() + " " + e["subject"].get<std::string>());
  }
  run.nodes = (*plane)->listNodes()["nodes"];
  return run;
}

int countOf(const DemoRun& run, std::string_view type) {
  int n = 0;
  for (const std::string& e : run.events) n += e.starts_with(std::string(type) + " ") ? 1 : 0;
  return n;
}

TEST(Demo, SeedsTheFleetOnceAndRefusesAStoreThatHoldsNodes) {
  ManualClock clock(0);
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto plane = api::ControlPlane::create(catalog, clock);
  ASSERT_TRUE(plane.has_value());
  ASSERT_TRUE(seedFleet(**plane).has_value());
  const json nodes = (*plane)->listNodes()["nodes"];
  ASSERT_EQ(nodes.size(), nodeNames().size());
  int gpus = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i]["name"], nodeNames()[i]);
    gpus += static_cast<int>(nodes[i]["gpus"].size());
  }
  EXPECT_EQ(gpus, gpuCount());
  EXPECT_EQ((*plane)->listModels()["models"].size(), 4u);
  EXPECT_EQ((*plane)->listDeployments()["deployments"].size(), 4u);
  // Every deployment's minimum is placed at once.
  EXPECT_GE((*plane)->listReplicas()["replicas"].size(), 5u);
  auto again = seedFleet(**plane);
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message.find("already holds nodes"), std::string::npos);
}

TEST(Demo, TrafficMakesTheRealControlPlaneScaleUpAndDown) {
  // One and a half demo days (120 s each): the morning rise, the peak, the evening fall.
  const DemoRun run = runDemo(180);
  EXPECT_EQ(run.refused, 0);
  EXPECT_GT(run.loaded, 10);
  EXPECT_GT(countOf(run, "ReplicaPlaced"), 10);
  EXPECT_GT(countOf(run, "ReplicaLoaded"), 10);
  EXPECT_GT(countOf(run, "ScaledUp"), 3);
  EXPECT_GT(countOf(run, "ScaledDown"), 2);
  EXPECT_GT(countOf(run, "ReplicaDraining"), 2);
  EXPECT_GT(countOf(run, "ReplicaRemoved"), 2);
  // Every deployment scaled up at least once.
  for (const char* d : {"chat", "code", "reasoning", "embed"}) {  // (embed on MIG slices)
    EXPECT_NE(std::find(run.events.begin(), run.events.end(), std::string("ScaledUp ") + d),
              run.events.end())
        << d;
  }
  // The virtual GPUs report telemetry: used memory and utilisation where replicas run.
  int withUse = 0;
  for (const json& n : run.nodes) {
    for (const json& g : n["gpus"]) {
      ASSERT_FALSE(g["usedMib"].is_null()) << n["name"] << "/" << g["id"];
      if (!g["replicas"].empty() && g["usedMib"].get<std::int64_t>() > 0 &&
          g["utilization"].get<double>() > 0) {
        ++withUse;
      }
    }
  }
  EXPECT_GT(withUse, 3);
  // The embedding model only takes MIG slices: it ran on the MIG node.
  bool migUsed = false;
  for (const json& n : run.nodes) {
    if (n["name"] == "a100-mig") migUsed = !n["replicas"].empty();
  }
  EXPECT_TRUE(migUsed);
}

TEST(Demo, ScalesUpWithinAMinuteAndDownWithinTwo) {
  const DemoRun first = runDemo(60);
  EXPECT_GT(countOf(first, "ScaledUp"), 0);
  const DemoRun second = runDemo(120);
  EXPECT_GT(countOf(second, "ScaledDown"), 0);
}

TEST(Demo, IsDeterministicForASeedAndChangesWithIt) {
  const DemoRun a = runDemo(100);
  const DemoRun b = runDemo(100);
  EXPECT_EQ(a.events, b.events);
  DemoOptions other;
  other.seed = 99;
  const DemoRun c = runDemo(100, other);
  EXPECT_NE(a.events, c.events);
}

TEST(Demo, TrafficFollowsTheDailyCurve) {
  Simulation sim;
  ManualClock clock(0);
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto plane = api::ControlPlane::create(catalog, clock);
  ASSERT_TRUE(plane.has_value());
  ASSERT_TRUE(seedFleet(**plane).has_value());
  (void)sim.step(**plane, 0);  // starts the day
  const double night = sim.arrivalRatePerSec("chat", 0);
  const double noon = sim.arrivalRatePerSec("chat", 60'000);
  EXPECT_GT(noon, 4 * night);
  EXPECT_EQ(sim.arrivalRatePerSec("not-a-demo-deployment", 90'000), 0);
}

}  // namespace
}  // namespace tessera::demo
