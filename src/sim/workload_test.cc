// Target workload (typical pods), workload tuning and Tessera's own arrival plans.

#include "sim/workload.h"

#include <algorithm>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "sim/test_support.h"

namespace tessera::sim {
namespace {

// Built by appending: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::string here.
std::string numbered(std::string_view prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

TracePod pod(std::string name, std::int64_t cpu, int k, std::int32_t g, std::string spec = "") {
  TracePod p;
  p.name = std::move(name);
  p.cpuMilli = cpu;
  p.memoryMib = 1024;
  p.gpus = k;
  p.gpuMilli = g;
  p.gpuSpec = spec;
  if (!spec.empty()) p.gpuTypes = {spec};
  return p;
}

TEST(TypicalPods, SortsByCountThenLargerShapeAndRenormalises) {
  std::vector<TracePod> pods;
  int n = 0;
  auto add = [&](int count, std::int64_t cpu, int k, std::int32_t g, std::string spec = "") {
    for (int i = 0; i < count; ++i) pods.push_back(pod(numbered("p", n++), cpu, k, g, spec));
  };
  add(50, 4000, 1, 500);
  add(20, 8000, 1, 1000);
  add(20, 8000, 1, 1000, "T4");  // same count and numbers: "T4" > "" comes first
  add(5, 2000, 0, 0);
  add(3, 1000, 2, 1000);
  add(2, 9000, 1, 250);
  // 100 tasks; 95 % needs the first four shapes (50 + 20 + 20 + 5 = 95).
  const TypicalWorkload w = typicalPods(pods);
  EXPECT_EQ(w.distinctShapes, 6);
  EXPECT_EQ(w.totalTasks, 100);
  EXPECT_EQ(w.coveredTasks, 95);
  ASSERT_EQ(w.shapes.size(), 4u);
  EXPECT_EQ(w.shapes[0].gpuMilli, 500);
  EXPECT_EQ(w.shapes[1].gpuTypes, std::vector<std::string>{"T4"});
  EXPECT_TRUE(w.shapes[2].gpuTypes.empty());
  EXPECT_EQ(w.shapes[3].gpus, 0);
  // p = (count / total) / (covered / total): two divisions.
  EXPECT_EQ(w.shapes[0].weight, (50.0 / 100.0) / (95.0 / 100.0));
  double sum = 0;
  for (const auto& s : w.shapes) sum += s.weight;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(TypicalPods, KeepsEveryShapeWhenTheThresholdNeedsThem) {
  std::vector<TracePod> pods = {pod("a", 1000, 1, 500), pod("b", 2000, 1, 500)};
  const TypicalWorkload w = typicalPods(pods);
  ASSERT_EQ(w.shapes.size(), 2u);
  EXPECT_EQ(w.shapes[0].cpuMilli, 2000);  // tie on count: larger CPU first
  EXPECT_EQ(w.shapes[0].weight, 0.5);
}

TEST(TypicalPods, DefaultTraceHas35ShapesCovering95_26Percent) {
  TESSERA_SKIP_WITHOUT_SHARED_DATA();
  const auto catalog = model::GpuCatalog::builtin();
  auto pods = readPodList(testing::traceDir() + "/openb_pod_list_default.csv", catalog);
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 8152u);
  const TypicalWorkload w = typicalPods(*pods);
  EXPECT_EQ(w.distinctShapes, 91);
  ASSERT_EQ(w.shapes.size(), 35u);
  EXPECT_NEAR(w.coveragePct(), 95.26, 0.005);
  // Top shapes (shared/docs/fgd-benchmark.md §3 step 2), share of all tasks.
  auto share = [&](std::size_t i) { return w.shapes[i].weight * w.coveragePct(); };
  EXPECT_EQ(w.shapes[0].cpuMilli, 3152);
  EXPECT_EQ(w.shapes[0].gpuMilli, 810);
  EXPECT_NEAR(share(0), 12.8, 0.05);
  EXPECT_EQ(w.shapes[1].cpuMilli, 11300);
  EXPECT_EQ(w.shapes[1].gpuMilli, 1000);
  EXPECT_NEAR(share(1), 10.7, 0.05);
  EXPECT_EQ(w.shapes[5].cpuMilli, 12500);
  EXPECT_EQ(w.shapes[5].gpus, 0);
  EXPECT_NEAR(share(5), 4.5, 0.05);
}

TEST(Rng, BoundedDrawsAreDeterministicAndInRange) {
  Rng a(42), b(42);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const auto x = a.below(7);
    ASSERT_EQ(x, b.below(7));
    ASSERT_LT(x, 7u);
    ++counts[x];
  }
  for (int c : counts) EXPECT_GT(c, 850);
  EXPECT_EQ(Rng(1).below(1), 0u);
}

// Two pods of 1000 and one of 500 milli on a 1-GPU "cluster" (1000 milli).
TEST(Tuning, AppendsDrawsUntilTheNextWouldCrossTheTarget) {
  std::vector<TracePod> pods = {pod("a", 1000, 1, 100), pod("b", 1000, 0, 0),
                                pod("c", 1000, 1, 300)};
  const std::vector<int> byName = podsByName(pods);
  ArrivalPlan plan;
  plan.order = {0, 1, 2};  // 400 milli
  Rng rng(7);
  tuneWorkload(pods, byName, 1000, 1.3, rng, plan);
  // Target 1300: appended copies bring the total to at most 1300, and the draw that stopped
  // the loop would have crossed it (so the total is > 1300 - 300).
  EXPECT_LE(plan.arrivingGpuMilli, 1300);
  EXPECT_GT(plan.arrivingGpuMilli, 1000);
  EXPECT_EQ(static_cast<int>(plan.order.size()), 3 + plan.appended);
  std::int64_t total = 0;
  for (int i : plan.order) total += pods[static_cast<std::size_t>(i)].totalGpuMilli();
  EXPECT_EQ(total, plan.arrivingGpuMilli);
  // The originals stay in front, in their order.
  EXPECT_EQ(std::vector<int>(plan.order.begin(), plan.order.begin() + 3),
            (std::vector<int>{0, 1, 2}));
}

TEST(Tuning, RemovesRandomEntriesWhenOver) {
  std::vector<TracePod> pods;
  for (int i = 0; i < 10; ++i) pods.push_back(pod(numbered("p", i), 1000, 2, 1000));
  ArrivalPlan plan;
  plan.order = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};  // 20,000 milli
  Rng rng(3);
  tuneWorkload(pods, podsByName(pods), 10'000, 1.3, rng, plan);  // target 13,000
  EXPECT_EQ(plan.arrivingGpuMilli, 12'000);
  EXPECT_EQ(plan.removed, 4);
  EXPECT_EQ(plan.order.size(), 6u);
  EXPECT_TRUE(std::is_sorted(plan.order.begin(), plan.order.end()));  // order kept
}

TEST(OwnArrivalPlan, DeterministicPerSeedWithPermutationRanks) {
  std::vector<TracePod> pods;
  for (int i = 0; i < 50; ++i) {
    pods.push_back(pod(numbered("p", 100 + i), 1000, 1, 100 + 10 * i));
  }
  std::vector<model::NodeSpec> nodes(5);
  for (int i = 0; i < 5; ++i) {
    nodes[static_cast<std::size_t>(i)].name = numbered("n", 4 - i);
    nodes[static_cast<std::size_t>(i)].gpus.resize(2);
  }
  const ArrivalPlan a = ownArrivalPlan(pods, nodes, 1.3, 42);
  const ArrivalPlan b = ownArrivalPlan(pods, nodes, 1.3, 42);
  const ArrivalPlan c = ownArrivalPlan(pods, nodes, 1.3, 43);
  EXPECT_EQ(a.order, b.order);
  EXPECT_EQ(a.ranks, b.ranks);
  EXPECT_NE(a.order, c.order);
  // 50 pods request 19,750 milli of a 10,000 milli cluster: tuned down to <= 13,000.
  EXPECT_LE(a.arrivingGpuMilli, 13'000);
  EXPECT_GT(a.removed, 0);
  std::vector<std::int64_t> ranks = a.ranks;
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  // Every original appears at most once (no copies when tuning down).
  std::set<int> unique(a.order.begin(), a.order.end());
  EXPECT_EQ(unique.size(), a.order.size());
}

}  // namespace
}  // namespace tessera::sim
