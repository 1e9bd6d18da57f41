// Unit tests of the built-in filter plugins on small hand-built cluster states.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sched/plugin_test_support.h"
#include "sched/plugins/gpu_filters.h"
#include "sched/plugins/node_filters.h"
#include "sched/plugins/topology_filters.h"

namespace tessera::sched {
namespace {

using testing::gpuSpec;
using testing::kGib;
using testing::makeRequest;
using testing::nodeSpec;

class FilterTest : public testing::PluginTest {
 protected:
  model::PlacementRequest request_ = makeRequest("r", 16 * kGib);

  // Checks pass and why together, so every test also exercises the contract.
  bool passNode(const FilterPlugin& f, NodeId node, std::string* why = nullptr) {
    const Needs needs = needsOf(request_);
    const DecisionContext ctx{state_, request_, needs};
    const bool ok = f.passNode(ctx, node);
    const std::string reason = f.whyNode(ctx, node);
    EXPECT_EQ(ok, reason.empty()) << reason;
    if (why) *why = reason;
    return ok;
  }
  bool passGpu(const FilterPlugin& f, GpuId g, std::string* why = nullptr) {
    const Needs needs = needsOf(request_);
    const DecisionContext ctx{state_, request_, needs};
    const bool ok = f.passGpu(ctx, g);
    const std::string reason = f.whyGpu(ctx, g);
    EXPECT_EQ(ok, reason.empty()) << reason;
    if (why) *why = reason;
    return ok;
  }
  bool passOption(const FilterPlugin& f, const Option& o, std::string* why = nullptr) {
    const Needs needs = needsOf(request_);
    const DecisionContext ctx{state_, request_, needs};
    const bool ok = f.passOption(ctx, o);
    const std::string reason = f.whyOption(ctx, o);
    EXPECT_EQ(ok, reason.empty()) << reason;
    if (why) *why = reason;
    return ok;
  }
};

// ---- NodeHealth ---------------------------------------------------------------------------

TEST_F(FilterTest, NodeHealthRejectsCordonedUnhealthyAndRemovedNodes) {
  NodeHealthFilter f;
  auto spec = nodeSpec("a", "L4", 2);
  const NodeId a = addNode(spec);
  EXPECT_TRUE(passNode(f, a));

  spec.cordoned = true;
  ASSERT_TRUE(state_.apply(NodeUpdated{spec}));
  std::string why;
  EXPECT_FALSE(passNode(f, a, &why));
  EXPECT_EQ(why, "node is cordoned");

  spec.cordoned = false;
  spec.healthy = false;
  ASSERT_TRUE(state_.apply(NodeUpdated{spec}));
  EXPECT_FALSE(passNode(f, a, &why));
  EXPECT_EQ(why, "node is unhealthy");

  ASSERT_TRUE(state_.apply(NodeRemoved{"a"}));
  EXPECT_FALSE(passNode(f, a, &why));
  EXPECT_NE(why.find("removed"), std::string::npos);
}

TEST_F(FilterTest, NodeHealthRejectsAnUnhealthyGpu) {
  NodeHealthFilter f;
  auto spec = nodeSpec("a", "L4", 2);
  addNode(spec);
  spec.gpus[1].healthy = false;
  ASSERT_TRUE(state_.apply(NodeUpdated{spec}));
  EXPECT_TRUE(passGpu(f, gpu("a", "0")));
  std::string why;
  EXPECT_FALSE(passGpu(f, gpu("a", "1"), &why));
  EXPECT_EQ(why, "GPU is unhealthy");
}

// ---- TaintToleration ----------------------------------------------------------------------

TEST_F(FilterTest, TaintTolerationNeedsEveryHardTaintTolerated) {
  TaintTolerationFilter f;
  auto spec = nodeSpec("a", "L4", 1);
  spec.taints = {{"dedicated", "train", "NoSchedule"},
                 {"maintenance", "", "NoExecute"},
                 {"spot", "yes", "PreferNoSchedule"}};
  const NodeId a = addNode(spec);

  std::string why;
  EXPECT_FALSE(passNode(f, a, &why));
  EXPECT_NE(why.find("taint dedicated=train:NoSchedule is not tolerated"), std::string::npos)
      << why;
  EXPECT_NE(why.find("taint maintenance:NoExecute"), std::string::npos) << why;
  EXPECT_EQ(why.find("spot"), std::string::npos) << "PreferNoSchedule never rejects: " << why;

  request_.tolerations = {{"dedicated", "Equal", "train", "NoSchedule"}};
  EXPECT_FALSE(passNode(f, a, &why));
  EXPECT_EQ(why.find("dedicated"), std::string::npos) << why;

  request_.tolerations.push_back({"maintenance", "Exists", "", ""});
  EXPECT_TRUE(passNode(f, a));

  request_.tolerations = {{"", "Exists", "", ""}};  // tolerate everything
  EXPECT_TRUE(passNode(f, a));
}

// ---- NodeSelector -------------------------------------------------------------------------

TEST_F(FilterTest, NodeSelectorNeedsEveryLabel) {
  NodeSelectorFilter f;
  auto spec = nodeSpec("a", "L4", 1);
  spec.labels = {{"zone", "eu-1"}, {"pool", "serving"}};
  const NodeId a = addNode(spec);
  EXPECT_TRUE(passNode(f, a));  // no selector

  request_.nodeSelector = {{"zone", "eu-1"}};
  EXPECT_TRUE(passNode(f, a));

  request_.nodeSelector = {{"zone", "us-2"}, {"tier", "gold"}};
  std::string why;
  EXPECT_FALSE(passNode(f, a, &why));
  EXPECT_NE(why.find("needs label zone=us-2, node has zone=eu-1"), std::string::npos) << why;
  EXPECT_NE(why.find("node has no label tier"), std::string::npos) << why;
}

// ---- NodeResources ------------------------------------------------------------------------

TEST_F(FilterTest, NodeResourcesCountsWhatReplicasBooked) {
  NodeResourcesFilter f;
  auto spec = nodeSpec("a", "L4", 2);
  spec.cpuMilli = 8000;
  spec.hostMemoryMib = 32 * kGib;
  const NodeId a = addNode(spec);
  Placement p;
  p.replicaId = "held";
  p.modelName = "x";
  p.deployment = "x";
  p.node = a;
  p.cpuMilli = 6000;
  p.hostMemoryMib = 30 * kGib;
  ASSERT_TRUE(state_.apply(replicaPlaced(state_, p, clock_.nowMs())));

  request_.model.cpuMilli = 2000;
  request_.model.hostMemoryMib = 2 * kGib;
  EXPECT_TRUE(passNode(f, a));

  request_.model.cpuMilli = 3000;
  request_.model.hostMemoryMib = 4 * kGib;
  std::string why;
  EXPECT_FALSE(passNode(f, a, &why));
  EXPECT_NE(why.find("needs 3000m CPU, 2000m free of 8000m"), std::string::npos) << why;
  EXPECT_NE(why.find("needs 4096 MiB host memory, 2048 MiB free of 32768 MiB"), std::string::npos)
      << why;
}

// ---- GpuType ------------------------------------------------------------------------------

TEST_F(FilterTest, GpuTypeMatchesNamesAndAliasesInAnyCase) {
  GpuTypeFilter f;
  addNode(nodeSpec("a", "A100-80GB", 1));
  addNode(nodeSpec("h", "H100-80GB", 1));
  const GpuId a = gpu("a", "0");
  const GpuId h = gpu("h", "0");

  EXPECT_TRUE(passGpu(f, a));  // no constraint
  request_.gpuTypes = {"nvidia a100-sxm4-80gb"};
  EXPECT_TRUE(passGpu(f, a));
  std::string why;
  EXPECT_FALSE(passGpu(f, h, &why));
  EXPECT_EQ(why, "GPU type H100-80GB is not among the requested nvidia a100-sxm4-80gb");

  // The same plugin instance must notice that the request changed.
  request_.gpuTypes = {"h100-80gb", "B200"};
  EXPECT_FALSE(passGpu(f, a, &why));
  EXPECT_NE(why.find("unknown to the catalogue: B200"), std::string::npos) << why;
  EXPECT_TRUE(passGpu(f, h));
}

// ---- MemoryFit ----------------------------------------------------------------------------

TEST_F(FilterTest, MemoryFitAppliesTheSafetyFactorAndSaysSo) {
  MemoryFitFilter f;
  auto spec = nodeSpec("a", "L4", 1);
  spec.gpus[0].memoryMib = 12000;
  addNode(spec);
  const GpuId g = gpu("a", "0");
  request_ = makeRequest("r", 16384);  // × 1.2 = 19661 MiB
  std::string why;
  EXPECT_FALSE(passGpu(f, g, &why));
  EXPECT_EQ(why, "needs 19661 MiB (16384 × 1.2), 12000 MiB free of 12000 MiB");

  request_ = makeRequest("r", 10000);  // 12000 MiB: fits exactly
  EXPECT_TRUE(passGpu(f, g));
}

TEST_F(FilterTest, MemoryFitCountsReplicasAndForeignUsage) {
  MemoryFitFilter f;
  addNode(nodeSpec("a", "L4", 1));  // 24 GiB
  const GpuId g = gpu("a", "0");
  place("x", {g}, 10 * kGib);
  GpuTelemetry t;
  t.node = "a";
  t.gpuId = "0";
  t.usedMib = 14 * kGib;  // 10 GiB of it is not attributed to x: foreign
  t.atMs = clock_.nowMs();
  ASSERT_TRUE(state_.apply(t));
  // Telemetry attributes nothing to x, so all 14 GiB used are foreign, and x's 10 GiB
  // reservation still stands: 24 - 10 - 14 = 0 GiB free.
  request_ = makeRequest("r", 1);
  std::string why;
  EXPECT_FALSE(passGpu(f, g, &why));
  EXPECT_NE(why.find("MiB used by processes outside Tessera"), std::string::npos) << why;
}

TEST_F(FilterTest, MemoryFitExclusiveOnlyNeedsAnEmptyGpu) {
  MemoryFitFilter f;
  addNode(nodeSpec("a", "A100-80GB", 2));
  place("x", {gpu("a", "0")}, 1 * kGib);
  request_.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kExclusive);
  std::string why;
  EXPECT_FALSE(passGpu(f, gpu("a", "0"), &why));
  EXPECT_EQ(why, "the request allows only exclusive use, GPU holds 1 replica(s)");
  EXPECT_TRUE(passGpu(f, gpu("a", "1")));
}

TEST_F(FilterTest, MemoryFitRejectsAGpuHeldExclusively) {
  MemoryFitFilter f;
  addNode(nodeSpec("a", "A100-80GB", 1));
  place("x", {gpu("a", "0")}, 1 * kGib, 0, model::SharingMode::kExclusive);
  request_ = makeRequest("r", 1);
  std::string why;
  EXPECT_FALSE(passGpu(f, gpu("a", "0"), &why));
  EXPECT_EQ(why, "GPU is held exclusively by another replica");
}

TEST_F(FilterTest, MemoryFitRejectsUnknownCapacityUnlessNothingIsNeeded) {
  MemoryFitFilter f;
  addNode(nodeSpec("g", "G2", 1));  // an undisclosed type: capacity unknown
  std::string why;
  EXPECT_FALSE(passGpu(f, gpu("g", "0"), &why));
  EXPECT_NE(why.find("capacity is unknown"), std::string::npos) << why;
  request_ = makeRequest("r", 0);
  EXPECT_TRUE(passGpu(f, gpu("g", "0")));
}

TEST_F(FilterTest, MemoryFitOnMigUsesTheLargestPlaceableInstance) {
  MemoryFitFilter f;
  auto spec = nodeSpec("m", "A100-40GB", 1);
  spec.gpus[0].migEnabled = true;
  spec.gpus[0].migInstances = {{"3g.20gb", 0}, {"3g.20gb", 4}};
  addNode(spec);
  const GpuId g = gpu("m", "0");
  request_ = makeRequest("r", 16 * kGib);  // 19661 MiB <= 20480
  EXPECT_TRUE(passGpu(f, g));
  request_ = makeRequest("r", 17 * kGib);  // 20890 MiB
  std::string why;
  EXPECT_FALSE(passGpu(f, g, &why));
  EXPECT_EQ(why,
            "needs 20890 MiB (17408 × 1.2), the largest free or creatable MIG instance "
            "has 20480 MiB");
}

// ---- ComputeCap ---------------------------------------------------------------------------

TEST_F(FilterTest, ComputeCapHardAndSoft) {
  addNode(nodeSpec("a", "A100-80GB", 1));
  const GpuId g = gpu("a", "0");
  place("x", {g}, kGib, 600);
  request_.model.computeMilli = 300;  // 900 booked after

  auto hard = ComputeCapFilter::create(nlohmann::json{{"mode", "hard"}});
  ASSERT_TRUE(hard);
  std::string why;
  EXPECT_FALSE(passGpu(**hard, g, &why));
  EXPECT_EQ(why, "needs 300 compute milli, 600 of 1000 booked; cap 0.8 allows 800");

  auto soft = ComputeCapFilter::create(nlohmann::json::object());
  ASSERT_TRUE(soft);
  EXPECT_TRUE(passGpu(**soft, g));
  request_.model.computeMilli = 401;
  EXPECT_FALSE(passGpu(**soft, g, &why));
  EXPECT_EQ(why, "needs 401 compute milli, 600 of 1000 booked");

  auto capped = ComputeCapFilter::create(nlohmann::json{{"mode", "hard"}, {"cap", 1.0}});
  ASSERT_TRUE(capped);
  request_.model.computeMilli = 400;
  EXPECT_TRUE(passGpu(**capped, g));
}

TEST_F(FilterTest, ComputeCapRejectsBadArguments) {
  EXPECT_FALSE(ComputeCapFilter::create(nlohmann::json{{"cap", 1.5}}));
  EXPECT_FALSE(ComputeCapFilter::create(nlohmann::json{{"cap", "high"}}));
  EXPECT_FALSE(ComputeCapFilter::create(nlohmann::json{{"mode", "strict"}}));
  auto typo = ComputeCapFilter::create(nlohmann::json{{"capp", 0.5}});
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error().message, "ComputeCap: unknown argument 'capp' (known: cap, mode)");
}

// ---- Bandwidth ----------------------------------------------------------------------------

TEST_F(FilterTest, BandwidthChecksBookedPlusNeed) {
  BandwidthFilter f;
  addNode(nodeSpec("a", "L4", 1));  // 300 GB/s
  const GpuId g = gpu("a", "0");
  place("x", {g}, kGib, 0, model::SharingMode::kShared, "other", "", 200);
  request_.model.memoryBandwidthGBps = 100;
  EXPECT_TRUE(passGpu(f, g));
  request_.model.memoryBandwidthGBps = 100.5;
  std::string why;
  EXPECT_FALSE(passGpu(f, g, &why));
  EXPECT_EQ(why, "needs 100.5 GB/s memory bandwidth, 200 of 300 GB/s booked");
  request_.model.memoryBandwidthGBps = 0;  // unknown need: never rejected
  EXPECT_TRUE(passGpu(f, g));
}

// ---- MigSlice -----------------------------------------------------------------------------

TEST_F(FilterTest, MigSliceMatchesSharingModesToTheGpu) {
  MigSliceFilter f;
  auto spec = nodeSpec("m", "A100-80GB", 2);
  spec.gpus[1].migEnabled = true;
  addNode(spec);
  const GpuId plain = gpu("m", "0");
  const GpuId mig = gpu("m", "1");
  request_ = makeRequest("r", 8 * kGib);

  EXPECT_TRUE(passGpu(f, plain));
  EXPECT_TRUE(passGpu(f, mig));

  request_.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kMig);
  std::string why;
  EXPECT_FALSE(passGpu(f, plain, &why));
  EXPECT_EQ(why, "GPU is not in MIG mode; the request allows only MIG slices");

  request_.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kShared);
  EXPECT_FALSE(passGpu(f, mig, &why));
  EXPECT_EQ(why, "GPU is in MIG mode; the request does not allow MIG slices");
}

