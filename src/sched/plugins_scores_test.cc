// Unit tests of the built-in score plugins and of score normalisation.

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/plugin_test_support.h"
#include "sched/plugins/affinity_scores.h"
#include "sched/plugins/fit_scores.h"
#include "sched/plugins/fragmentation.h"

namespace tessera::sched {
namespace {

using testing::kGib;
using testing::makeRequest;
using testing::nodeSpec;

class ScoreTest : public testing::PluginTest {
 protected:
  model::PlacementRequest request_ = makeRequest("r", 10 * kGib);

  std::vector<std::int64_t> raw(const ScorePlugin& p, const std::vector<Option>& options) {
    const Needs needs = needsOf(request_);
    const DecisionContext ctx{state_, request_, needs};
    std::vector<std::int64_t> out(options.size(), -12345);
    p.score(ctx, options, out);
    return out;
  }
  std::vector<std::int64_t> normalized(const ScorePlugin& p, const std::vector<Option>& options) {
    auto out = raw(p, options);
    p.normalize(out);
    return out;
  }
};

using Scores = std::vector<std::int64_t>;

// ---- normalisation ------------------------------------------------------------------------

TEST(NormalizeTest, MinMaxMapsOntoZeroToHundred) {
  Scores s{-50, 0, 50, 150};
  normalizeMinMax(s);
  EXPECT_EQ(s, (Scores{0, 25, 50, 100}));
}

TEST(NormalizeTest, MinMaxAllEqualIsAllHundredAndEmptyIsFine) {
  Scores s{7, 7, 7};
  normalizeMinMax(s);
  EXPECT_EQ(s, (Scores{100, 100, 100}));
  Scores none;
  normalizeMinMax(none);
  EXPECT_TRUE(none.empty());
}

TEST(NormalizeTest, MinMaxSurvivesTheWholeInt64Range) {
  constexpr auto lo = std::numeric_limits<std::int64_t>::min();
  constexpr auto hi = std::numeric_limits<std::int64_t>::max();
  Scores s{lo, 0, hi};
  normalizeMinMax(s);
  EXPECT_EQ(s, (Scores{0, 50, 100}));
}

TEST(NormalizeTest, DefaultNormalizeClamps) {
  NumaLocalityScore p;  // keeps the default
  Scores s{-3, 40, 250};
  p.normalize(s);
  EXPECT_EQ(s, (Scores{0, 40, 100}));
}

// ---- BestFit and Spread -------------------------------------------------------------------

TEST_F(ScoreTest, BestFitPrefersTheFullestGpuAndSpreadTheEmptiest) {
  const NodeId n = addNode(nodeSpec("a", "A100-80GB", 3));
  place("x", {gpu("a", "0")}, 60 * kGib);
  place("y", {gpu("a", "1")}, 30 * kGib);
  const std::vector<Option> options{option(n, {gpu("a", "0")}), option(n, {gpu("a", "1")}),
                                    option(n, {gpu("a", "2")})};
  BestFitScore best;
  EXPECT_EQ(raw(best, options)[0], -(8 * kGib) * 32768 - 1000)
      << "80 - 60 - 12 GiB left, all 1000 compute milli free";
  EXPECT_EQ(normalized(best, options), (Scores{100, 50, 0}));
  SpreadScore spread;
  EXPECT_EQ(normalized(spread, options), (Scores{0, 50, 100}));
}

TEST_F(ScoreTest, BestFitBreaksMemoryTiesOnCompute) {
  const NodeId n = addNode(nodeSpec("a", "A100-80GB", 2));
  place("x", {gpu("a", "0")}, 10 * kGib, 500);
  place("y", {gpu("a", "1")}, 10 * kGib, 100);
  const std::vector<Option> options{option(n, {gpu("a", "0")}), option(n, {gpu("a", "1")})};
  BestFitScore best;
  EXPECT_EQ(normalized(best, options), (Scores{100, 0}));
}

TEST_F(ScoreTest, ExclusiveOptionsLeaveNothingFree) {
  const NodeId n = addNode(nodeSpec("a", "A100-80GB", 1));
  const NodeId m = addNode(nodeSpec("b", "L4", 1));
  const std::vector<Option> options{option(n, {gpu("a", "0")}, model::SharingMode::kExclusive),
                                    option(m, {gpu("b", "0")}, model::SharingMode::kShared)};
  BestFitScore best;
  EXPECT_EQ(raw(best, options)[0], 0);
  EXPECT_EQ(normalized(best, options), (Scores{100, 0}));
}

// ---- ComputeHeadroom ----------------------------------------------------------------------

TEST_F(ScoreTest, ComputeHeadroomFallsLinearlyPastTheCap) {
  const NodeId n = addNode(nodeSpec("a", "A100-80GB", 4));
  place("x", {gpu("a", "1")}, kGib, 700);
  place("y", {gpu("a", "2")}, kGib, 900);
  request_.model.computeMilli = 100;
  const std::vector<Option> options{option(n, {gpu("a", "0")}), option(n, {gpu("a", "1")}),
                                    option(n, {gpu("a", "2")}),
                                    option(n, {gpu("a", "0"), gpu("a", "1")})};
  auto plugin = ComputeHeadroomScore::create(nlohmann::json::object());
  ASSERT_TRUE(plugin);
  // 100 -> 100 (<= 800), 800 -> 100, 1000 -> 0; the pair scores as its worse GPU.
  EXPECT_EQ(normalized(**plugin, options), (Scores{100, 100, 0, 100}));
  request_.model.computeMilli = 200;  // 900 on GPU 1: halfway between 800 and 1000
  EXPECT_EQ(normalized(**plugin, options), (Scores{100, 50, 0, 50}));
}

// ---- ModelAffinity ------------------------------------------------------------------------

TEST_F(ScoreTest, ModelAffinityPrefersResidentThenCachedWeights) {
  auto spec = nodeSpec("a", "A100-80GB", 2);
  const NodeId a = addNode(spec);
  auto cached = nodeSpec("c", "A100-80GB", 1);
  cached.cachedModels = {"llama"};
  const NodeId c = addNode(cached);
  const NodeId plain = addNode(nodeSpec("p", "A100-80GB", 1));
  place("x", {gpu("a", "0")}, 20 * kGib, 0, model::SharingMode::kShared, "llama", "prod");
  request_.model.name = "llama";
  request_.deployment = "canary";  // another deployment's weights attract
  const std::vector<Option> options{option(a, {gpu("a", "0")}), option(a, {gpu("a", "1")}),
                                    option(c, {gpu("c", "0")}), option(plain, {gpu("p", "0")}),
                                    option(a, {gpu("a", "1"), gpu("a", "0")})};
  auto defaults = ModelAffinityScore::create(nlohmann::json::object());
  ASSERT_TRUE(defaults);
  EXPECT_EQ(normalized(**defaults, options), (Scores{100, 0, 60, 0, 100}));
  auto custom = ModelAffinityScore::create(nlohmann::json{{"resident", 80}, {"cached", 30}});
  ASSERT_TRUE(custom);
  EXPECT_EQ(normalized(**custom, options), (Scores{80, 0, 30, 0, 80}));
  // The deployment's own replica does not: it spreads instead (ReplicaAntiAffinity).
  request_.deployment = "prod";
  EXPECT_EQ(normalized(**defaults, options), (Scores{0, 0, 60, 0, 0}));
  EXPECT_FALSE(ModelAffinityScore::create(nlohmann::json{{"cached", 101}}));
  EXPECT_FALSE(ModelAffinityScore::create(nlohmann::json{{"cached", 0.5}}));
}

// ---- ReplicaAntiAffinity ------------------------------------------------------------------

TEST_F(ScoreTest, ReplicaAntiAffinityPrefersNodesWithFewerOfTheDeployment) {
  const NodeId a = addNode(nodeSpec("a", "A100-80GB", 2));
  const NodeId b = addNode(nodeSpec("b", "A100-80GB", 2));
  const NodeId c = addNode(nodeSpec("c", "A100-80GB", 2));
  place("a1", {gpu("a", "0")}, kGib, 0, model::SharingMode::kShared, "m", "chat");
  place("a2", {gpu("a", "1")}, kGib, 0, model::SharingMode::kShared, "m", "chat");
  place("b1", {gpu("b", "0")}, kGib, 0, model::SharingMode::kShared, "m", "chat");
  place("c1", {gpu("c", "0")}, kGib, 0, model::SharingMode::kShared, "m", "other");
  request_.deployment = "chat";
  const std::vector<Option> options{option(a, {gpu("a", "0")}), option(b, {gpu("b", "1")}),
                                    option(b, {gpu("b", "0")}), option(c, {gpu("c", "1")})};
  ReplicaAntiAffinityScore p;
  // 100 / (1 + on the node + on the option's GPUs): a's GPU 0 holds a1 (1 + 2 + 1), b's GPU 1
  // is free on a node with one (1 + 1), b's GPU 0 holds b1 (1 + 1 + 1), c holds none of chat.
  // Raw {25, 50, 33, 100}; only the fewest (c) keeps the weight.
  EXPECT_EQ(normalized(p, options), (Scores{0, 0, 0, 100}));
  // Without c, b's free GPU is the fewest; b's GPU 0 (one more there) gets nothing, so no
  // mix of packing scores can prefer it (issue 14, bug 4).
  const std::vector<Option> withoutC(options.begin(), options.begin() + 3);
  EXPECT_EQ(normalized(p, withoutC), (Scores{0, 100, 0}));
}

TEST_F(ScoreTest, ReplicaAntiAffinityFallsBackToTheModelName) {
  const NodeId a = addNode(nodeSpec("a", "A100-80GB", 1));
  const NodeId b = addNode(nodeSpec("b", "A100-80GB", 1));
  place("a1", {gpu("a", "0")}, kGib, 0, model::SharingMode::kShared, "model");
  const std::vector<Option> options{option(a, {gpu("a", "0")}), option(b, {gpu("b", "0")})};
  ReplicaAntiAffinityScore p;
  EXPECT_EQ(normalized(p, options), (Scores{0, 100}));  // a1 on a's node and GPU (raw 33)
}

// ---- NumaLocality -------------------------------------------------------------------------

TEST_F(ScoreTest, NumaLocalityRewardsTheLargestSameNumaShare) {
  auto spec = nodeSpec("a", "A100-80GB", 5);
  for (int i = 0; i < 4; ++i) spec.gpus[static_cast<std::size_t>(i)].numaNode = i < 3 ? 0 : 1;
  const NodeId a = addNode(spec);  // GPU 4: unknown
  const std::vector<Option> options{
      option(a, {gpu("a", "0"), gpu("a", "1")}),
      option(a, {gpu("a", "0"), gpu("a", "1"), gpu("a", "2"), gpu("a", "3")}),
      option(a, {gpu("a", "2"), gpu("a", "3")}), option(a, {gpu("a", "0"), gpu("a", "4")}),
      option(a, {})};
  NumaLocalityScore p;
  EXPECT_EQ(normalized(p, options), (Scores{100, 75, 50, 50, 100}));
}

// ---- Fragmentation ------------------------------------------------------------------------

// Two GPUs: A with 30 GiB free, B with 50 GiB free; the expected workload is 40 GiB shapes.
class FragmentationTest : public ScoreTest {
 protected:
  NodeId node_ = -1;
  GpuId a_ = -1;
  GpuId b_ = -1;
  void SetUp() override {
    auto spec = nodeSpec("n", "A100-80GB", 2);
    node_ = addNode(spec);
    a_ = gpu("n", "0");
    b_ = gpu("n", "1");
    place("fill-a", {a_}, 50 * kGib);
    place("fill-b", {b_}, 30 * kGib);
  }
  std::vector<Option> options() const { return {option(node_, {a_}), option(node_, {b_})}; }
};

TEST_F(FragmentationTest, ExplicitWorkloadAvoidsCreatingUnusableHoles) {
  auto plugin = FragmentationScore::create(
      nlohmann::json{{"workload", {{{"memoryMib", 40 * kGib}, {"weight", 1}}}}});
  ASSERT_TRUE(plugin);
  // 12 GiB (10 × 1.2) on A: its 30 GiB hole (useless to a 40 GiB shape) shrinks to 18 GiB;
  // on B: 50 GiB stay usable (38 GiB left cannot take 40): a new 38 GiB fragment.
  const auto s = raw(**plugin, options());
  EXPECT_EQ(s[0], 12 * kGib * 1'000'000);
  EXPECT_EQ(s[1], -38 * kGib * 1'000'000);
  EXPECT_EQ(normalized(**plugin, options()), (Scores{100, 0}));
}

TEST_F(FragmentationTest, SmallShapesMakeEveryHoleUsable) {
  auto plugin = FragmentationScore::create(nlohmann::json{
      {"workload",
       {{{"memoryMib", 4 * kGib}, {"computeMilli", 100}, {"gpus", 1}, {"weight", 3}}}}});
  ASSERT_TRUE(plugin);
  // A 4 GiB shape fits everywhere before and after: no fragment, no preference.
  EXPECT_EQ(raw(**plugin, options()), (Scores{0, 0}));
  EXPECT_EQ(normalized(**plugin, options()), (Scores{100, 100}));
}

TEST_F(FragmentationTest, DerivedMixComesFromTheReplicasPlaced) {
  // The replicas placed estimate 50 and 30 GiB (× 1.2 = 60 and 36 GiB shapes, one each),
  // and the request (12 GiB) joins the mix with weight 1.
  FragmentationScore derived({});
  const auto s = raw(derived, options());
  // A: before 30 free: 60 and 36 do not fit (w 2), the request does -> 30 × 2.
  //    after 18 free: same shapes unfit, request fits (12 <= 18) -> 18 × 2. Gain 12 × 2.
  // B: before 50 free: 60 unfit (1); 36 and 12 fit -> 50 × 1.
  //    after 38 free: 60 unfit, 36 and 12 fit -> 38 × 1. Gain 12.
  EXPECT_EQ(s[0], 12 * kGib * 2);
  EXPECT_EQ(s[1], 12 * kGib * 1);
}

TEST_F(FragmentationTest, DerivedMixFollowsPlacementsAndRemovalsLikeAFreshInstance) {
  FragmentationScore reused({});
  (void)raw(reused, options());  // warm the incremental cache
  place("more", {a_}, 5 * kGib);
  ASSERT_TRUE(state_.apply(ReplicaUnloaded{"fill-b"}));
  place("again", {b_}, 20 * kGib);
  FragmentationScore fresh({});
  EXPECT_EQ(raw(reused, options()), raw(fresh, options()));

  // A copy of the state at another address, changed differently, is noticed too.
  ClusterState copy(state_);
  ASSERT_TRUE(copy.apply(ReplicaUnloaded{"again"}));
  const Needs needs = needsOf(request_);
  const DecisionContext ctx{copy, request_, needs};
  std::vector<std::int64_t> viaReused(2), viaFresh(2);
  reused.score(ctx, options(), viaReused);
  FragmentationScore fresh2({});
  fresh2.score(ctx, options(), viaFresh);
  EXPECT_EQ(viaReused, viaFresh);
}

TEST_F(FragmentationTest, GpuFragmentMeasuresUnusableFreeMemory) {
  auto plugin = FragmentationScore::create(
      nlohmann::json{{"workload", {{{"memoryMib", 40 * kGib}, {"weight", 1}}}}});
  ASSERT_TRUE(plugin);
  const auto& frag = static_cast<const FragmentationScore&>(**plugin);
  const Needs needs = needsOf(request_);
  const DecisionContext ctx{state_, request_, needs};
  EXPECT_EQ(frag.gpuFragment(ctx, a_), 30 * kGib * 1'000'000);
  EXPECT_EQ(frag.gpuFragment(ctx, b_), 0);
}

TEST_F(FragmentationTest, RejectsMalformedWorkloads) {
  EXPECT_FALSE(FragmentationScore::create(nlohmann::json{{"workload", nlohmann::json::array()}}));
  EXPECT_FALSE(FragmentationScore::create(nlohmann::json{{"workload", {{{"weight", 1}}}}}));
  EXPECT_FALSE(FragmentationScore::create(
      nlohmann::json{{"workload", {{{"memoryMib", 1}, {"computeMilli", 2000}}}}}));
  EXPECT_FALSE(
      FragmentationScore::create(nlohmann::json{{"workload", {{{"memoryMib", 1}, {"gpus", 0}}}}}))
      << "CPU-only shapes alone leave nothing to measure";
  auto typo =
      FragmentationScore::create(nlohmann::json{{"workload", {{{"memoryMib", 1}, {"memory", 2}}}}});
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error().message,
            "Fragmentation.workload[0]: unknown argument 'memory' (known: memoryMib, "
            "computeMilli, gpus, weight)");
}

TEST_F(ScoreTest, FragmentationOnMigCountsWhatStaysCreatable) {
  auto spec = nodeSpec("m", "A100-40GB", 1);
  spec.gpus[0].migEnabled = true;
  const NodeId m = addNode(spec);
  const GpuId g = gpu("m", "0");
  request_ = makeRequest("r", 4 * kGib);
  const Needs needs = needsOf(request_);
  auto choiceTop = chooseMigSlice(state_, g, request_, needs);
  ASSERT_TRUE(choiceTop);
  Option top = option(m, {g}, model::SharingMode::kMig);
  top.migProfile = choiceTop->profileIndex;
  top.migStart = choiceTop->start;
  top.migCreates = true;
  Option bottom = top;
  bottom.migStart = 0;  // a 1g at slice 0 blocks the 4g.20gb
  // Either start keeps a 20 GiB instance creatable (4g.20gb at 0 after the top choice,
  // 3g.20gb at 4 after the bottom one): no fragment for a 20 GiB shape.
  auto plugin = FragmentationScore::create(
      nlohmann::json{{"workload", {{{"memoryMib", 20480}, {"weight", 1}}}}});
  ASSERT_TRUE(plugin);
  const auto s = raw(**plugin, {top, bottom});
  EXPECT_EQ(s, (Scores{0, 0}));
  // A 40 GiB shape (7g.40gb) stops fitting either way: the 35 GiB left become a fragment.
  auto big = FragmentationScore::create(
      nlohmann::json{{"workload", {{{"memoryMib", 40960}, {"weight", 1}}}}});
  ASSERT_TRUE(big);
  const auto t = raw(**big, {top, bottom});
  EXPECT_EQ(t, (Scores{-(40960 - 5120) * std::int64_t{1'000'000},
                       -(40960 - 5120) * std::int64_t{1'000'000}}));
}

}  // namespace
}  // namespace tessera::sched
