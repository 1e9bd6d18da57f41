// The FGD artifact's policies (sched/plugins/artifact_policies.h) against hand-computed
// examples from shared/docs/fgd-benchmark.md sections 4-5, through the real engine with the
// simulation profile (NodeResources, GpuType, ComputeCap {cap: 1.0, mode: hard}), plus a
// randomised check that the memoised plugins score exactly like fresh instances and like a
// direct, cache-free computation. The seed is printed; rerun with TESSERA_SEED=<seed>.

#include "sched/plugins/artifact_policies.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/engine.h"
#include "sched/plugin_test_support.h"

namespace tessera::sched {
namespace {

using testing::kGib;

std::uint64_t testSeed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = 0;
    if (const char* env = std::getenv("TESSERA_SEED"); env != nullptr && *env != '\0') {
      s = std::strtoull(env, nullptr, 10);
    } else {
      s = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    }
    std::cout << "artifact policies: TESSERA_SEED=" << s << std::endl;
    return s;
  }();
  return seed;
}

TaskShape shape(std::int64_t cpuMilli, int gpus, std::int32_t gpuMilli, double weight,
                std::vector<std::string> types = {}) {
  TaskShape s;
  s.cpuMilli = cpuMilli;
  s.gpus = gpus;
  s.gpuMilli = gpuMilli;
  s.weight = weight;
  s.gpuTypes = std::move(types);
  return s;
}

// trunc(100 sigma(delta / 1000)), written out independently of the plugin.
std::int64_t expectedFgd(double deltaMilli) {
  return static_cast<std::int64_t>(100.0 / (1.0 + std::exp(-deltaMilli / 1000.0)));
}

class ArtifactPolicyTest : public ::testing::Test {
 protected:
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  ClusterState state_{catalog_, clock_};
  PluginRegistry registry_;
  int booked_ = 0;

  void SetUp() override {
    registerBuiltinPlugins(registry_);
    registerArtifactPlugins(registry_);
  }

  NodeId addNode(const std::string& name, std::int64_t cpuMilli, int gpus,
                 const std::string& type = "T4", std::int64_t rank = -1) {
    model::NodeSpec n;
    n.name = name;
    n.cpuMilli = cpuMilli;
    n.hostMemoryMib = 512 * kGib;
    if (rank >= 0) n.rank = rank;
    for (int i = 0; i < gpus; ++i) {
      model::GpuSpec g;
      g.id = std::to_string(i);
      g.type = type;
      n.gpus.push_back(g);
    }
    auto r = state_.apply(NodeAdded{n});
    EXPECT_TRUE(r) << r.error().message;
    return *state_.findNode(name);
  }

  // Books a pod directly: `cpuMilli` on the node and `milli` on each listed GPU index.
  void book(NodeId node, std::int64_t cpuMilli, std::int32_t milli, std::vector<int> gpus) {
    Placement p;
    p.replicaId = "booked-" + std::to_string(booked_++);
    p.modelName = "pod";
    p.deployment = p.replicaId;
    p.node = node;
    p.cpuMilli = cpuMilli;
    for (int i : gpus) {
      GpuAssignment a;
      a.gpu = state_.node(node).gpuIds[static_cast<std::size_t>(i)];
      a.computeMilli = milli;
      p.gpus.push_back(a);
    }
    auto r = state_.apply(replicaPlaced(state_, p, clock_.nowMs()));
    ASSERT_TRUE(r) << r.error().message;
  }