TEST_F(FilterTest, MigSliceExplainsWhatTheCardStillOffers) {
  MigSliceFilter f;
  auto spec = nodeSpec("m", "A100-40GB", 1);
  spec.gpus[0].migEnabled = true;
  addNode(spec);
  const GpuId g = gpu("m", "0");
  request_ = makeRequest("r", 30 * kGib);  // 36864 MiB: only 7g.40gb
  EXPECT_TRUE(passGpu(f, g));
  placeMig("big", g, request_);
  std::string why;
  EXPECT_FALSE(passGpu(f, g, &why));
  EXPECT_EQ(why,
            "no free or creatable MIG instance with at least 36864 MiB on A100-40GB (largest "
            "free instance 0 MiB, largest creatable 0 MiB)");

  request_ = makeRequest("r", 4 * kGib);
  request_.model.migProfile = "3g.20gb";
  EXPECT_FALSE(passGpu(f, g, &why));
  EXPECT_NE(why.find("and at least profile 3g.20gb"), std::string::npos) << why;
}

// ---- TimeSlicing --------------------------------------------------------------------------

TEST_F(FilterTest, TimeSlicingCapsReplicasPerGpu) {
  TimeSlicingFilter f;
  auto spec = nodeSpec("a", "A100-80GB", 2);
  spec.gpus[0].timeSlicingReplicas = 2;
  addNode(spec);
  const GpuId g = gpu("a", "0");
  place("x", {g}, kGib);
  EXPECT_TRUE(passGpu(f, g));
  place("y", {g}, kGib);
  std::string why;
  EXPECT_FALSE(passGpu(f, g, &why));
  EXPECT_EQ(why, "time-slicing limit reached: 2 of 2 replicas");
  place("z", {gpu("a", "1")}, kGib);
  place("w", {gpu("a", "1")}, kGib);
  place("v", {gpu("a", "1")}, kGib);
  EXPECT_TRUE(passGpu(f, gpu("a", "1"))) << "no limit configured";
}

// ---- GpuTopology and NumaAlignment --------------------------------------------------------

TEST_F(FilterTest, GpuTopologyNeedsOneNvlinkGroupOnlyWhenAsked) {
  GpuTopologyFilter f;
  auto spec = nodeSpec("a", "H100-80GB", 5);
  spec.gpus[0].nvlinkGroup = 0;
  spec.gpus[1].nvlinkGroup = 0;
  spec.gpus[2].nvlinkGroup = 1;
  const NodeId a = addNode(spec);  // GPUs 3 and 4: unknown group
  const Option same = option(a, {gpu("a", "0"), gpu("a", "1")});
  const Option split = option(a, {gpu("a", "1"), gpu("a", "2"), gpu("a", "3")});
  request_ = makeRequest("r", 100 * kGib, 2);

  EXPECT_TRUE(passOption(f, split)) << "nvlinkRequired is off";
  request_.model.nvlinkRequired = true;
  EXPECT_TRUE(passOption(f, same));
  std::string why;
  EXPECT_FALSE(passOption(f, split, &why));
  EXPECT_EQ(why,
            "needs 3 GPUs in one NVLink group; NVLink groups: a/1 in 0, a/2 in 1, a/3 unknown");
  EXPECT_TRUE(passOption(f, option(a, {gpu("a", "3")}))) << "a single GPU needs no link";

  const Option unknown = option(a, {gpu("a", "3"), gpu("a", "4")});
  EXPECT_FALSE(passOption(f, unknown)) << "an unknown group is never a shared one";
}

TEST_F(FilterTest, NumaAlignmentNeedsOneKnownNumaNodeOnlyWhenAsked) {
  NumaAlignmentFilter f;
  auto spec = nodeSpec("a", "A100-80GB", 3);
  spec.gpus[0].numaNode = 0;
  spec.gpus[1].numaNode = 0;
  spec.gpus[2].numaNode = 1;
  const NodeId a = addNode(spec);
  auto unknownSpec = nodeSpec("u", "A100-80GB", 1);
  const NodeId u = addNode(unknownSpec);

  EXPECT_TRUE(passOption(f, option(u, {gpu("u", "0")}))) << "numaAligned is off";
  request_.model.numaAligned = true;
  EXPECT_TRUE(passOption(f, option(a, {gpu("a", "0"), gpu("a", "1")})));
  std::string why;
  EXPECT_FALSE(passOption(f, option(a, {gpu("a", "1"), gpu("a", "2")}), &why));
  EXPECT_EQ(why, "needs all GPUs on one NUMA node; NUMA nodes: a/1 in 0, a/2 in 1");
  EXPECT_FALSE(passOption(f, option(u, {gpu("u", "0")}), &why));
  EXPECT_EQ(why, "needs all GPUs on one NUMA node; NUMA nodes: u/0 unknown");
  EXPECT_TRUE(passOption(f, option(a, {}))) << "a CPU-only option has nothing to align";
}

// ---- argument handling shared by every plugin ---------------------------------------------

TEST_F(FilterTest, ArglessFiltersRejectArgumentsButAcceptNullAndEmpty) {
  EXPECT_TRUE(MemoryFitFilter::create(nlohmann::json()));
  EXPECT_TRUE(MemoryFitFilter::create(nlohmann::json::object()));
  auto bad = MemoryFitFilter::create(nlohmann::json{{"safety", 2}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "MemoryFit: unknown argument 'safety' (it takes none)");
  EXPECT_FALSE(MemoryFitFilter::create(nlohmann::json::array()));
}

}  // namespace
}  // namespace tessera::sched
