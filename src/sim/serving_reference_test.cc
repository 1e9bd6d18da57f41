#include "sim/serving_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "sim/serving_run.h"
#include "sim/serving_test_support.h"

namespace tessera::sim {
namespace {

using testing::phasedTrace;
using testing::servingCatalog;

ReplicaPerf wholePerf(const ServingOptions& o) {
  auto p = servingPerf(servingCatalog(), o);
  EXPECT_TRUE(p);
  return *p;
}

TEST(Clairvoyant, LightTrafficIsOneReplicaOnTheSmallestShareThroughout) {
  // 2 short requests per second: one replica on half a GPU serves them all within the SLO (a
  // quarter cannot hold Llama-3.1-8B's weights), so the cheapest plan is that replica from the
  // first second until the last request is served, then none for the rest of the tail.
  ServingOptions o;
  o.clairvoyantMaxRuns = 24;  // enough to reach the tail; short under sanitizers
  const ServingTrace t = phasedTrace({{600, 2}});
  auto r = runServing(t, servingCatalog(), o, "clairvoyant");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->policy, "clairvoyant");
  EXPECT_GE(r->sloAttainment, 0.99);
  EXPECT_FALSE(r->infeasible);
  EXPECT_DOUBLE_EQ(r->replicaShare, 0.5);
  EXPECT_EQ(r->peakReplicas, 1);
  EXPECT_EQ(r->scaleUps, 0);
  const double span = static_cast<double>(t.spanUs()) / 1e6;
  EXPECT_GE(r->gpuHours, 0.5 * span / 3600);
  EXPECT_LT(r->gpuHours, 0.5 * r->horizonS / 3600);
  EXPECT_NE(r->detail.find("0.50 GPU shares"), std::string::npos) << r->detail;
}

TEST(Clairvoyant, ScalesAheadOfABurstAndBackAndMeetsTheTarget) {
  ServingOptions o;
  o.clairvoyantMaxRuns = 16;
  const ServingTrace t = phasedTrace({{300, 2}, {180, 40}, {300, 2}});
  auto peak = runServing(t, servingCatalog(), o, "static-peak");
  auto r = runServing(t, servingCatalog(), o, "clairvoyant");
  ASSERT_TRUE(peak && r);
  EXPECT_GE(r->sloAttainment, 0.99);
  EXPECT_LT(r->gpuHours, peak->gpuHours);
  EXPECT_GT(r->coldStarts, 0);
  EXPECT_GT(r->scaleUps, 0);
  EXPECT_GT(r->scaleDowns, 0);
  int atBurst = 0, after = 0;
  for (const auto& p : r->timeline) {
    if (p.timeS == 300) atBurst = p.ready;  // the burst begins: replicas already there
    if (p.timeS == 690) after = p.ready;    // 3.5 minutes after it, at 2 requests/s again
  }
  EXPECT_GT(atBurst, 1);
  EXPECT_GE(after, 1);
  EXPECT_LT(after, atBurst);
  const ServingLowerBound b = servingLowerBound(t, wholePerf(o), o, o.sloTarget);
  ASSERT_TRUE(b.gpuHours);
  EXPECT_LE(*b.gpuHours, r->gpuHours);
}

TEST(Clairvoyant, SaysWhyWhenTheFleetIsTooSmall) {
  ServingOptions o;
  o.fleet.nodes = 1;
  o.fleet.gpusPerNode = 1;
  o.clairvoyantMaxRuns = 12;
  // 20 prompts of 4,000 tokens per second: ~3.3 GPUs of prefill alone.
  const ServingTrace t = phasedTrace({{240, 20}}, 4000, 50);
  auto r = runServing(t, servingCatalog(), o, "clairvoyant");
  ASSERT_TRUE(r);
  EXPECT_LT(r->sloAttainment, 0.99);
  ASSERT_TRUE(r->infeasible);
  EXPECT_NE(r->infeasible->find("fleet (1 GPUs of H100-80GB)"), std::string::npos)
      << *r->infeasible;
}

TEST(LowerBound, TwoRequestsByHand) {
  // Requests at 0 s and 100 s, 1,000-token prompts, none may be missed (floor(2 x 1 %) = 0).
  // The second's replica exists over [100 + 2 - p - C, 100 + p] (p its prefill, C the fastest
  // cold start): ticks 72..99, 28 whole seconds, at the smallest share. The first's E starts at
  // 0 and ends at p < 1 s: no whole tick, so slot 0 counts only its work.
  ServingOptions o;
  ServingTrace t;
  t.name = "two";
  t.requests.push_back({0, 1000, 10, 2});
  t.requests.push_back({100'000'000, 1000, 10, 3});
  const ReplicaPerf w = wholePerf(o);
  const ServingLowerBound b = servingLowerBound(t, w, o, 0.99);
  ASSERT_TRUE(b.gpuHours) << b.reason;
  const double p = (1000 * w.flopsPerToken + w.attentionFlopsPerPair * 1e6 / 2) / w.flopsPerSec;
  const double fmin = (15317.0 + 4096) / static_cast<double>(w.memoryMib);
  EXPECT_NEAR(b.minColdStartS, 30 + 15317.0 * 1024 * 1024 / 20e9, 1e-9);
  EXPECT_NEAR(b.minShare, fmin, 1e-12);
  EXPECT_EQ(b.allowedMisses, 0);
  EXPECT_NEAR(*b.gpuHours, (p + 28 * fmin) / 3600, 1e-12);
}

TEST(LowerBound, NoneWhenMoreRequestsCanNeverRunThanTheTargetAllows) {
  ServingOptions o;
  o.maxContextTokens = 4096;
  ServingTrace t = phasedTrace({{100, 1}});
  for (int i = 0; i < 5; ++i) t.requests[static_cast<std::size_t>(i * 10)].inputTokens = 8000;
  const ServingLowerBound b = servingLowerBound(t, wholePerf(o), o, 0.99);
  EXPECT_FALSE(b.gpuHours);
  EXPECT_EQ(b.neverServable, 5);
  EXPECT_NE(b.reason.find("5 of 100 requests can never run"), std::string::npos) << b.reason;
}

TEST(LowerBound, NeverAboveAPolicyThatMeetsTheTarget) {
  // Random phased traces (printed seed): the bound is at or below the GPU-hours of every
  // policy, the clairvoyant included, that reaches the target.
  const unsigned seed = std::random_device{}();
  std::printf("LowerBound.NeverAboveAPolicyThatMeetsTheTarget seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> seconds(60, 200), prompt(200, 6000), output(10, 300);
  std::uniform_real_distribution<double> rate(0.3, 12);
  int checked = 0;
  for (int trial = 0; trial < 3; ++trial) {
    ServingTrace t;
    t.name = "random";
    Micros start = 0;
    std::exponential_distribution<double> gap(1);
    for (int phase = 0; phase < 3; ++phase) {
      const double r = rate(rng);
      const Micros end = start + Micros{seconds(rng)} * 1'000'000;
      for (Micros at = start; at < end; at += static_cast<Micros>(gap(rng) / r * 1e6)) {
        t.requests.push_back({at, prompt(rng), output(rng), static_cast<int>(t.requests.size())});
      }
      start = end;
    }
    ServingOptions o;
    o.clairvoyantMaxRuns = 10;
    const ServingLowerBound b = servingLowerBound(t, wholePerf(o), o, o.sloTarget);
    ASSERT_TRUE(b.gpuHours) << "seed " << seed << ": " << b.reason;
    for (const char* policy : {"static-peak", "littles-law", "tessera", "clairvoyant"}) {
      auto r = runServing(t, servingCatalog(), o, policy);
      ASSERT_TRUE(r) << r.error().message;
      if (r->sloAttainment < o.sloTarget) continue;
      ++checked;
      EXPECT_LE(*b.gpuHours, r->gpuHours) << "seed " << seed << " trial " << trial << " " << policy;
    }
  }
  EXPECT_GT(checked, 0) << "seed " << seed << ": no policy met the target on any trial";
}

}  // namespace
}  // namespace tessera::sim
