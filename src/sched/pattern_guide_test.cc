// PatternGuide: the LP's tight patterns, reduced costs and completion CPU for a workload whose
// optimal packing is known (810 + 190 and 500 + 500 fill a GPU exactly).

#include "sched/plugins/pattern_guide.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::sched {
namespace {

TaskShape anyShape(std::int64_t cpu, int k, std::int32_t g, double p) {
  return {
      .cpuMilli = cpu, .gpuMilli = g, .gpus = k, .gpuTypes = {}, .gpuTypeIndices = {}, .weight = p};
}

TaskShape sharingShape(std::int64_t cpu, std::int32_t g, double p) {
  return {
      .cpuMilli = cpu, .gpuMilli = g, .gpus = 1, .gpuTypes = {}, .gpuTypeIndices = {}, .weight = p};
}

PatternGuide guide() {
  // A CPU-only and a whole-GPU shape are not sharing shapes: they do not enter the LP.
  const std::vector<TaskShape> w{sharingShape(1000, 810, 0.4), sharingShape(4000, 190, 0.2),
                                 sharingShape(2000, 500, 0.3), sharingShape(4000, 500, 0.1),
                                 anyShape(8000, 1, 1000, 0.5), anyShape(8000, 0, 0, 0.5)};
  return PatternGuide::build(w);
}

bool hasPattern(const PatternGuide& g, std::vector<std::int32_t> p) {
  return std::find(g.patterns().begin(), g.patterns().end(), p) != g.patterns().end();
}

constexpr std::int64_t kPlentyCpu = 64'000;

TEST(PatternGuide, TheOptimalFillsAreTightPatterns) {
  const PatternGuide g = guide();
  ASSERT_FALSE(g.empty());
  EXPECT_TRUE(hasPattern(g, {190, 810}));
  EXPECT_TRUE(hasPattern(g, {500, 500}));
  EXPECT_FALSE(hasPattern(g, {190, 500}));  // 310 left that nothing fills
  for (const auto& p : g.patterns()) {
    std::int64_t level = 0;
    double value = 0;
    for (std::int32_t m : p) {
      level += m;
      value += g.dual(m);
    }
    EXPECT_LE(level, 1000);
    EXPECT_NEAR(value, 1.0, 1e-6);
    EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
  }
  EXPECT_NEAR(g.dual(500), 0.5, 1e-9);
  EXPECT_NEAR(g.dual(810) + g.dual(190), 1.0, 1e-9);
}

TEST(PatternGuide, ReducedCostIsWhatTheBestCompletionLeaves) {
  const PatternGuide g = guide();
  // Empty GPUs and parts of tight patterns lose nothing while CPU allows the rest.
  EXPECT_NEAR(g.reducedCost({}, kPlentyCpu), 0.0, 1e-9);
  const std::vector<std::int32_t> half{500};
  EXPECT_NEAR(g.reducedCost(half, kPlentyCpu), 0.0, 1e-9);
  const std::vector<std::int32_t> full{500, 500};
  EXPECT_NEAR(g.reducedCost(full, 0), 0.0, 1e-9);
  // 190 + 500: at most one more 190 fits the 310 left.
  const std::vector<std::int32_t> broken{190, 500};
  EXPECT_GT(g.reducedCost(broken, kPlentyCpu), 0.05);
  // Without a core for the second 500 its half of the GPU is lost: 1 - 0.5 - 0.
  EXPECT_NEAR(g.reducedCost(half, 0), 0.5, 1e-9);
  // The 500 shapes ask 2 or 4 cores (the 190 4): one core is not enough, two are.
  EXPECT_NEAR(g.reducedCost(half, 1000), 0.5, 1e-9);
  EXPECT_NEAR(g.reducedCost(half, 2000), 0.0, 1e-9);
}

TEST(PatternGuide, ClassesAndCompletionCpu) {
  const PatternGuide g = guide();
  const std::vector<std::int32_t> pair{500, 500}, half{500}, completes{190, 810}, broken{190, 500};
  EXPECT_EQ(g.placementClass(pair, false, 0), PatternGuide::kCompletes);
  EXPECT_EQ(g.placementClass(completes, false, 0), PatternGuide::kCompletes);
  EXPECT_EQ(g.placementClass(half, true, kPlentyCpu), PatternGuide::kStarts);
  EXPECT_EQ(g.placementClass(half, true, 1000), PatternGuide::kOffPattern);  // no CPU for the rest
  EXPECT_EQ(g.placementClass(broken, false, kPlentyCpu), PatternGuide::kOffPattern);
  // The rest of 500 + 500 is a 500 at its least CPU (2 cores).
  EXPECT_EQ(g.completionCpu(half), 2000);
  EXPECT_EQ(g.completionCpu(pair), 0);
  EXPECT_EQ(g.completionCpu(broken), 0);  // on no pattern: nothing to keep CPU for
  EXPECT_EQ(g.completionCpu({}), 0);
}

TEST(PatternGuide, NoSharingShapesMeansNoGuide) {
  const std::vector<TaskShape> w{anyShape(8000, 1, 1000, 1)};
  const PatternGuide g = PatternGuide::build(w);
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(g.reducedCost({}, 0), 0.0);
}

}  // namespace
}  // namespace tessera::sched
