// The experiment driver: deterministic for a seed whatever the number of jobs, the synthetic
// default, reports.

#include "sim/experiment.h"

#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "sched/testing/random_cluster.h"
#include "sim/report.h"
#include "sim/serving_test_support.h"
#include "sim/synthetic.h"

namespace tessera::sim {
namespace {

using testing::servingCatalog;

FgdTrace syntheticTrace(std::uint64_t seed) {
  SyntheticTrace s = makeSyntheticTrace(seed);
  auto t = makeFgdTrace("synthetic", std::move(s.nodes), std::move(s.pods), servingCatalog());
  EXPECT_TRUE(t) << t.error().message;
  return std::move(*t);
}

TEST(Synthetic, ClusterAndWorkloadAsDocumented) {
  const SyntheticTrace a = makeSyntheticTrace(42);
  const SyntheticTrace b = makeSyntheticTrace(42);
  const SyntheticTrace c = makeSyntheticTrace(43);
  ASSERT_EQ(a.nodes.size(), 100u);
  EXPECT_EQ(gpuCapacityMilli(a.nodes), 512'000);
  ASSERT_EQ(a.pods.size(), b.pods.size());
  for (std::size_t i = 0; i < a.pods.size(); ++i) {
    EXPECT_EQ(a.pods[i].cpuMilli, b.pods[i].cpuMilli);
    EXPECT_EQ(a.pods[i].totalGpuMilli(), b.pods[i].totalGpuMilli());
  }
  std::int64_t requested = 0;
  int cpuOnly = 0, sharing = 0, multi = 0;
  for (const TracePod& p : a.pods) {
    requested += p.totalGpuMilli();
    cpuOnly += p.gpus == 0;
    sharing += p.gpus == 1 && p.gpuMilli < 1000;
    multi += p.gpus > 1;
    for (const auto& type : p.gpuTypes) EXPECT_NE(servingCatalog().find(type), nullptr) << type;
  }
  EXPECT_GE(requested, 512'000 * 98 / 100);
  EXPECT_LT(requested, 512'000 * 98 / 100 + 8000);
  const double n = static_cast<double>(a.pods.size());
  EXPECT_NEAR(cpuOnly / n, 0.133, 0.05);
  EXPECT_NEAR(sharing / n, 0.378, 0.06);
  EXPECT_GT(multi, 0);
  bool same = a.pods.size() == c.pods.size();
  for (std::size_t i = 0; same && i < 10; ++i) {
    same = a.pods[i].cpuMilli == c.pods[i].cpuMilli && a.pods[i].gpuMilli == c.pods[i].gpuMilli;
  }
  EXPECT_FALSE(same) << "seeds 42 and 43 drew the same workload";
}

TEST(Experiment, SameResultsWithOneOrTwoJobs) {
  std::vector<FgdTrace> traces;
  traces.push_back(syntheticTrace(7));
  ExperimentOptions o;
  o.policies = {"random", "bestfit", "fgd", "tessera"};
  o.seeds = {1, 2};
  o.jobs = 1;
  o.keepSamples = true;
  auto one = runExperiments(traces, servingCatalog(), o);
  ASSERT_TRUE(one) << one.error().message;
  o.jobs = 2;
  int ticks = 0;
  auto two = runExperiments(traces, servingCatalog(), o, [&](const ProgressSnapshot& s) {
    ++ticks;
    EXPECT_LE(s.podsDone, s.podsTotal);
  });
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_GT(ticks, 0);
  ASSERT_EQ(one->size(), 1u);
  const TraceResult& a = one->front();
  const TraceResult& b = two->front();
  EXPECT_FALSE(a.replayed);
  ASSERT_EQ(a.policies.size(), 4u);
  for (std::size_t p = 0; p < a.policies.size(); ++p) {
    ASSERT_EQ(a.policies[p].runs.size(), 2u);
    for (std::size_t s = 0; s < 2; ++s) {
      const RunResult& x = a.policies[p].runs[s];
      const RunResult& y = b.policies[p].runs[s];
      EXPECT_EQ(x.seed, o.seeds[s]);
      EXPECT_EQ(x.placed, y.placed) << a.policies[p].policy;
      ASSERT_EQ(x.samples.size(), y.samples.size());
      for (std::size_t i = 0; i < x.samples.size(); ++i) {
        ASSERT_EQ(x.samples[i].allocatedMilli, y.samples[i].allocatedMilli);
        ASSERT_EQ(x.samples[i].fragMilli, y.samples[i].fragMilli);
      }
      EXPECT_GT(x.placed, 0);
      EXPECT_EQ(x.placed + x.failed, static_cast<int>(x.samples.size()));
      // Arrived load reaches 130 % of capacity (minus at most one pod).
      EXPECT_GT(x.samples.back().arrivedMilli, 512'000 * 120 / 100);
      EXPECT_TRUE(x.unallocatedAt100());
    }
    EXPECT_EQ(a.policies[p].unallocatedAt100.n, 2);
  }
}

TEST(Experiment, UnknownPolicyAndMissingSeeds) {
  std::vector<FgdTrace> traces;
  traces.push_back(syntheticTrace(1));
  ExperimentOptions o;
  o.policies = {"worstfit"};
  o.seeds = {1};
  auto r = runExperiments(traces, servingCatalog(), o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unknown policy 'worstfit'"), std::string::npos);
  o.policies = {"fgd"};
  o.referenceDir = "/nonexistent";  // no files for the trace: own generator
  o.seeds = {};
  EXPECT_FALSE(runExperiments(traces, servingCatalog(), o));
}

// The LP bound is a lower bound: no policy's unallocated GPUs at 100 % arrived fall below the
// bound for the sharing pods it placed; the place-all bound depends on the order only.
TEST(Experiment, LowerBoundsHoldForEveryPolicy) {
  const std::uint64_t seed = sched::testkit::fuzzSeed();
  std::printf("LowerBoundsHoldForEveryPolicy: synthetic seed %llu (TESSERA_SEED repeats it)\n",
              static_cast<unsigned long long>(seed));
  std::vector<FgdTrace> traces;
  traces.push_back(syntheticTrace(seed));
  ExperimentOptions o;
  o.policies.assign(kPolicyNames.begin(), kPolicyNames.end());
  o.seeds = {static_cast<int>(seed % 1000), static_cast<int>(seed % 1000) + 1};
  o.jobs = 2;
  o.bound = true;
  auto r = runExperiments(traces, servingCatalog(), o);
  ASSERT_TRUE(r) << r.error().message;
  const TraceResult& t = r->front();
  ASSERT_EQ(t.placeAllBoundAt100.n, 2) << "seed " << seed;
  for (const PolicySummary& p : t.policies) {
    ASSERT_EQ(p.boundAt100.n, 2) << p.policy << ", seed " << seed;
    for (std::size_t s = 0; s < p.runs.size(); ++s) {
      const RunResult& run = p.runs[s];
      ASSERT_TRUE(run.boundAt100 && run.placeAllBoundAt100 && run.unallocatedAt100());
      EXPECT_GE(*run.boundAt100, 0);
      // The curve's allocation is rounded to 0.01 pp.
      EXPECT_LE(*run.boundAt100, *run.unallocatedAt100() + 0.01)
          << p.policy << " seed " << run.seed << ", synthetic seed " << seed;
      EXPECT_DOUBLE_EQ(*run.placeAllBoundAt100, *t.policies.front().runs[s].placeAllBoundAt100)
          << p.policy << " seed " << run.seed << ", synthetic seed " << seed;
    }
  }
  const nlohmann::json j = traceJson(t, nullptr);
  EXPECT_TRUE(j.contains("place_all_lower_bound_pct_at_100"));
  EXPECT_TRUE(j["policies"]["tessera"].contains("unallocated_gpu_pct_lower_bound_at_100"));
  // Without the option there is no bound and no JSON key.
  o.bound = false;
  o.policies = {"fgd"};
  auto plain = runExperiments(traces, servingCatalog(), o);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->front().policies.front().runs.front().boundAt100);
  EXPECT_FALSE(traceJson(plain->front(), nullptr).contains("place_all_lower_bound_pct_at_100"));
}

TEST(Experiment, ParsesSeedLists) {
  EXPECT_EQ(*parseSeedList("42-45"), (std::vector<int>{42, 43, 44, 45}));
  EXPECT_EQ(*parseSeedList("1,5,7-8"), (std::vector<int>{1, 5, 7, 8}));
  EXPECT_FALSE(parseSeedList("5-3"));
  EXPECT_FALSE(parseSeedList("x"));
  EXPECT_FALSE(parseSeedList(""));
}

TEST(Report, JsonCsvAndSvgShapes) {
  std::vector<FgdTrace> traces;
  traces.push_back(syntheticTrace(3));
  ExperimentOptions o;
  o.policies = {"bestfit", "fgd"};
  o.seeds = {5};
  auto r = runExperiments(traces, servingCatalog(), o);
  ASSERT_TRUE(r) << r.error().message;
  const nlohmann::json j = traceJson(r->front());
  EXPECT_EQ(j["trace"], "synthetic");
  ASSERT_TRUE(j["policies"].contains("fgd"));
  const auto& fgd = j["policies"]["fgd"];
  EXPECT_TRUE(fgd["unallocated_gpu_pct_at_100"]["mean"].is_number());
  EXPECT_TRUE(fgd["unallocated_gpu_pct_at_100"]["sd"].is_number());
  ASSERT_FALSE(fgd["curve"].empty());
  EXPECT_EQ(fgd["curve"][0]["arrived_pct"], 0);
  std::ostringstream csv;
  writeCurvesCsv(csv, r->front());
  EXPECT_EQ(csv.str().rfind("trace,policy,seed,arrived_pct,", 0), 0u);
  EXPECT_NE(csv.str().find("synthetic,fgd,mean,100,"), std::string::npos);
  const std::string svg = plotSvg(r->front());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim
