#include "sched/engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/gpu_catalog.h"
#include "sched/plugin_test_support.h"

namespace tessera::sched {
namespace {

using testing::kGib;

model::NodeSpec makeNode(const std::string& name, const std::string& type, int gpus,
                         int nvlinkGroups = 1, int numaNodes = 1) {
  model::NodeSpec n;
  n.name = name;
  n.cpuMilli = 96'000;
  n.hostMemoryMib = 1024 * kGib;
  for (int i = 0; i < gpus; ++i) {
    model::GpuSpec g;
    g.id = std::to_string(i);
    g.type = type;
    // Only form factors with NVLink have groups (an L4's would be refused).
    const model::GpuType* t = model::GpuCatalog::builtin().find(type);
    g.nvlinkGroup = t != nullptr && t->nvlinkGBps ? i / (gpus / nvlinkGroups) : -1;
    g.numaNode = i / (gpus / numaNodes);
    n.gpus.push_back(g);
  }
  return n;
}

model::PlacementRequest request(const std::string& id, std::int64_t weightsGib, int gpus = 1,
                                int priority = 0) {
  model::PlacementRequest r;
  r.replicaId = id;
  r.model.name = "m" + std::to_string(weightsGib) + "x" + std::to_string(gpus);
  r.model.weightsMib = weightsGib * kGib;
  r.model.computeMilli = 200;
  r.model.gpusPerReplica = gpus;
  r.model.priority = priority;
  r.deployment = r.model.name;
  return r;
}

class EngineTest : public ::testing::Test {
 protected:
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  ClusterState state_{catalog_, clock_};
  PluginRegistry registry_;
  std::unique_ptr<PlacementEngine> engine_;

