// Tessera's policy (the `tessera` profile, sched/plugins/packing_gradient.h) against FGD on
// the FGD paper's main experiment: the default trace, seed 42, the artifact's arrival order
// and node ranks. Tessera must leave fewer GPUs unallocated at 100 % arrived than FGD, at
// most 3.8 %, and stay near the LP bound (docs/tessera-policy.md has the numbers over seeds
// 42-51 and every trace). Two full runs: seconds in Release.

#include <gtest/gtest.h>

#include "sim/experiment.h"
#include "sim/test_support.h"

namespace tessera::sim {
namespace {

TEST(TesseraPolicy, LeavesFewerGpusUnallocatedThanFgdOnTheDefaultTrace) {
  TESSERA_SKIP_WITHOUT_SHARED_DATA();
  const auto catalog = model::GpuCatalog::builtin();
  auto nodes = readNodeList(testing::traceDir() + "/openb_node_list_gpu_node.csv", catalog);
  ASSERT_TRUE(nodes) << nodes.error().message;
  auto pods = readPodList(testing::traceDir() + "/openb_pod_list_default.csv", catalog);
  ASSERT_TRUE(pods) << pods.error().message;
  std::vector<FgdTrace> traces;
  {
    auto trace = makeFgdTrace("default", std::move(*nodes), std::move(*pods), catalog);
    ASSERT_TRUE(trace) << trace.error().message;
    // Tessera's expected workload is every shape of the pod list, FGD's the typical 95 %.
    EXPECT_EQ(trace->workload.shapes.size(),
              static_cast<std::size_t>(trace->typical.distinctShapes));
    EXPECT_LT(trace->typical.shapes.size(), trace->workload.shapes.size());
    traces.push_back(std::move(*trace));
  }
  ExperimentOptions options;
  options.policies = {"fgd", "tessera"};
  options.seeds = {42};
  options.referenceDir = testing::referenceDir();
  options.jobs = 2;
  options.bound = true;
  auto results = runExperiments(traces, catalog, options);
  ASSERT_TRUE(results) << results.error().message;
  ASSERT_EQ(results->size(), 1u);
  const TraceResult& r = results->front();
  EXPECT_TRUE(r.replayed);
  ASSERT_EQ(r.policies.size(), 2u);
  ASSERT_EQ(r.policies[0].policy, "fgd");
  ASSERT_EQ(r.policies[1].policy, "tessera");
  const double fgd = r.policies[0].unallocatedAt100.mean;
  const double tessera = r.policies[1].unallocatedAt100.mean;
  EXPECT_NEAR(fgd, 4.86, 0.05);  // the artifact's seed-42 run (replay_test checks it exactly)
  EXPECT_LT(tessera, fgd) << "tessera " << tessera << " %, fgd " << fgd << " %";
  // docs/tessera-policy.md: 3.80 +- 0.03 over seeds 42-51 (goal: at most 3.8); close to the
  // LP lower bound for the sharing pods it placed, which no placement can beat.
  EXPECT_LE(tessera, 3.8) << "tessera " << tessera << " %";
  const double bound = r.policies[1].boundAt100.mean;
  EXPECT_GE(tessera + 0.01, bound);
  EXPECT_LT(tessera - bound, 0.15) << "tessera " << tessera << " %, its LP bound " << bound;
  // Every sharing pod of this order placed could not leave less than 3.8 % (3.82 on seed 42).
  EXPECT_GT(r.placeAllBoundAt100.mean, 3.8);
}

}  // namespace
}  // namespace tessera::sim
