// PackingGradient (sched/plugins/packing_gradient.h): its terms on hand-computed examples, the
// placements hand-worked examples say it should prefer (through the real engine with the
// simulation profile's filters), argument validation, and memoised scores against a fresh
// instance over a run of placements.

#include "sched/plugins/packing_gradient.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sched/engine.h"
#include "sched/plugin_test_support.h"

namespace tessera::sched {
namespace {

using testing::nodeSpec;

// A task shape: CPU, k GPUs of g milli, popularity p, GPU types.
TaskShape gradientShape(std::int64_t cpu, int k, std::int32_t g, double p,
                        std::vector<std::string> types = {}) {
  return {.cpuMilli = cpu,
          .gpuMilli = g,
          .gpus = k,
          .gpuTypes = std::move(types),
          .gpuTypeIndices = {},
          .weight = p};
}

std::vector<TaskShape> resolved(std::vector<TaskShape> shapes) {
  const auto catalog = model::GpuCatalog::builtin();
  EXPECT_TRUE(resolveTaskShapes(catalog, shapes));
  return shapes;
}

// ---- the terms ------------------------------------------------------------------------------

TEST(PackingGradientTerms, UsableCapacityCountsInstancesCappedByCpu) {
  // Free CPU 5000, GPUs {1000, 600, 1000, 300}.
  //   500-milli shape (2000 CPU, p 0.5): GPU instances 2+1+2+0 = 5, CPU allows 2 -> 1000.
  //   2 x 1000 shape (1000 CPU, p 0.25): 2 whole GPUs -> 1 instance -> 2000.
  //   CPU-only shape (p 0.25): 0.
  // U = 0.5 x 1000 + 0.25 x 2000 = 1000.
  const auto workload =
      resolved({gradientShape(2000, 1, 500, 0.5), gradientShape(1000, 2, 1000, 0.25),
                gradientShape(4000, 0, 0, 0.25)});
  const std::array<std::int32_t, 4> free{1000, 600, 1000, 300};
  const int t4 = model::GpuCatalog::builtin().indexOf("T4");
  EXPECT_DOUBLE_EQ(usableCapacityMilli(5000, free, t4, workload), 1000.0);
  // CPU for one 500 only: 0.5 x 500 + 0.25 x 2000 = 750.
  EXPECT_DOUBLE_EQ(usableCapacityMilli(2500, free, t4, workload), 750.0);
  // No CPU: nothing usable.
  EXPECT_DOUBLE_EQ(usableCapacityMilli(0, free, t4, workload), 0.0);
}

TEST(PackingGradientTerms, UsableCapacityIgnoresShapesThatCannotUseTheType) {
  const auto workload =
      resolved({gradientShape(0, 1, 500, 0.5, {"V100-16GB"}), gradientShape(0, 1, 500, 0.5)});
  const std::array<std::int32_t, 2> free{1000, 500};
  const auto catalog = model::GpuCatalog::builtin();
  // On a T4 only the untyped shape counts: 0.5 x 3 x 500; on a V100 both.
  EXPECT_DOUBLE_EQ(usableCapacityMilli(64'000, free, catalog.indexOf("T4"), workload), 750.0);
  EXPECT_DOUBLE_EQ(usableCapacityMilli(64'000, free, catalog.indexOf("V100-16GB"), workload),
                   1500.0);
}

TEST(PackingGradientTerms, StrandedGpuIsFreeGpuBeyondWhatTheCpuSupports) {
  const std::array<std::int32_t, 2> free{1000, 500};  // R = 1500
  // kappa 2: 4000 CPU supports 2000 milli -> nothing stranded.
  EXPECT_DOUBLE_EQ(strandedGpuMilli(4000, free, 2.0), 0.0);
  // kappa 4: 4000 CPU supports 1000 -> 500 stranded; no CPU -> all of it.
  EXPECT_DOUBLE_EQ(strandedGpuMilli(4000, free, 4.0), 500.0);
  EXPECT_DOUBLE_EQ(strandedGpuMilli(0, free, 4.0), 1500.0);
  EXPECT_DOUBLE_EQ(strandedGpuMilli(0, free, 0.0), 0.0);  // no kappa, no term
}

// ---- the plugin -----------------------------------------------------------------------------

class PackingGradientTest : public testing::PluginTest {
 protected:
  PluginRegistry registry_;

  void SetUp() override {
    registerBuiltinPlugins(registry_);
    registerArtifactPlugins(registry_);
  }

  // Terms 1-3 only, unless `guided` (terms 4-6 at their defaults).
  static PluginArgs args(const std::vector<TaskShape>& workload, double stranding,
                         bool guided = false) {
    PluginArgs a = taskShapesToArgs(workload);
    a["stranding"] = stranding;
    if (!guided) {
      a["lpWaste"] = 0.0;
      a["patternOrder"] = 0.0;
      a["completionReserve"] = 0.0;
    }
    return a;
  }

  // A trace pod: CPU, k GPUs of g milli each, shared.
  static model::PlacementRequest pod(const std::string& id, std::int64_t cpu, int k,
                                     std::int32_t g) {
    model::PlacementRequest r = testing::makeRequest(id, 0, k);
    r.model.cpuMilli = cpu;
    r.model.computeMilli = g;
    r.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kShared);
    return r;
  }

  std::unique_ptr<ScorePlugin> plugin(const PluginArgs& a) const {
    auto p = registry_.makeScore("PackingGradient", a);
    EXPECT_TRUE(p) << p.error().message;
    return p ? std::move(*p) : nullptr;
  }

  std::vector<std::int64_t> rawScores(const ScorePlugin& p, const model::PlacementRequest& r,
                                      std::span<const Option> options) const {
    const Needs needs = deriveNeeds(r, state_.options());
    const DecisionContext ctx{state_, r, needs};
    std::vector<std::int64_t> out(options.size(), 0);
    p.score(ctx, options, out);
    return out;
  }

  // Where the engine puts `r` with PackingGradient as the simulation profile's only score.
  std::string placeWith(const PluginArgs& a, const model::PlacementRequest& r) {
    Profile profile;
    profile.name = "simulation";
    profile.options.gpuTieBreak = GpuTieBreak::kIndex;
    profile.filters = {{"NodeResources", 1, PluginArgs::object()},
                       {"GpuType", 1, PluginArgs::object()},
                       {"ComputeCap", 1, PluginArgs{{"cap", 1.0}, {"mode", "hard"}}}};
    profile.scores = {{"PackingGradient", 1, a}};
    auto plugins = buildPlugins(profile, registry_);
    EXPECT_TRUE(plugins) << plugins.error().message;
    if (!plugins) return "no plugins";
    PlacementEngine engine(std::move(*plugins), profile.options);
    const Decision d = engine.decide(state_, r);
    if (!d.placement) return "nowhere: " + d.summary;
    std::string s = state_.node(d.placement->node).spec.name;
    for (const auto& g : d.placement->gpus) s += "/" + state_.gpu(g.gpu).spec.id;
    return s;
  }
};

TEST_F(PackingGradientTest, ScoresMinusTheCostAndKeepsRoomRatherThanBestFit) {
  // Shapes 300 and 700 (p 0.5 each, 1000 CPU: kappa = 2, the node's CPU strands nothing). A
  // 300 pod on GPUs free {1000, 700} (300 booked on GPU 1):
  //   U before: 300 -> 3+2 instances x 300 x 0.5 = 750, 700 -> 1+1 x 700 x 0.5 = 700.
  //   GPU 0 (1000 -> 700): 300 -> 2+2: loses 150; 700 -> 1+1: nothing. Cost 150.
  //   GPU 1 (700 -> 400): 300 -> 3+1: loses 150; 700 -> 1+0: loses 350. Cost 500.
  const NodeId n = addNode(nodeSpec("n", "T4", 2));
  place("a", {gpu("n", "1")}, 0, 300);
  const std::vector<TaskShape> workload{gradientShape(1000, 1, 300, 0.5),
                                        gradientShape(1000, 1, 700, 0.5)};
  const auto r = pod("p", 1000, 1, 300);
  const std::vector<Option> options{option(n, {gpu("n", "0")}), option(n, {gpu("n", "1")})};
  EXPECT_EQ(rawScores(*plugin(args(workload, 4)), r, options),
            (std::vector<std::int64_t>{-150'000, -500'000}));
  // Through the engine: best fit would take GPU 1 (700 free); PackingGradient takes GPU 0 and
  // keeps both 700s for the 700 shape.
  EXPECT_EQ(placeWith(args(workload, 4), r), "n/0");
}

TEST_F(PackingGradientTest, KeepsWholeNodesForMultiGpuShapes) {
  // Two 2-GPU nodes, one with a GPU half used. Workload: whole-GPU pods in pairs (p 0.1) and
  // 500-milli sharing pods (p 0.9); kappa = 1000 / 650 CPU per milli, so no stranding.
  //   empty/0: breaks the pair (0.1 x 2000) and a 500 instance (0.9 x 500): 650.
  //   used/1:  the pair is gone already: 450.
  //   used/0:  the 500 instance only: 450; the lower GPU index wins the tie.
  // A term that only counted one-GPU shapes (FGD's typical workload) would see no difference
  // between the nodes.
  addNode(nodeSpec("empty", "T4", 2));
  addNode(nodeSpec("used", "T4", 2));
  place("a", {gpu("used", "0")}, 0, 500);
  const std::vector<TaskShape> workload{gradientShape(1000, 2, 1000, 0.1),
                                        gradientShape(1000, 1, 500, 0.9)};
  EXPECT_EQ(placeWith(args(workload, 4), pod("p", 1000, 1, 500)), "used/0");
}

TEST_F(PackingGradientTest, KeepsCpuNextToFreeGpus) {
  // A CPU-only pod of 40 cores: node "gpu-free" has 4 idle GPUs, node "gpu-full" has all 4
  // GPUs booked. Taking 40 of 64 cores on "gpu-free" leaves 24 cores for 4000 GPU milli that
  // whole-GPU pods of 12 cores need (2 of 4 usable, stranded GPU besides); on "gpu-full" it
  // costs nothing. It goes to "gpu-full".
  addNode(nodeSpec("gpu-free", "T4", 4));
  addNode(nodeSpec("gpu-full", "T4", 4));
  for (int i = 0; i < 4; ++i)
    place("b" + std::to_string(i), {gpu("gpu-full", std::to_string(i))}, 0, 1000);
  const std::vector<TaskShape> workload{gradientShape(12'000, 1, 1000, 0.5),
                                        gradientShape(40'000, 0, 0, 0.5)};
  EXPECT_EQ(placeWith(args(workload, 4), pod("c", 40'000, 0, 0)), "gpu-full");
}

TEST_F(PackingGradientTest, RejectsBadArguments) {
  const PluginArgs workload =
      taskShapesToArgs(std::vector<TaskShape>{gradientShape(1000, 1, 500, 1)});
  auto missing = registry_.makeScore("PackingGradient", PluginArgs::object());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("'workload' is required"), std::string::npos)
      << missing.error().message;
  for (const char* key :
       {"stranding", "typePressure", "lpWaste", "patternOrder", "completionReserve"}) {
    PluginArgs a = workload;
    a[key] = -1.0;
    auto r = registry_.makeScore("PackingGradient", a);
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().message;
  }
  PluginArgs zeroScale = workload;
  zeroScale["cpuPerGpuScale"] = 0.0;
  EXPECT_FALSE(registry_.makeScore("PackingGradient", zeroScale));
  PluginArgs unknown = workload;
  unknown["fill"] = 1.0;
  auto r = registry_.makeScore("PackingGradient", unknown);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("fill"), std::string::npos) << r.error().message;
  PluginArgs badShape = PluginArgs{{"workload", PluginArgs::array()}};
  EXPECT_FALSE(registry_.makeScore("PackingGradient", badShape));
  EXPECT_TRUE(registry_.makeScore("PackingGradient", workload));
}

// Workload of the pattern tests: 810 + 190 and 500 + 500 fill a GPU exactly (the LP's
// patterns); 1000 CPU each.
std::vector<TaskShape> patternWorkload() {
  return {gradientShape(1000, 1, 810, 0.4), gradientShape(1000, 1, 190, 0.2),
          gradientShape(1000, 1, 500, 0.4)};
}

TEST_F(PackingGradientTest, PatternOrderFinishesAStartedGpuBeforeOpeningOne) {
  // GPU 0 holds a 500, GPU 1 is empty. A 500 completes the 500 + 500 pattern on GPU 0 (class
  // 0) or starts one on GPU 1 (class 2); both keep the LP waste at 0, so the guided cost
  // differs from the unguided one by exactly patternOrder x 2 = 200 milli-GPU.
  const NodeId n = addNode(nodeSpec("n", "T4", 2));
  place("a", {gpu("n", "0")}, 0, 500);
  const auto r = pod("p", 1000, 1, 500);
  const std::vector<Option> options{option(n, {gpu("n", "0")}), option(n, {gpu("n", "1")})};
  const auto off = rawScores(*plugin(args(patternWorkload(), 2)), r, options);
  const auto on = rawScores(*plugin(args(patternWorkload(), 2, true)), r, options);
  EXPECT_EQ((on[0] - on[1]) - (off[0] - off[1]), 200'000) << on[0] << " " << on[1];
  EXPECT_EQ(placeWith(args(patternWorkload(), 2, true), r), "n/0");
}

TEST_F(PackingGradientTest, LpWasteKeepsAPodOffAGpuWhereItBreaksEveryPattern) {
  // GPU 0 holds an 810 (190 left), GPU 1 a 500 (500 left). A 190 pod completes 810 + 190 on
  // GPU 0; on GPU 1 it leaves 310 that no pattern fills (reduced cost > 0).
  const NodeId n = addNode(nodeSpec("n", "T4", 2));
  place("a", {gpu("n", "0")}, 0, 810);
  place("b", {gpu("n", "1")}, 0, 500);
  const auto r = pod("p", 1000, 1, 190);
  const std::vector<Option> options{option(n, {gpu("n", "0")}), option(n, {gpu("n", "1")})};
  const auto on = rawScores(*plugin(args(patternWorkload(), 2, true)), r, options);
  // At least the pattern order's 300 (class 0 against 3) plus a positive LP waste.
  EXPECT_GT(on[0] - on[1], 300'000);
  EXPECT_EQ(placeWith(args(patternWorkload(), 2, true), r), "n/0");
}

TEST_F(PackingGradientTest, CompletionReserveKeepsCpuForAGpuWaitingForItsPartner) {
  // Node "waiting" (2 cores) has a lone 500 that needs one more 500 pod (1 core) to be full;
  // node "idle" (2 cores) has every GPU full. A CPU-only pod of 2 cores on "waiting" takes
  // that core. Term 1 already sees the lost 500 instance; the reserve adds 2 x 1000 CPU /
  // kappa, kappa = 1000 CPU / 562 milli-GPU (the workload's CPU per GPU milli): 1124
  // milli-GPU. The same on nodes of 1 GPU (memoised scores) and of 10 (scored directly).
  for (const int gpus : {1, 10}) {
    SCOPED_TRACE(std::to_string(gpus) + " GPUs per node");
    const std::string suffix = "-" + std::to_string(gpus);
    model::NodeSpec waiting = nodeSpec("waiting" + suffix, "T4", gpus);
    waiting.cpuMilli = 2000;
    model::NodeSpec idle = nodeSpec("idle" + suffix, "T4", gpus);
    idle.cpuMilli = 2000;
    const NodeId w = addNode(waiting);
    const NodeId i = addNode(idle);
    place("a" + suffix, {gpu("waiting" + suffix, "0")}, 0, 500);
    for (int g = 0; g < gpus; ++g) {
      place("b" + suffix + "-" + std::to_string(g), {gpu("idle" + suffix, std::to_string(g))}, 0,
            1000, model::SharingMode::kExclusive);
    }
    const auto r = pod("c" + suffix, 2000, 0, 0);
    const std::vector<Option> options{option(w, {}), option(i, {})};
    const auto off = rawScores(*plugin(args(patternWorkload(), 0)), r, options);
    const auto on = rawScores(*plugin(args(patternWorkload(), 0, true)), r, options);
    EXPECT_LT(off[0], off[1]);
    EXPECT_NEAR(static_cast<double>((off[0] - off[1]) - (on[0] - on[1])), 1'124'000.0, 2.0);
  }
}

TEST_F(PackingGradientTest, MemoisedScoresEqualAFreshInstancesOverAFillingCluster) {
  // One long-lived instance scores every step; a fresh one (empty caches) must agree on every
  // option while pods of mixed shapes fill three nodes; without and with the pattern guide,
  // each on its own three nodes.
  const std::vector<TaskShape> workload{
      gradientShape(4000, 1, 300, 0.4), gradientShape(8000, 1, 1000, 0.3),
      gradientShape(2000, 0, 0, 0.2),   gradientShape(16'000, 2, 1000, 0.1),
      gradientShape(4000, 1, 470, 0.2), gradientShape(4000, 1, 810, 0.2)};
  for (const bool guided : {false, true}) {
    SCOPED_TRACE(guided ? "guided" : "terms 1-3");
    const std::string prefix = guided ? "g" : "n";
    std::vector<NodeId> nodes;
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(addNode(nodeSpec(prefix + std::to_string(i), "T4", 4)));
    }
    const PluginArgs a = args(workload, 4, guided);
    auto warm = plugin(a);
    std::mt19937 rng(7);
    const std::array<std::int32_t, 5> millis{150, 300, 470, 650, 810};
    for (int step = 0; step < 40; ++step) {
      const auto r = pod(prefix + std::to_string(step), 2000, 1, millis[rng() % millis.size()]);
      std::vector<Option> options;
      for (NodeId n : nodes) {
        for (GpuId g : state_.node(n).gpuIds) {
          if (state_.gpu(g).freeComputeMilli() >= r.model.computeMilli)
            options.push_back(option(n, {g}));
        }
      }
      if (options.empty()) break;
      const auto got = rawScores(*warm, r, options);
      ASSERT_EQ(got, rawScores(*plugin(a), r, options)) << "step " << step;
      const Option& pick = options[rng() % options.size()];
      place(r.replicaId, {pick.gpus[0]}, 0, r.model.computeMilli);
    }
  }
}

}  // namespace
}  // namespace tessera::sched