  void SetUp() override {
    registerBuiltinPlugins(registry_);
    useProfile(defaultProfile());
  }
  void useProfile(const Profile& profile) {
    auto plugins = buildPlugins(profile, registry_);
    ASSERT_TRUE(plugins) << plugins.error().message;
    engine_ = std::make_unique<PlacementEngine>(std::move(*plugins), profile.options);
  }
  void add(const model::NodeSpec& n) { ASSERT_TRUE(state_.apply(NodeAdded{n})); }
  std::string where(const Placement& p) const {
    std::string s = state_.node(p.node).spec.name + ":";
    for (const auto& a : p.gpus) s += state_.gpu(a.gpu).spec.id + ",";
    return s;
  }
};

TEST_F(EngineTest, AppliesTheSafetyFactorToMemory) {
  add(makeNode("n", "L4", 1));  // 24 GiB
  // 20 GiB x 1.2 = 24 GiB fits exactly; 21 GiB does not.
  Decision fits = engine_->decide(state_, request("a", 20));
  ASSERT_TRUE(fits.placement) << fits.summary;
  EXPECT_EQ(fits.placement->gpus[0].reservedMib, 24 * kGib);
  EXPECT_EQ(fits.placement->gpus[0].estimateMib, 20 * kGib);
  Decision tooBig = engine_->decide(state_, request("b", 21));
  ASSERT_FALSE(tooBig.placement);
  EXPECT_NE(tooBig.summary.find("MemoryFit"), std::string::npos) << tooBig.summary;
  ASSERT_FALSE(tooBig.rejections.empty());
  EXPECT_EQ(tooBig.rejections[0].plugin, "MemoryFit");
  EXPECT_EQ(tooBig.rejections[0].node, "n");
  EXPECT_EQ(tooBig.rejections[0].gpu, "0");
}

TEST_F(EngineTest, PacksSmallReplicasOntoTheFullestGpuThatFits) {
  add(makeNode("n", "A100-80GB", 4));
  ASSERT_TRUE(engine_->place(state_, request("a", 30)).placement);
  Decision b = engine_->place(state_, request("b", 20));
  ASSERT_TRUE(b.placement);
  // Same GPU as `a`: best fit and fragmentation both prefer stacking.
  EXPECT_EQ(b.placement->gpus[0].gpu, state_.replica(*state_.findReplica("a")).placement.gpus[0].gpu);
  EXPECT_TRUE(state_.checkInvariants());
}

// Replicas of one deployment spread over GPUs and nodes (a failure takes fewest of them, and
// they do not queue on one card while others idle); different deployments still pack.
TEST_F(EngineTest, ReplicasOfOneDeploymentSpreadOverGpusAndNodes) {
  add(makeNode("n1", "A100-80GB", 4));
  add(makeNode("n2", "A100-80GB", 4));
  std::vector<std::string> where;
  for (int i = 0; i < 4; ++i) {
    model::PlacementRequest r = request("chat-" + std::to_string(i), 16);
    r.deployment = "chat";
    const Decision d = engine_->place(state_, r);
    ASSERT_TRUE(d.placement) << d.summary;
    where.push_back(this->where(*d.placement));
  }
  std::sort(where.begin(), where.end());
  EXPECT_EQ(std::unique(where.begin(), where.end()), where.end())
      << "two replicas share a GPU: " << ::testing::PrintToString(where);
  int onN1 = 0;
  for (const std::string& w : where) onN1 += w.starts_with("n1:") ? 1 : 0;
  EXPECT_EQ(onN1, 2) << "replicas not spread over the nodes";
  // Another deployment of the same model still takes the weights already on a GPU.
  model::PlacementRequest canary = request("canary-0", 16);
  canary.deployment = "canary";
  const Decision c = engine_->place(state_, canary);
  ASSERT_TRUE(c.placement) << c.summary;
  EXPECT_NE(std::find(where.begin(), where.end(), this->where(*c.placement)), where.end())
      << this->where(*c.placement);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(EngineTest, TensorParallelReplicaStaysInsideOneNvlinkGroup) {
  add(makeNode("n", "H100-80GB", 8, /*nvlinkGroups=*/2));
  // Fill GPUs 0-2 so group 0 has one free GPU left.
  for (int i = 0; i < 3; ++i) {
    auto r = request("fill" + std::to_string(i), 60);
    r.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kExclusive);
    ASSERT_TRUE(engine_->place(state_, r).placement);
  }
  auto big = request("tp", 200, 4);
  big.model.nvlinkRequired = true;
  Decision d = engine_->place(state_, big);
  ASSERT_TRUE(d.placement) << d.summary;
  ASSERT_EQ(d.placement->gpus.size(), 4u);
  for (const auto& a : d.placement->gpus) EXPECT_EQ(state_.gpu(a.gpu).spec.nvlinkGroup, 1);
  // A second one cannot find 4 NVLink peers any more.
  auto again = big;
  again.replicaId = "tp2";
  Decision no = engine_->decide(state_, again);
  ASSERT_FALSE(no.placement);
  EXPECT_NE(no.summary.find("GpuTopology"), std::string::npos) << no.summary;
}

TEST_F(EngineTest, MigOnlyModelGetsASliceOnAMigCard) {
  auto n = makeNode("m", "A100-80GB", 2);
  n.gpus[1].migEnabled = true;
  add(n);
  auto r = request("s", 8);
  r.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kMig);
  Decision d = engine_->place(state_, r);
  ASSERT_TRUE(d.placement) << d.summary;
  EXPECT_EQ(d.placement->mode, model::SharingMode::kMig);
  EXPECT_EQ(state_.gpu(d.placement->gpus[0].gpu).spec.id, "1");
  const auto& type = catalog_.at(state_.gpu(d.placement->gpus[0].gpu).typeIndex);
  // 8 GiB x 1.2 = 9.6 GiB: the smallest profile that holds it is a 10 GiB slice.
  EXPECT_EQ(type.migProfiles[static_cast<std::size_t>(d.placement->gpus[0].migProfile)].memoryMib,
            10 * kGib);
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(EngineTest, CpuOnlyRequestNeedsNoGpu) {
  add(makeNode("n", "T4", 1));
  auto r = request("cpu", 0, 0);
  r.model.cpuMilli = 4'000;
  Decision d = engine_->place(state_, r);
  ASSERT_TRUE(d.placement) << d.summary;
  EXPECT_TRUE(d.placement->gpus.empty());
  EXPECT_EQ(state_.node(0).bookedCpuMilli, 4'000);
}

TEST_F(EngineTest, ExplainsEveryRejectedNodeAndGpu) {
  auto tainted = makeNode("tainted", "A100-80GB", 2);
  tainted.taints.push_back({"dedicated", "training", "NoSchedule"});
  add(tainted);
  add(makeNode("small", "T4", 2));
  add(makeNode("ok", "A100-80GB", 2));
  DecideOptions opts;
  opts.explain = true;
  Decision d = engine_->decide(state_, request("r", 30), opts);
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(state_.node(d.placement->node).spec.name, "ok");
  auto has = [&](const std::string& node, const std::string& gpu, const std::string& plugin) {
    return std::any_of(d.rejections.begin(), d.rejections.end(), [&](const Rejection& r) {
      return r.node == node && r.gpu == gpu && r.plugin == plugin && !r.reason.empty();
    });
  };
  EXPECT_TRUE(has("tainted", "", "TaintToleration"));
  EXPECT_TRUE(has("small", "0", "MemoryFit"));
  EXPECT_TRUE(has("small", "1", "MemoryFit"));
  ASSERT_FALSE(d.breakdown.empty());
  std::int64_t sum = 0;
  for (const auto& t : d.breakdown) {
    EXPECT_GE(t.score, 0);
    EXPECT_LE(t.score, 100);
    sum += t.weight * t.score;
  }
  EXPECT_EQ(sum, d.totalScore);
}

TEST_F(EngineTest, InvalidRequestIsRefusedWithTheField) {
  add(makeNode("n", "T4", 1));
  auto r = request("bad", 1);
  r.model.gpusPerReplica = 99;
  Decision d = engine_->decide(state_, r);
  EXPECT_FALSE(d.placement);
  EXPECT_NE(d.summary.find("gpusPerReplica"), std::string::npos);
}

TEST_F(EngineTest, ScoreNodesReturnsEveryFeasibleNode) {
  for (int i = 0; i < 5; ++i) add(makeNode("n" + std::to_string(i), "A100-80GB", 2));
  add(makeNode("tiny", "T4", 2));
  auto scores = engine_->scoreNodes(state_, request("r", 30));
  ASSERT_EQ(scores.size(), 5u);
  for (const auto& s : scores) EXPECT_NE(state_.node(s.node).spec.name, "tiny");
}

TEST_F(EngineTest, BatchPlacesLargestFirstAndExplainsTheRest) {
  add(makeNode("n", "A100-80GB", 2));
  std::vector<model::PlacementRequest> reqs;
  // In arrival order, the small ones would split both GPUs and leave no room for the 60s.
  for (int i = 0; i < 4; ++i) reqs.push_back(request("small" + std::to_string(i), 5));
  reqs.push_back(request("big0", 60));
  reqs.push_back(request("big1", 60));
  reqs.push_back(request("huge", 100));
  BatchPlan plan = planBatch(*engine_, state_, reqs, /*commit=*/false);
  EXPECT_EQ(state_.liveReplicaCount(), 0);  // no commit: untouched
  ASSERT_EQ(plan.assignments.size(), 4u);
  EXPECT_EQ(plan.assignments[0].replicaId, "big0");
  EXPECT_EQ(plan.assignments[1].replicaId, "big1");
  ASSERT_EQ(plan.unplaceable.size(), 3u);
  EXPECT_EQ(plan.unplaceable[0].replicaId, "huge");
  EXPECT_NE(plan.unplaceable[0].reason.find("MemoryFit"), std::string::npos);
  BatchPlan committed = planBatch(*engine_, state_, reqs, /*commit=*/true);
  EXPECT_EQ(state_.liveReplicaCount(), static_cast<int>(committed.assignments.size()));
  EXPECT_TRUE(state_.checkInvariants());
}

TEST_F(EngineTest, EvictionTakesLowestPriorityLeastRecentlyUsedFirst) {
  add(makeNode("n", "A100-80GB", 1));
  ASSERT_TRUE(engine_->place(state_, request("old", 20, 1, 1)).placement);
  ASSERT_TRUE(engine_->place(state_, request("recent", 20, 1, 1)).placement);
  ASSERT_TRUE(engine_->place(state_, request("vip", 20, 1, 9)).placement);
  ASSERT_TRUE(state_.apply(ReplicaActivity{"old", 100}));
  ASSERT_TRUE(state_.apply(ReplicaActivity{"recent", 900}));
  // 8 GiB free; a 25 GiB (30 GiB reserved) priority-5 replica needs one 24 GiB victim gone.
  EvictionPlan plan = planEviction(*engine_, state_, request("new", 25, 1, 5));
  ASSERT_TRUE(plan.feasible) << plan.reason;
  EXPECT_EQ(plan.victims, std::vector<std::string>{"old"});
  EXPECT_EQ(plan.node, "n");
  ASSERT_TRUE(plan.placement);
  // Equal priority never evicts.
  EvictionPlan equal = planEviction(*engine_, state_, request("peer", 25, 1, 1));
  EXPECT_FALSE(equal.feasible);
}

TEST_F(EngineTest, NoEvictionHelpsSoItSaysWhatToBuy) {
  add(makeNode("n", "L4", 2));
  EvictionPlan plan = planEviction(*engine_, state_, request("big", 60));
  EXPECT_FALSE(plan.feasible);
  EXPECT_EQ(plan.gpusToAdd, 1);
  EXPECT_FALSE(plan.gpuTypeToAdd.empty());
  const auto* t = catalog_.find(plan.gpuTypeToAdd);
  ASSERT_NE(t, nullptr);
  EXPECT_GE(*t->memoryMib, 72 * kGib);
  EXPECT_NE(plan.reason.find("add a node with 1 x " + plan.gpuTypeToAdd), std::string::npos)
      << plan.reason;
  EXPECT_TRUE(plan.growNode.empty());
}

// Issue 14, bug 3: the GPUs are free but the host is short of CPU. The advice names the CPU
// and the node, not a GPU to buy.
TEST_F(EngineTest, ShortOfCpuIsToldToGrowTheHostNotToBuyAGpu) {
  auto n = makeNode("n", "L40S", 2);
  n.cpuMilli = 8'000;
  add(n);
  auto r = request("cpu-heavy", 10);
  r.model.cpuMilli = 32'000;
  const EvictionPlan plan = planEviction(*engine_, state_, r);
  ASSERT_FALSE(plan.feasible);
  EXPECT_EQ(plan.growNode, "n");
  EXPECT_EQ(plan.addCpuMilli, 24'000);
  EXPECT_EQ(plan.addHostMemoryMib, 0);
  EXPECT_EQ(plan.gpusToAdd, 0);
  EXPECT_NE(plan.reason.find("24 CPU on node n"), std::string::npos) << plan.reason;
  EXPECT_EQ(plan.reason.find("GPU of type"), std::string::npos) << plan.reason;
}

// Issue 14, bug 3: an NVLink-connected pair is never advised on a type without NVLink.
TEST_F(EngineTest, NvlinkAdviceNamesATypeThatHasNvlink) {
  auto n = makeNode("n", "L40S", 2);
  add(n);
  auto r = request("pair", 60, 2);
  r.model.nvlinkRequired = true;
  const EvictionPlan plan = planEviction(*engine_, state_, r);
  ASSERT_FALSE(plan.feasible);
  EXPECT_EQ(plan.gpusToAdd, 2);
  const model::GpuType* t = catalog_.find(plan.gpuTypeToAdd);
  ASSERT_NE(t, nullptr) << plan.reason;
  EXPECT_TRUE(t->nvlinkGBps.has_value()) << plan.gpuTypeToAdd;
  EXPECT_NE(plan.reason.find("NVLink-connected"), std::string::npos) << plan.reason;
}

// Issue 14, bug 3: a request that names only a type unable to hold it gets no false advice.
TEST_F(EngineTest, NoAdviceWhenNoNamedTypeCanHoldTheRequest) {
  add(makeNode("n", "L4", 1));
  auto r = request("too-big", 60);
  r.gpuTypes = {"L4"};
  const EvictionPlan plan = planEviction(*engine_, state_, r);
  ASSERT_FALSE(plan.feasible);
  EXPECT_EQ(plan.gpusToAdd, 0);
  EXPECT_TRUE(plan.gpuTypeToAdd.empty());
  EXPECT_NE(plan.reason.find("no added capacity"), std::string::npos) << plan.reason;
}

// Issue 14, bug 3: a misspelt GPU type is an invalid request with a suggestion, not a GPU
// type to buy.
TEST_F(EngineTest, AnUnknownGpuTypeIsRefusedWithASuggestion) {
  add(makeNode("n", "H100-80GB", 1));
  auto r = request("typo", 10);
  r.gpuTypes = {"H100-80G"};
  const Decision d = engine_->decide(state_, r);
  EXPECT_FALSE(d.placement);
  EXPECT_TRUE(d.requestRefused);
  EXPECT_NE(d.summary.find("unknown GPU type 'H100-80G' (did you mean 'H100-80GB'?)"),
            std::string::npos)
      << d.summary;
  r.gpuTypes = {"nvidia-h100-80gb-hbm3"};  // an alias, any case
  EXPECT_TRUE(engine_->decide(state_, r).placement);
}

// Issue 14, bug 3: with every filter removed from the profile the engine still never chooses
// what the books refuse, so a plan and its explanation give one answer.
TEST_F(EngineTest, WithoutFiltersTheBooksStillHaveTheLastWord) {
  Profile bare = defaultProfile();
  bare.filters.clear();
  useProfile(bare);
  add(makeNode("n", "A100-80GB", 2));
  ASSERT_TRUE(engine_->place(state_, request("small", 10)).placement);
  auto whole = request("whole", 10);
  whole.deployment = "other";  // ModelAffinity draws it to GPU 0, where its model sits
  whole.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kExclusive);
  DecideOptions explain;
  explain.explain = true;
  const Decision explained = engine_->decide(state_, whole, explain);
  ASSERT_TRUE(explained.placement) << explained.summary;
  const Decision placed = engine_->place(state_, whole);
  ASSERT_TRUE(placed.placement) << placed.summary;
  EXPECT_EQ(where(*explained.placement), where(*placed.placement));
  EXPECT_EQ(where(*placed.placement), "n:1,");  // GPU 0 is shared; exclusive goes elsewhere
  const bool recorded = std::any_of(explained.rejections.begin(), explained.rejections.end(),
                                    [](const Rejection& r) { return r.plugin == "ClusterState"; });
  EXPECT_TRUE(recorded);
  // Nothing left that the books accept: unplaceable, and the summary says who refused.
  ASSERT_TRUE(engine_->place(state_, request("third", 10)).placement);  // shares GPU 0
  auto again = request("fourth", 10);
  again.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kExclusive);
  const Decision refused = engine_->decide(state_, again);
  EXPECT_FALSE(refused.placement);
  EXPECT_NE(refused.summary.find("ClusterState rejected"), std::string::npos) << refused.summary;
  EXPECT_TRUE(state_.checkInvariants());
}

// Issue 14, bug 4: advice given after a plan never evicts what the plan itself placed.
TEST_F(EngineTest, EvictionAdviceKeepsWhatThePlanPlaced) {
  add(makeNode("n", "A100-80GB", 1));
  ASSERT_TRUE(engine_->place(state_, request("running", 30, 1, 1)).placement);
  ASSERT_TRUE(engine_->place(state_, request("planned", 30, 1, 1)).placement);
  const auto vip = request("vip", 30, 1, 9);
  const EvictionPlan any = planEviction(*engine_, state_, vip);
  ASSERT_TRUE(any.feasible) << any.reason;
  const std::vector<std::string> keep{"planned"};
  const EvictionPlan kept = planEviction(*engine_, state_, vip, keep);
  ASSERT_TRUE(kept.feasible) << kept.reason;
  EXPECT_EQ(kept.victims, std::vector<std::string>{"running"});
  const std::vector<std::string> both{"planned", "running"};
  EXPECT_FALSE(planEviction(*engine_, state_, vip, both).feasible);
}

TEST_F(EngineTest, TieBreakFollowsNodeRank) {
  auto a = makeNode("a", "A100-80GB", 1);
  a.rank = 5;
  auto b = makeNode("b", "A100-80GB", 1);
  b.rank = 1;
  add(a);
  add(b);
  Decision d = engine_->decide(state_, request("r", 10));
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(state_.node(d.placement->node).spec.name, "b");
}

}  // namespace
}  // namespace tessera::sched