  static model::PlacementRequest pod(const std::string& id, std::int64_t cpuMilli, int gpus,
                                     std::int32_t gpuMilli, std::vector<std::string> types = {}) {
    model::PlacementRequest r;
    r.replicaId = id;
    r.deployment = id;
    r.model.name = "pod";
    r.model.cpuMilli = cpuMilli;
    r.model.hostMemoryMib = 1024;
    r.model.gpusPerReplica = gpus;
    r.model.computeMilli = gpuMilli;
    r.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kShared);
    r.gpuTypes = std::move(types);
    return r;
  }

  std::unique_ptr<PlacementEngine> engine(const std::string& score, PluginArgs args,
                                          GpuTieBreak tieBreak) {
    Profile p;
    p.name = "simulation";
    p.options.gpuTieBreak = tieBreak;
    p.filters = {{"NodeResources", 1, PluginArgs::object()},
                 {"GpuType", 1, PluginArgs::object()},
                 {"ComputeCap", 1, PluginArgs{{"cap", 1.0}, {"mode", "hard"}}}};
    p.scores = {{score, 1000, std::move(args)}};
    auto plugins = buildPlugins(p, registry_);
    EXPECT_TRUE(plugins) << plugins.error().message;
    return std::make_unique<PlacementEngine>(std::move(*plugins), p.options);
  }

  std::unique_ptr<ScorePlugin> plugin(const std::string& name,
                                      const PluginArgs& args = PluginArgs::object()) const {
    auto p = registry_.makeScore(name, args);
    EXPECT_TRUE(p) << p.error().message;
    return p ? std::move(*p) : nullptr;
  }

  // The options the engine builds for the simulation profile: one per fitting GPU for k == 1,
  // one per node (the lowest-index fitting GPUs) otherwise.
  std::vector<Option> optionsFor(const model::PlacementRequest& r) const {
    std::vector<Option> out;
    const int k = r.model.gpusPerReplica;
    for (NodeId n = 0; n < static_cast<NodeId>(state_.nodes().size()); ++n) {
      const NodeRecord& node = state_.node(n);
      if (node.freeCpuMilli() < r.model.cpuMilli) continue;
      Option o;
      o.node = n;
      if (k == 0) {
        out.push_back(o);
        continue;
      }
      std::vector<GpuId> fit;
      for (GpuId g : node.gpuIds) {
        const GpuRecord& gpu = state_.gpu(g);
        const bool typeOk =
            r.gpuTypes.empty() ||
            std::find_if(r.gpuTypes.begin(), r.gpuTypes.end(), [&](const std::string& t) {
              return catalog_.indexOf(t) == gpu.typeIndex;
            }) != r.gpuTypes.end();
        if (typeOk && gpu.freeComputeMilli() >= r.model.computeMilli) fit.push_back(g);
      }
      o.gpuCount = static_cast<std::int8_t>(k);
      if (k == 1) {
        for (GpuId g : fit) {
          o.gpus[0] = g;
          out.push_back(o);
        }
      } else if (static_cast<int>(fit.size()) >= k) {
        for (int i = 0; i < k; ++i)
          o.gpus[static_cast<std::size_t>(i)] = fit[static_cast<std::size_t>(i)];
        out.push_back(o);
      }
    }
    return out;
  }

  std::vector<std::int64_t> scores(const ScorePlugin& p, const model::PlacementRequest& r,
                                   std::span<const Option> options) const {
    const Needs needs = deriveNeeds(r, state_.options());
    const DecisionContext ctx{state_, r, needs};
    std::vector<std::int64_t> out(options.size(), -1);
    p.score(ctx, options, out);
    return out;
  }

  std::string where(const Decision& d) const {
    if (!d.placement) return "nowhere: " + d.summary;
    std::string s = state_.node(d.placement->node).spec.name;
    for (const auto& a : d.placement->gpus) s += "/" + state_.gpu(a.gpu).spec.id;
    return s;
  }

  int typeIndex(const std::string& name) const { return catalog_.indexOf(name); }
};

// ---- task shapes --------------------------------------------------------------------------

TEST(ArtifactShapesTest, RoundTripsThroughArgs) {
  std::vector<TaskShape> shapes = {shape(3152, 1, 810, 0.128129), shape(12500, 0, 0, 1.0 / 3),
                                   shape(11300, 8, 1000, 0.1, {"G2", "T4"})};
  auto back = parseTaskShapes(taskShapesToArgs(shapes));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->size(), 3u);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ((*back)[i].cpuMilli, shapes[i].cpuMilli);
    EXPECT_EQ((*back)[i].gpuMilli, shapes[i].gpuMilli);
    EXPECT_EQ((*back)[i].gpus, shapes[i].gpus);
    EXPECT_EQ((*back)[i].gpuTypes, shapes[i].gpuTypes);
    EXPECT_EQ((*back)[i].weight, shapes[i].weight);  // bit-exact: FGD sums depend on it
  }
}

TEST(ArtifactShapesTest, RejectsMalformedWorkloads) {
  auto message = [](const PluginArgs& args) {
    auto r = parseTaskShapes(args);
    return r ? std::string("accepted") : r.error().message;
  };
  EXPECT_NE(message(PluginArgs::object()).find("non-empty"), std::string::npos);
  EXPECT_NE(message({{"workload", PluginArgs::array()}}).find("non-empty"), std::string::npos);
  EXPECT_NE(message({{"shapes", 1}}).find("unknown argument 'shapes'"), std::string::npos);
  const PluginArgs noWeight = {{"workload", {{{"cpuMilli", 1000}}}}};
  EXPECT_NE(message(noWeight).find("workload[0]: 'weight' is required"), std::string::npos);
  const PluginArgs mixed = {{"workload", {{{"gpus", 1}, {"gpuMilli", 0}, {"weight", 1}}}}};
  EXPECT_NE(message(mixed).find("both be 0"), std::string::npos);
  const PluginArgs heavy = {{"workload", {{{"weight", 1.5}}}}};
  EXPECT_NE(message(heavy).find("'weight' must be in"), std::string::npos);
  const PluginArgs typo = {{"workload", {{{"weight", 1}, {"gpuType", "T4"}}}}};
  EXPECT_NE(message(typo).find("unknown argument 'gpuType'"), std::string::npos);
  const PluginArgs badTypes = {{"workload", {{{"weight", 1}, {"gpuTypes", "T4"}}}}};
  EXPECT_NE(message(badTypes).find("list of GPU type names"), std::string::npos);
}

TEST(ArtifactShapesTest, ResolvesTypesAndNamesTheKnownOnes) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  std::vector<TaskShape> shapes = {shape(1000, 1, 500, 0.5, {"T4", "A10"}), shape(0, 0, 0, 0.5)};
  ASSERT_TRUE(resolveTaskShapes(catalog, shapes));
  EXPECT_EQ(shapes[0].gpuTypeIndices,
            (std::vector<int>{catalog.indexOf("T4"), catalog.indexOf("A10")}));
  EXPECT_TRUE(shapes[1].gpuTypeIndices.empty());
  shapes[1].gpuTypes = {"NoSuchGpu"};
  auto r = resolveTaskShapes(catalog, shapes);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("workload[1]: unknown GPU type 'NoSuchGpu'"), std::string::npos);
  EXPECT_NE(r.error().message.find("T4"), std::string::npos);  // lists the known types
}

TEST(ArtifactShapesTest, RegistersTheSixPoliciesApartFromTheBuiltins) {
  PluginRegistry builtins;
  registerBuiltinPlugins(builtins);
  for (const std::string& name : builtins.scoreNames()) {
    EXPECT_EQ(name.rfind("Artifact", 0), std::string::npos) << name;
  }
  PluginRegistry r;
  registerArtifactPlugins(r);
  // Plus Tessera's own policy for the same workloads (packing_gradient.h).
  EXPECT_EQ(r.scoreNames(),
            (std::vector<std::string>{"ArtifactBestFit", "ArtifactDotProd", "ArtifactFgd",
                                      "ArtifactGpuClustering", "ArtifactGpuPacking",
                                      "ArtifactRandom", "PackingGradient"}));
  auto fgd = r.makeScore("ArtifactFgd", PluginArgs::object());
  ASSERT_FALSE(fgd);
  EXPECT_NE(fgd.error().message.find("ArtifactFgd: 'workload'"), std::string::npos)
      << fgd.error().message;
  EXPECT_FALSE(r.makeScore("ArtifactDotProd", PluginArgs{{"norm", "max"}}));
  EXPECT_FALSE(r.makeScore("ArtifactRandom", PluginArgs{{"seed", -1}}));
  EXPECT_TRUE(r.makeScore("ArtifactRandom", PluginArgs{{"seed", 42}}));
}

// ---- the fragment measure -----------------------------------------------------------------

// A node with 8 cores free and GPUs {1000, 500, 200, 0} milli free: R = 1700.
class ArtifactFragmentTest : public ::testing::Test {
 protected:
  const model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  const std::array<std::int32_t, 4> free_{1000, 500, 200, 0};
  const int t4_ = catalog_.indexOf("T4");

  double fragment(std::vector<TaskShape> shapes, std::int64_t cpu = 8000) const {
    EXPECT_TRUE(resolveTaskShapes(catalog_, shapes));
    return fgdNodeFragmentMilli(cpu, free_, t4_, shapes);
  }
};

TEST_F(ArtifactFragmentTest, CpuOnlyShapesSeeEveryFreeGpuAsFragment) {
  EXPECT_EQ(fragment({shape(4000, 0, 0, 1)}), 1700);   // CPU fits (XL)
  EXPECT_EQ(fragment({shape(16000, 0, 0, 1)}), 1700);  // CPU short (XR)
}

TEST_F(ArtifactFragmentTest, AShapeThatCannotUseTheTypeSeesEveryFreeGpu) {
  EXPECT_EQ(fragment({shape(1000, 1, 100, 1, {"A10"})}), 1700);
  EXPECT_EQ(fragment({shape(1000, 1, 100, 1, {"A10", "T4"})}), 0);  // fits; no GPU under 100
  // An unresolved shape (names without indices) matches no node.
  std::vector<TaskShape> unresolved = {shape(1000, 1, 100, 1, {"T4"})};
  EXPECT_EQ(fgdNodeFragmentMilli(8000, free_, t4_, unresolved), 1700);
}

TEST_F(ArtifactFragmentTest, AFittingShapeSeesOnlyTheGpusTooSmallForIt) {
  EXPECT_EQ(fragment({shape(4000, 1, 600, 1)}), 700);  // 500 + 200 + 0
  EXPECT_EQ(fragment({shape(4000, 1, 200, 1)}), 0);    // only the empty GPU is too small
  EXPECT_EQ(fragment({shape(4000, 1, 1000, 1)}), 700);
  EXPECT_EQ(fragment({shape(4000, 1, 600, 0.5)}), 350);
}

TEST_F(ArtifactFragmentTest, AShapeThatDoesNotFitSeesEveryFreeGpu) {
  EXPECT_EQ(fragment({shape(4000, 2, 1000, 1)}), 1700);   // lacks GPU (Q2)
  EXPECT_EQ(fragment({shape(16000, 1, 100, 1)}), 1700);   // lacks CPU (Q4)
  EXPECT_EQ(fragment({shape(16000, 2, 1000, 1)}), 1700);  // lacks both (Q1)
  // Exactly the free CPU still fits.
  EXPECT_EQ(fragment({shape(8000, 1, 600, 1)}), 700);
  EXPECT_EQ(fragment({shape(8001, 1, 600, 1)}), 1700);
}

TEST_F(ArtifactFragmentTest, SumsPerCategoryThenAcrossCategories) {
  // Two CPU-only shapes (XL) around one that lacks GPUs (Q2). The artifact adds
  // Q2 + (XL_1 + XL_2); summing shape by shape gives a different double here.
  const double p1 = 1.0 / 97;
  const double p2 = 4.0 / 89;
  const double p3 = 0.3;
  const double r = 1700;
  const double perCategory = (0.0 + p2 * r) + ((0.0 + p1 * r) + p3 * r);
  const double perShape = ((0.0 + p1 * r) + p2 * r) + p3 * r;
  ASSERT_NE(perCategory, perShape);
  EXPECT_EQ(fragment({shape(1000, 0, 0, p1), shape(1000, 2, 1000, p2), shape(2000, 0, 0, p3)}),
            perCategory);
}

// ---- the policies through the engine ------------------------------------------------------

