// Exact replay of the FGD artifact: the default trace, seed 42, the artifact's arrival order
// and node ranks, FGD and BestFit through the real placement engine. The bucketed allocation
// and fragment curves must equal the artifact's cached results to 0.01 pp in every bucket
// (the cached values are rounded to 2 decimals). Two full runs: seconds in Release.

#include <cmath>

#include <gtest/gtest.h>

#include "sim/experiment.h"
#include "sim/reference.h"
#include "sim/test_support.h"

namespace tessera::sim {
namespace {

class Replay : public ::testing::TestWithParam<const char*> {};

const ExpectedRun* findRun(const std::vector<ExpectedRun>& runs, const std::string& policy,
                           int seed) {
  for (const ExpectedRun& r : runs) {
    if (r.workload == "openb_pod_list_default" && r.policy == policy && r.seed == seed) return &r;
  }
  return nullptr;
}

void expectCurveMatches(const BucketValues& ours, const ExpectedRun& expected, const char* what) {
  int compared = 0;
  for (int k = 0; k < kBuckets; ++k) {
    const auto& e = expected.values[static_cast<std::size_t>(k)];
    const auto& o = ours[static_cast<std::size_t>(k)];
    ASSERT_EQ(e.has_value(), o.has_value()) << what << " bucket " << k;
    if (!e) continue;
    ++compared;
    EXPECT_LE(std::abs(*o - *e), 0.01 + 1e-9)
        << what << " bucket " << k << ": ours " << *o << ", artifact " << *e;
  }
  EXPECT_EQ(compared, kBuckets) << what;
}

TEST_P(Replay, DefaultTraceSeed42MatchesTheArtifact) {
  TESSERA_SKIP_WITHOUT_SHARED_DATA();
  const std::string policy = GetParam();
  const auto catalog = model::GpuCatalog::builtin();
  auto nodes = readNodeList(testing::traceDir() + "/openb_node_list_gpu_node.csv", catalog);
  ASSERT_TRUE(nodes) << nodes.error().message;
  auto pods = readPodList(testing::traceDir() + "/openb_pod_list_default.csv", catalog);
  ASSERT_TRUE(pods) << pods.error().message;
  auto trace = makeFgdTrace("default", std::move(*nodes), std::move(*pods), catalog);
  ASSERT_TRUE(trace) << trace.error().message;
  EXPECT_EQ(trace->gpuCount, 6212);

  auto reference = loadTraceReference(testing::referenceDir(), "default");
  ASSERT_TRUE(reference) << reference.error().message;
  ASSERT_TRUE(reference->has_value());
  auto plan = referencePlan(*trace, **reference, 42);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->order.size(), 10866u);         // tuning_summary.csv
  EXPECT_EQ(plan->arrivingGpuMilli, 8'075'080);  // tuning_summary.csv
  EXPECT_EQ(plan->appended, 2714);

  RunSpec spec{policy, 42, std::move(*plan)};
  auto run = runFgd(*trace, catalog, spec);
  ASSERT_TRUE(run) << run.error().message;

  const std::string id = artifactPolicyId(policy);
  auto alloc = readExpectedResults(testing::expectedDir() + "/analysis_allo_discrete.csv");
  ASSERT_TRUE(alloc) << alloc.error().message;
  auto frag = readExpectedResults(testing::expectedDir() + "/analysis_frag_discrete.csv");
  ASSERT_TRUE(frag) << frag.error().message;
  const ExpectedRun* expectedAlloc = findRun(*alloc, id, 42);
  const ExpectedRun* expectedFrag = findRun(*frag, id, 42);
  ASSERT_NE(expectedAlloc, nullptr);
  ASSERT_NE(expectedFrag, nullptr);
  expectCurveMatches(run->curve.allocPct, *expectedAlloc, "allocation %");
  expectCurveMatches(run->curve.fragPct, *expectedFrag, "fragment % of GPUs");
  if (policy == "fgd") {
    // The artifact's log (shared/docs/fgd-benchmark.md §6): 2,532 of 10,866 pods fail.
    EXPECT_EQ(run->failed, 2532);
    EXPECT_EQ(run->samples.back().allocatedMilli, 5'919'410);
  }
}

INSTANTIATE_TEST_SUITE_P(ArtifactPolicies, Replay, ::testing::Values("fgd", "bestfit"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tessera::sim