TEST_F(ArtifactPolicyTest, DotProdAndBestFitChooseDifferently) {
  // A: 32 cores and 8 free GPUs; B: 128 cores and one GPU. A 32-core one-GPU pod.
  //   DotProd A: 1 - (0.25 x 0.25 + 1 x 0.125) / 2 = 0.90625 -> 90; B: 1 - (1 x 0.25 +
  //   0.125 x 0.125) / 2 = 0.8671875 -> 86. DotProd takes A.
  //   BestFit A: 100 (1 - (0 + 7000 / 8000 x 0.5)) = 56.25 -> 56; B: 100 (1 - (96000 / 128000 x
  //   0.5 + 0)) = 62.5 -> 62; normalised A 0, B 100. BestFit takes B.
  addNode("a", 32'000, 8);
  addNode("b", 128'000, 1);
  const auto r = pod("p", 32'000, 1, 1000);
  auto dot = plugin("ArtifactDotProd");
  auto best = plugin("ArtifactBestFit");
  const auto options = optionsFor(r);
  ASSERT_EQ(options.size(), 9u);
  auto raw = scores(*dot, r, options);
  EXPECT_EQ(raw.front(), 90);
  EXPECT_EQ(raw.back(), 86);
  raw = scores(*best, r, options);
  EXPECT_EQ(raw.front(), 56);
  EXPECT_EQ(raw.back(), 62);
  best->normalize(raw);
  EXPECT_EQ(raw.front(), 0);
  EXPECT_EQ(raw.back(), 100);

  Decision d =
      engine("ArtifactDotProd", PluginArgs::object(), GpuTieBreak::kBestFit)->decide(state_, r);
  EXPECT_EQ(where(d), "a/0");
  EXPECT_EQ(d.breakdown.at(0).score, 90);
  d = engine("ArtifactBestFit", PluginArgs::object(), GpuTieBreak::kBestFit)->decide(state_, r);
  EXPECT_EQ(where(d), "b/0");
  EXPECT_EQ(d.breakdown.at(0).score, 100);
}

TEST_F(ArtifactPolicyTest, BestFitNormalisesAllEqualToZero) {
  const NodeId a = addNode("a", 32'000, 2, "T4", 1);
  addNode("b", 32'000, 2, "T4", 0);
  auto best = plugin("ArtifactBestFit");
  std::vector<std::int64_t> same = {73, 73, 73};
  best->normalize(same);
  EXPECT_EQ(same, (std::vector<std::int64_t>{0, 0, 0}));
  auto e = engine("ArtifactBestFit", PluginArgs::object(), GpuTieBreak::kBestFit);
  // Equal nodes: every option scores 0; the lower rank (b) wins, then the lowest index.
  Decision d = e->decide(state_, pod("p", 1000, 1, 300));
  EXPECT_EQ(where(d), "b/0");
  EXPECT_EQ(d.breakdown.at(0).score, 0);
  // With 600 milli booked on a's GPU 1, a leaves less: raw 100 (1 - (31000 / 128000 x 0.5 +
  // 1100 / 8000 x 0.5)) = 81.02 -> 81 against b's 77; normalised 100 and 0. The best-fit GPU
  // on a is GPU 1 (400 free).
  book(a, 0, 600, {1});
  d = e->decide(state_, pod("p", 1000, 1, 300));
  EXPECT_EQ(where(d), "a/1");
  EXPECT_EQ(d.breakdown.at(0).score, 100);
}

TEST_F(ArtifactPolicyTest, GpuPackingScoresItsThreeCases) {
  const NodeId empty8 = addNode("empty8", 64'000, 8);
  const NodeId empty2 = addNode("empty2", 64'000, 2);
  const NodeId used = addNode("used", 64'000, 4);
  book(used, 1000, 500, {1});  // free {1000, 500, 1000, 1000}
  book(used, 1000, 600, {2});  // free {1000, 500, 400, 1000}
  auto packing = plugin("ArtifactGpuPacking");
  auto nodeScore = [&](const model::PlacementRequest& r, NodeId n) {
    const auto options = optionsFor(r);
    const auto s = scores(*packing, r, options);
    for (std::size_t i = 0; i < options.size(); ++i) {
      if (options[i].node == n) return s[i];
    }
    return std::int64_t{-1};
  };
  // Case 3, an empty node: max(33 - #GPUs, #GPUs).
  EXPECT_EQ(nodeScore(pod("s", 1000, 1, 300), empty8), 25);
  EXPECT_EQ(nodeScore(pod("s", 1000, 1, 300), empty2), 31);
  // Case 1, partly used GPUs: the best fit for 300 is the 400 GPU: 100 - floor(40 / 10) = 96;
  // for 450 the 500 GPU: 100 - 5 = 95.
  EXPECT_EQ(nodeScore(pod("s", 1000, 1, 300), used), 96);
  EXPECT_EQ(nodeScore(pod("s", 1000, 1, 450), used), 95);
  // Case 2, fully free GPUs on a used node: max(50 - #used, 33).
  EXPECT_EQ(nodeScore(pod("s", 1000, 1, 600), used), 49);
  EXPECT_EQ(nodeScore(pod("w", 1000, 2, 1000), used), 48);
  // CPU-only pods score 0.
  EXPECT_EQ(nodeScore(pod("c", 1000, 0, 0), used), 0);

  // The engine takes the used node and its best-fit GPU (index 2, 400 free).
  Decision d = engine("ArtifactGpuPacking", PluginArgs::object(), GpuTieBreak::kBestFit)
                   ->decide(state_, pod("s", 1000, 1, 300));
  EXPECT_EQ(where(d), "used/2");
  EXPECT_EQ(d.breakdown.at(0).score, 96);
}

TEST_F(ArtifactPolicyTest, GpuClusteringScoresTheTagCases) {
  const NodeId shareOnly = addNode("share-only", 64'000, 8);
  const NodeId mixed = addNode("mixed", 64'000, 8);
  const NodeId empty = addNode("empty", 64'000, 8);
  const NodeId whole = addNode("whole", 64'000, 8);
  book(shareOnly, 1000, 500, {0});  // R 7500: base 25 x 500 / 8000 = 1
  book(mixed, 1000, 500, {0});
  book(mixed, 1000, 1000, {1});  // R 6500: base 25 x 1500 / 8000 = 4
  book(whole, 1000, 1000, {0});  // R 7000: base 3
  book(whole, 1000, 0, {});      // a CPU-only pod carries no tag
  auto clustering = plugin("ArtifactGpuClustering");
  auto nodeScores = [&](const model::PlacementRequest& r) {
    std::map<NodeId, std::int64_t> out;
    const auto options = optionsFor(r);
    const auto s = scores(*clustering, r, options);
    for (std::size_t i = 0; i < options.size(); ++i) out[options[i].node] = s[i];
    return out;
  };
  auto share = nodeScores(pod("s", 1000, 1, 300));
  EXPECT_EQ(share[shareOnly], 1 + 75);  // only this tag
  EXPECT_EQ(share[mixed], 4 + 50);      // this tag among others
  EXPECT_EQ(share[empty], 0 + 25);      // no GPU pod yet
  EXPECT_EQ(share[whole], 3 + 0);       // only other tags
  auto one = nodeScores(pod("w", 1000, 1, 1000));
  EXPECT_EQ(one[shareOnly], 1);
  EXPECT_EQ(one[mixed], 54);
  EXPECT_EQ(one[whole], 78);
  auto two = nodeScores(pod("w2", 1000, 2, 1000));
  EXPECT_EQ(two[whole], 3);  // 2-gpu is another tag than 1-gpu
  EXPECT_EQ(two[empty], 25);
  for (const auto& [node, s] : nodeScores(pod("c", 1000, 0, 0))) EXPECT_EQ(s, 0) << node;

  Decision d = engine("ArtifactGpuClustering", PluginArgs::object(), GpuTieBreak::kBestFit)
                   ->decide(state_, pod("s", 1000, 1, 300));
  EXPECT_EQ(where(d), "share-only/0");  // best fit: the 500 GPU
}

TEST_F(ArtifactPolicyTest, FgdScoresEachGpuOfASharingPod) {
  // Workload: one shape needing 500 milli. Node GPUs free {1000, 600, 300}: F = 300.
  //   GPU 0 -> {700, 600, 300}: F 300, delta 0 -> 50.
  //   GPU 1 -> {1000, 300, 300}: F 600, delta -300 -> trunc(100 sigma(-0.3)) = 42.
  //   GPU 2 -> {1000, 600, 0}: F 0, delta 300 -> 57.
  const NodeId n = addNode("n", 64'000, 3);
  book(n, 0, 400, {1});
  book(n, 0, 700, {2});
  const PluginArgs args = taskShapesToArgs(std::vector<TaskShape>{shape(1000, 1, 500, 1)});
  auto fgd = plugin("ArtifactFgd", args);
  const auto r = pod("p", 1000, 1, 300);
  const auto options = optionsFor(r);
  ASSERT_EQ(options.size(), 3u);
  EXPECT_EQ(scores(*fgd, r, options), (std::vector<std::int64_t>{50, 42, 57}));
  EXPECT_EQ(expectedFgd(-300), 42);
  EXPECT_EQ(expectedFgd(300), 57);
  Decision d = engine("ArtifactFgd", args, GpuTieBreak::kIndex)->decide(state_, r);
  EXPECT_EQ(where(d), "n/2");
  EXPECT_EQ(d.breakdown.at(0).score, 57);
}

TEST_F(ArtifactPolicyTest, FgdQuantisesTheGradientIntoTheArtifactsBins) {
  // A CPU-only workload counts every free GPU milli, so placing a sharing pod of g milli
  // lowers F by exactly g: delta = g.
  addNode("n", 64'000, 1);
  auto fgdFor = [&](const std::vector<TaskShape>& shapes) {
    return plugin("ArtifactFgd", taskShapesToArgs(shapes));
  };
  auto cpuOnly = fgdFor({shape(1000, 0, 0, 1)});
  auto scoreOf = [&](const ScorePlugin& p, const model::PlacementRequest& r) {
    const auto options = optionsFor(r);
    EXPECT_EQ(options.size(), 1u);
    return scores(p, r, options).at(0);
  };
  EXPECT_EQ(scoreOf(*cpuOnly, pod("a", 1000, 1, 1)), 50);
  EXPECT_EQ(scoreOf(*cpuOnly, pod("b", 1000, 1, 40)), 50);  // 100 sigma(0.04) = 50.9999
  EXPECT_EQ(scoreOf(*cpuOnly, pod("c", 1000, 1, 41)), 51);
  EXPECT_EQ(scoreOf(*cpuOnly, pod("d", 1000, 1, 999)), expectedFgd(999));
  // Delta exactly 0 (a CPU-only pod that changes no fit): 50.
  EXPECT_EQ(scoreOf(*cpuOnly, pod("e", 1000, 0, 0)), 50);
  // Just below 0: one whole-GPU shape of weight 0.001; 500 milli on the only GPU makes it
  // unfit: F 0 -> 0.001 x 500, delta -0.5 -> 49.
  auto tiny = fgdFor({shape(1000, 1, 1000, 0.001)});
  EXPECT_EQ(scoreOf(*tiny, pod("f", 1000, 1, 500)), 49);
}

TEST_F(ArtifactPolicyTest, FgdScoresZeroFromAboutMinusFourPointSixGpus) {
  // 8 free GPUs and exactly 1000 milli CPU; the workload's one-GPU shape needs 1000 CPU. A
  // CPU-only pod of 1 milli leaves it without CPU: F 0 -> 8000 w, delta -8000 w.
  addNode("n", 1000, 8);
  auto scoreWith = [&](double w) {
    auto fgd =
        plugin("ArtifactFgd", taskShapesToArgs(std::vector<TaskShape>{shape(1000, 1, 1000, w)}));
    const auto r = pod("c", 1, 0, 0);
    return scores(*fgd, r, optionsFor(r)).at(0);
  };
  EXPECT_EQ(scoreWith(0.5625), 1);  // delta -4500: 100 sigma(-4.5) = 1.1
  EXPECT_EQ(scoreWith(0.5875), 0);  // delta -4700: 0.9
  EXPECT_EQ(scoreWith(1.0), 0);     // delta -8000
}

TEST_F(ArtifactPolicyTest, FgdGivesWholeGpuPodsOneScorePerNodeAndTheLowestIndex) {
  // Workload: a 500-milli sharing shape. A whole-GPU pod on {500, 1000, 1000} takes a full
  // GPU: F stays 0 (all left fit) -> 50 on every option; the index tie-break takes GPU 1.
  const NodeId n = addNode("n", 64'000, 3);
  book(n, 0, 500, {0});
  const PluginArgs args = taskShapesToArgs(std::vector<TaskShape>{shape(1000, 1, 500, 1)});
  auto fgd = plugin("ArtifactFgd", args);
  const auto r = pod("w", 1000, 1, 1000);
  EXPECT_EQ(scores(*fgd, r, optionsFor(r)), (std::vector<std::int64_t>{50, 50}));
  Decision d = engine("ArtifactFgd", args, GpuTieBreak::kIndex)->decide(state_, r);
  EXPECT_EQ(where(d), "n/1");
  d = engine("ArtifactFgd", args, GpuTieBreak::kIndex)->decide(state_, pod("w2", 1000, 2, 1000));
  EXPECT_EQ(where(d), "n/1/2");
}

TEST_F(ArtifactPolicyTest, RandomIsUniformOverNodesThenOverFittingGpus) {
  // Three nodes: a sharing pod fits 1, 2 and 4 GPUs on them. Over many draws each node
  // wins about a third of the time and, on the 4-GPU node, each GPU a quarter of that.
  addNode("a", 64'000, 1);
  addNode("b", 64'000, 2);
  addNode("c", 64'000, 4);
  auto e = engine("ArtifactRandom", PluginArgs{{"seed", 7}}, GpuTieBreak::kBestFit);
  std::map<std::string, int> wins;
  constexpr int kDraws = 6000;
  for (int i = 0; i < kDraws; ++i) ++wins[where(e->decide(state_, pod("s", 1000, 1, 500)))];
  int onC = 0;
  for (const auto& [w, n] : wins) {
    if (w.rfind("c/", 0) == 0) onC += n;
  }
  EXPECT_NEAR(wins["a/0"], kDraws / 3, 150);
  EXPECT_NEAR(wins["b/0"] + wins["b/1"], kDraws / 3, 150);
  EXPECT_NEAR(onC, kDraws / 3, 150);
  for (const char* g : {"c/0", "c/1", "c/2", "c/3"}) EXPECT_NEAR(wins[g], kDraws / 12, 100) << g;
  // Whole-GPU pods get the lowest-index free GPUs of the drawn node.
  for (int i = 0; i < 50; ++i) {
    const std::string w = where(e->decide(state_, pod("w", 1000, 1, 1000)));
    EXPECT_TRUE(w == "a/0" || w == "b/0" || w == "c/0") << w;
  }
  // The same seed draws the same sequence.
  auto e1 = engine("ArtifactRandom", PluginArgs{{"seed", 11}}, GpuTieBreak::kBestFit);
  auto e2 = engine("ArtifactRandom", PluginArgs{{"seed", 11}}, GpuTieBreak::kBestFit);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(where(e1->decide(state_, pod("s", 1000, 1, 500))),
              where(e2->decide(state_, pod("s", 1000, 1, 500))));
  }
}

// ---- memoised plugins against fresh ones and a direct computation -------------------------

// FGD computed from scratch for one option: the node now and after the placement.
std::int64_t directFgd(const ClusterState& state, const Option& o, const Needs& needs,
                       std::span<const TaskShape> workload) {
  const NodeRecord& node = state.node(o.node);
  std::vector<std::int32_t> free;
  for (GpuId g : node.gpuIds) free.push_back(state.gpu(g).freeComputeMilli());
  const int type = node.gpuIds.empty() ? -1 : state.gpu(node.gpuIds.front()).typeIndex;
  const double before = fgdNodeFragmentMilli(node.freeCpuMilli(), free, type, workload);
  std::vector<std::int32_t> after = free;
  if (needs.gpuCount == 1 && needs.computeMilli < kArtifactMilliPerGpu) {
    after[static_cast<std::size_t>(state.gpu(o.gpus[0]).indexInNode)] -= needs.computeMilli;
  } else {
    for (int i = 0; i < o.gpuCount; ++i) {
      after[static_cast<std::size_t>(state.gpu(o.gpus[static_cast<std::size_t>(i)]).indexInNode)] -=
          needs.computeMilli;
    }
  }
  const double afterMilli =
      fgdNodeFragmentMilli(node.freeCpuMilli() - needs.cpuMilli, after, type, workload);
  return expectedFgd(before - afterMilli);
}

TEST_F(ArtifactPolicyTest, MemoisedScoresEqualFreshAndDirectOnesOverRandomPlacements) {
  std::mt19937_64 rng(testSeed());
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::string> types = {"T4", "A10", "L4"};
  const std::vector<int> gpuCounts = {1, 2, 4, 8};
  for (int i = 0; i < 24; ++i) {
    addNode("n" + std::to_string(i), uniform(8, 96) * 1000, gpuCounts[uniform(0, 3)],
            types[static_cast<std::size_t>(uniform(0, 2))], uniform(0, 1000));
  }
  addNode("big", 128'000, 20, "T4", 1001);  // more GPUs than FGD memoises per node
  // A workload like the trace's: CPU-only, sharing, whole and multi-GPU shapes, some typed.
  std::vector<TaskShape> workload = {shape(3152, 1, 810, 0.2),
                                     shape(11300, 1, 1000, 0.15),
                                     shape(12500, 0, 0, 0.1),
                                     shape(11908, 1, 470, 0.1, {"T4"}),
                                     shape(4000, 1, 250, 0.1),
                                     shape(24000, 2, 1000, 0.05),
                                     shape(32000, 8, 1000, 0.05, {"A10", "L4"}),
                                     shape(6000, 1, 500, 0.25)};
  ASSERT_TRUE(resolveTaskShapes(catalog_, workload));
  const PluginArgs fgdArgs = taskShapesToArgs(workload);
  const std::vector<std::string> names = {"ArtifactDotProd", "ArtifactGpuClustering",
                                          "ArtifactGpuPacking", "ArtifactBestFit", "ArtifactFgd"};
  std::vector<std::unique_ptr<ScorePlugin>> warm;
  for (const auto& n : names)
    warm.push_back(plugin(n, n == "ArtifactFgd" ? fgdArgs : PluginArgs::object()));
  auto placer = engine("ArtifactFgd", fgdArgs, GpuTieBreak::kIndex);

  int placed = 0;
  for (int step = 0; step < 400; ++step) {
    // Pods drawn partly from the workload's shapes (memo hits), partly fresh shapes.
    model::PlacementRequest r;
    if (uniform(0, 2) > 0) {
      const TaskShape& s = workload[static_cast<std::size_t>(uniform(0, 7))];
      r = pod("p" + std::to_string(step), s.cpuMilli, s.gpus, s.gpuMilli, s.gpuTypes);
    } else {
      const int k = std::vector<int>{0, 1, 1, 1, 2, 4}[static_cast<std::size_t>(uniform(0, 5))];
      const std::int32_t g = k == 0 ? 0 : (k > 1 || uniform(0, 1) == 0) ? 1000 : uniform(1, 999);
      r = pod("p" + std::to_string(step), uniform(0, 16) * 500, k, g);
    }
    const auto options = optionsFor(r);
    const Needs needs = deriveNeeds(r, state_.options());
    for (std::size_t p = 0; p < names.size(); ++p) {
      auto fresh = plugin(names[p], names[p] == "ArtifactFgd" ? fgdArgs : PluginArgs::object());
      const auto got = scores(*warm[p], r, options);
      ASSERT_EQ(got, scores(*fresh, r, options)) << names[p] << " step " << step;
      if (names[p] != "ArtifactFgd") continue;
      for (std::size_t i = 0; i < options.size(); ++i) {
        ASSERT_EQ(got[i], directFgd(state_, options[i], needs, workload))
            << "step " << step << " option " << i;
      }
    }
    if (placer->place(state_, r).placement) ++placed;
  }
  EXPECT_GT(placed, 50);
  ASSERT_TRUE(state_.checkInvariants());
}

}  // namespace
}  // namespace tessera::sched
