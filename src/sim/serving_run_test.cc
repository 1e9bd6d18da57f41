#include "sim/serving_run.h"
#include "sim/serving_policy.h"
#include "sim/serving_reference.h"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "sim/serving_test_support.h"
#include "sim/test_support.h"

namespace tessera::sim {
namespace {

using testing::phasedTrace;
using testing::servingCatalog;

// A controller that keeps a fixed count (warm from t = 0).
class Fixed final : public ServingController {
 public:
  explicit Fixed(int n) : n_(n) {}
  Millis syncPeriodMs() const override { return 15'000; }
  int initialReplicas() const override { return n_; }
  scale::Decision evaluate(const scale::DeploymentSignals& s) override {
    last = s;
    scale::Decision d;
    d.desiredReplicas = n_;
    return d;
  }
  scale::DeploymentSignals last;

 private:
  int n_;
};

void expectConserved(const ServingPolicyResult& r) {
  EXPECT_EQ(r.served + r.unserved + r.rejected, r.requests) << r.policy;
  EXPECT_LE(r.sloMet, r.served) << r.policy;
  EXPECT_NEAR(r.sloAttainment, static_cast<double>(r.sloMet) / r.requests, 1e-12);
}

TEST(ServingRun, AnIsolatedRequestWaitsOnlyForItsPrefill) {
  ServingOptions o;
  ServingTrace t;
  t.name = "one";
  t.requests = {{0, 1000, 20, 2}, {30'000'000, 4000, 1, 3}};
  Fixed one(1);
  auto r = runServingWith(t, servingCatalog(), o, "fixed", one);
  ASSERT_TRUE(r) << r.error().message;
  auto perf = servingPerf(servingCatalog(), o);
  ASSERT_TRUE(perf);
  // 1000 x 16.06 GFLOP + 524288 x 1000^2 / 2 FLOPs at 395.8 TFLOP/s, to the microsecond.
  const double first = std::ceil(perf->prefillSeconds(1000) * 1e6 - 1e-6) / 1000;
  const double second = std::ceil(perf->prefillSeconds(4000) * 1e6 - 1e-6) / 1000;
  EXPECT_NEAR(first, 41.24, 0.01);
  EXPECT_DOUBLE_EQ(r->ttftP50Ms, first);
  EXPECT_DOUBLE_EQ(r->ttftP99Ms, second);
  EXPECT_DOUBLE_EQ(r->queueP99Ms, 0);
  EXPECT_EQ(r->sloMet, 2);
  EXPECT_EQ(r->coldStarts, 0);
  // One GPU from 0 to the horizon (last arrival + 120 s).
  EXPECT_DOUBLE_EQ(r->horizonS, 150);
  EXPECT_DOUBLE_EQ(r->gpuHours, 150.0 / 3600);
}

// A fleet of cards without NVLink (L40S) builds: its GPUs get no NVLink group, which the
// books would refuse on such a card (issue 14, bug 3).
TEST(ServingRun, AFleetOfCardsWithoutNvlinkRuns) {
  ServingOptions o;
  o.fleet.gpuType = "L40S";
  ServingTrace t;
  t.name = "one";
  t.requests = {{0, 1000, 20, 2}};
  Fixed one(1);
  auto r = runServingWith(t, servingCatalog(), o, "fixed", one);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->served, 1);
}

// Starts with one replica and asks for a second at its first sync.
class OneThenTwo final : public ServingController {
 public:
  Millis syncPeriodMs() const override { return 15'000; }
  int initialReplicas() const override { return 1; }
  scale::Decision evaluate(const scale::DeploymentSignals& s) override {
    maxBuffered = std::max(maxBuffered, s.bufferedRequests.value_or(0));
    scale::Decision d;
    d.desiredReplicas = 2;
    return d;
  }
  double maxBuffered = 0;
};

// A burst that lands while one replica is ready: without flow control it all queues on that
// replica and the second one, ready later, takes none of it; with the router holding requests
// (the Gateway API inference extension's queue depth) the second takes its part at once.
TEST(ServingRun, TheRoutersFlowControlSharesABacklogWithReplicasThatComeUpLater) {
  ServingOptions o;
  o.warmupSeconds = 0;
  o.fleet.modelCachedOnDisk = true;  // the second replica loads from the node's disk
  ServingTrace t;
  t.name = "burst";
  for (int i = 0; i < 120; ++i) t.requests.push_back({i * 10'000, 16'000, 2, i + 2});
  auto run = [&](int depth, OneThenTwo& c) {
    ServingOptions with = o;
    with.routerQueueDepth = depth;
    return runServingWith(t, servingCatalog(), with, "fixed", c);
  };
  OneThenTwo off, on;
  auto stranded = run(0, off);
  auto shared = run(5, on);
  ASSERT_TRUE(stranded) << stranded.error().message;
  ASSERT_TRUE(shared) << shared.error().message;
  expectConserved(*stranded);
  expectConserved(*shared);
  EXPECT_EQ(stranded->served, 120);
  EXPECT_EQ(shared->served, 120);
  // One replica prefills these prompts one at a time, ~0.5 s each: alone it is still working
  // through the burst when the second is ready, so sharing the backlog shortens the queue.
  EXPECT_LT(shared->queueP99Ms, 0.8 * stranded->queueP99Ms)
      << "flow control " << shared->queueP99Ms << " ms, none " << stranded->queueP99Ms << " ms";
  EXPECT_EQ(off.maxBuffered, 0);  // without flow control the router holds nothing
  EXPECT_GT(on.maxBuffered, 0);   // with it, what no replica has room for is the router's
}

TEST(ServingRun, AReplicaOnHalfAGpuTakesTwiceAsLongAndCountsHalf) {
  ServingOptions o;
  ServingTrace t;
  t.name = "one";
  t.requests = {{0, 1000, 20, 2}, {30'000'000, 4000, 1, 3}};
  o.replicaShare = 0.5;
  Fixed one(1);
  auto r = runServingWith(t, servingCatalog(), o, "fixed", one);
  ASSERT_TRUE(r) << r.error().message;
  auto perf = servingPerf(servingCatalog(), o);
  ASSERT_TRUE(perf);
  // Half the FLOP/s: the lone 1000-token prompt's 41.24 ms prefill takes 82.48 ms.
  const double first = std::ceil(2 * perf->prefillSeconds(1000) * 1e6 - 1e-6) / 1000;
  EXPECT_NEAR(first, 82.48, 0.01);
  EXPECT_DOUBLE_EQ(r->ttftP50Ms, first);
  EXPECT_DOUBLE_EQ(r->replicaShare, 0.5);
  // The engine booked half the GPU's compute for it (a shared placement).
  EXPECT_EQ(r->placedComputeMilli, 500);
  // Half a GPU from 0 to the horizon (150 s).
  EXPECT_DOUBLE_EQ(r->horizonS, 150);
  EXPECT_DOUBLE_EQ(r->gpuHours, 0.5 * 150 / 3600);

  o.replicaShare = 1;
  auto whole = runServingWith(t, servingCatalog(), o, "fixed", one);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->placedComputeMilli, 1000);
  EXPECT_DOUBLE_EQ(whole->gpuHours, 150.0 / 3600);
}

TEST(ServingRun, AShareHoldsItsPartOfTheMemory) {
  ServingOptions o;
  auto perf = servingPerf(servingCatalog(), o);
  ASSERT_TRUE(perf);
  // H100-80GB: 0.9 x 81,920 = 73,728 MiB; half is 36,864 - weights 15,317 - overhead 4,096 =
  // 17,451 MiB of KV at 128 KiB a token.
  auto half = sharePerf(*perf, o.model, 0.5);
  ASSERT_TRUE(half) << half.error().message;
  EXPECT_EQ(half->memoryMib, 36'864);
  EXPECT_EQ(half->kvCapacityTokens, 17'451 * 8);
  EXPECT_DOUBLE_EQ(half->flopsPerSec, perf->flopsPerSec / 2);
  EXPECT_DOUBLE_EQ(half->bytesPerSec, perf->bytesPerSec / 2);
  // A quarter (18,432 MiB) cannot hold the weights and overhead (19,413 MiB).
  EXPECT_FALSE(sharePerf(*perf, o.model, 0.25));
  EXPECT_FALSE(sharePerf(*perf, o.model, 0));
  const auto req = replicaRequest(o.model, *half, "r", "H100-80GB", "d", 0.5);
  EXPECT_EQ(req.model.computeMilli, 500);
  EXPECT_EQ(req.model.kvCacheMib, 17'451);
}

TEST(ServingRun, TesseraTakesAShareOnlyWhenPrefillDemandIsUnderAGpu) {
  ServingOptions o;
  // Light: 1 request/s of 1000 tokens is 0.07 GPUs of prefill at 0.6: half a GPU (a quarter
  // cannot hold the weights).
  ServingTrace light = phasedTrace({{900, 1}});
  auto t = runServing(light, servingCatalog(), o, "tessera");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_DOUBLE_EQ(t->replicaShare, 0.5);
  EXPECT_EQ(t->placedComputeMilli, 500);
  auto baseline = runServing(light, servingCatalog(), o, "littles-law");
  ASSERT_TRUE(baseline) << baseline.error().message;
  EXPECT_DOUBLE_EQ(baseline->replicaShare, 1);  // baselines take whole GPUs
  EXPECT_LT(t->gpuHours, baseline->gpuHours);
  // Heavy: 30 requests/s of 4000 tokens is ~7 GPUs of prefill: whole GPUs.
  ServingTrace heavy = phasedTrace({{900, 30}}, 4000, 50);
  auto h = runServing(heavy, servingCatalog(), o, "tessera");
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_DOUBLE_EQ(h->replicaShare, 1);
}

TEST(ServingRun, TesseraTakesAShareWhoseMemoryHoldsTheRequestsInFlight) {
  ServingOptions o;
  // 4 requests/s of 1000 prompt and 2000 output tokens: little prefill, but each request holds
  // its sequence for 2000 decode steps (over 10 s on a whole H100 at the reference batch of 16,
  // twice that on a half), so about 100 are in flight on halves, whose KV cache holds 46 of
  // them. The share is sized from the decode steps a request waits through, not the GPU time
  // its tokens take (a sixteenth of a step each at that batch, which read as 5 in flight and
  // took a half).
  ServingTrace t = phasedTrace({{900, 4}}, 1000, 2000);
  auto r = runServing(t, servingCatalog(), o, "tessera");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_GT(r->replicaShare, 0.5) << r->detail;
  EXPECT_GE(r->sloAttainment, 0.99);
}

TEST(ServingRun, EveryRequestIsCounted) {
  ServingOptions o;
  o.tailSeconds = 5;  // too short for the backlog: some requests end unserved
  ServingTrace t = phasedTrace({{60, 40}}, 2000, 200);
  t.requests.push_back({t.spanUs(), 200'000, 10, 0});  // beyond the context window
  Fixed one(1);
  auto r = runServingWith(t, servingCatalog(), o, "fixed", one);
  ASSERT_TRUE(r) << r.error().message;
  expectConserved(*r);
  EXPECT_EQ(r->requests, static_cast<int>(t.requests.size()));
  EXPECT_EQ(r->rejected, 1);
  EXPECT_GT(r->unserved, 0);
  EXPECT_LT(r->sloAttainment, 0.5);
}

TEST(ServingRun, SignalsAreWhatAScraperSees) {
  ServingOptions o;
  ServingTrace t = phasedTrace({{30, 10}});
  Fixed two(2);
  auto r = runServingWith(t, servingCatalog(), o, "fixed", two);
  ASSERT_TRUE(r) << r.error().message;
  const scale::DeploymentSignals& s = two.last;  // the last sync before the horizon
  ASSERT_EQ(s.replicas.size(), 2u);
  for (const auto& x : s.replicas) {
    EXPECT_EQ(x.phase, scale::ReplicaPhase::kReady);
    ASSERT_TRUE(x.waiting && x.running && x.kvCacheUsage && x.gpuUtilization);
    EXPECT_GT(x.maxConcurrency, 0);
  }
  ASSERT_TRUE(s.arrivalRatePerSec);
  EXPECT_DOUBLE_EQ(*s.arrivalRatePerSec, 0);  // the trace ended more than a window ago
}

// One replica; keeps the signals of every sync.
class Recording final : public ServingController {
 public:
  Millis syncPeriodMs() const override { return 15'000; }
  int initialReplicas() const override { return 1; }
  scale::Decision evaluate(const scale::DeploymentSignals& s) override {
    seen.push_back(s);
    scale::Decision d;
    d.desiredReplicas = 1;
    return d;
  }
  std::vector<scale::DeploymentSignals> seen;
};

TEST(ServingRun, MeanPrefillIsScheduledToFirstToken) {
  ServingOptions o;
  o.warmupSeconds = 0;
  ServingTrace t;
  t.name = "prefill";
  // Alone at 0: prefilled in one iteration. At 20 s two prompts arrive together and share one
  // iteration: each reports that whole iteration (as vllm:request_prefill_time_seconds does).
  t.requests = {{0, 1000, 5, 2}, {20'000'000, 1000, 1, 3}, {20'000'000, 3000, 1, 4}};
  Recording rec;
  auto r = runServingWith(t, servingCatalog(), o, "recording", rec);
  ASSERT_TRUE(r) << r.error().message;
  auto perf = servingPerf(servingCatalog(), o);
  ASSERT_TRUE(perf);
  ASSERT_GE(rec.seen.size(), 2u);
  const double alone = std::ceil(perf->prefillSeconds(1000) * 1e6 - 1e-6) / 1000;
  // The sync at 15 s: the first request only.
  ASSERT_TRUE(rec.seen[0].meanPrefillMs);
  EXPECT_DOUBLE_EQ(*rec.seen[0].meanPrefillMs, alone);
  // At 30 s: (alone + 2 x together) / 3, together = FLOPs of both prompts at once.
  const double together =
      std::ceil((4000 * perf->flopsPerToken +
                 perf->attentionFlopsPerPair * (1000.0 * 1000 + 3000.0 * 3000) / 2) /
                    perf->flopsPerSec * 1e6 -
                1e-6) /
      1000;
  ASSERT_TRUE(rec.seen[1].meanPrefillMs);
  EXPECT_NEAR(*rec.seen[1].meanPrefillMs, (alone + 2 * together) / 3, 1e-9);
  // The tensor-pipe activity per prefilled prompt over the window (30 s since the replica was
  // ready) counts each prompt's own compute once: (alone + together) / 3, plus the few decode
  // steps' matrix work (well under a millisecond here).
  ASSERT_EQ(rec.seen[1].replicas.size(), 1u);
  const scale::ReplicaSignals& x = rec.seen[1].replicas[0];
  ASSERT_TRUE(x.computeActive && x.prefillsPerSec);
  EXPECT_DOUBLE_EQ(*x.prefillsPerSec, 3.0 / 30);
  const double ownMs = *x.computeActive / *x.prefillsPerSec * 1000;
  EXPECT_GE(ownMs, (alone + together) / 3 - 0.01);
  EXPECT_LE(ownMs, (alone + together) / 3 + 0.5);
  EXPECT_LT(ownMs, *rec.seen[1].meanPrefillMs);
}

// Two replicas until a minute in, then one.
class StepDown final : public ServingController {
 public:
  Millis syncPeriodMs() const override { return 15'000; }
  int initialReplicas() const override { return 2; }
  scale::Decision evaluate(const scale::DeploymentSignals& s) override {
    scale::Decision d;
    d.desiredReplicas = s.nowMs >= 60'000 ? 1 : 2;
    return d;
  }
};

TEST(ServingRun, ScaleDownDrainsThroughTheLifecycle) {
  ServingOptions o;
  o.warmupSeconds = 0;
  ServingTrace t = phasedTrace({{120, 1}}, 500, 20);  // light: each request done in ~0.2 s
  StepDown policy;
  auto r = runServingWith(t, servingCatalog(), o, "step-down", policy);
  ASSERT_TRUE(r) << r.error().message;
  expectConserved(*r);
  EXPECT_EQ(r->sloMet, r->requests);
  EXPECT_EQ(r->scaleDowns, 1);
  EXPECT_EQ(r->coldStarts, 0);
  ASSERT_FALSE(r->decisions.empty());
  EXPECT_EQ(r->decisions.back().timeS, 60);
  EXPECT_EQ(r->decisions.back().drained, 1);
  // The victim stops taking requests at 60 s, holds its GPU through the 10 s drain, flushes
  // what it has (well under a second) and frees its memory in 1 s: gone by 72 s.
  const double secondReplicaS = r->gpuHours * 3600 - r->horizonS;
  EXPECT_GE(secondReplicaS, 71);
  EXPECT_LE(secondReplicaS, 72);
}

TEST(ServingRun, WarmUpIsNotMeasured) {
  ServingOptions o;
  ServingTrace t = phasedTrace({{600, 2}});
  Fixed one(1);
  auto r = runServingWith(t, servingCatalog(), o, "fixed", one);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->requests, 1200);  // the first 300 s ran twice, counted once
  EXPECT_DOUBLE_EQ(r->horizonS, t.spanUs() / 1e6 + 120);
  EXPECT_NEAR(r->gpuHours, r->horizonS / 3600, 1e-9);
  EXPECT_EQ(r->timeline.front().timeS, 0);
}

TEST(ServingRun, StaticPeakNeverColdStarts) {
  ServingOptions o;
  ServingTrace t = phasedTrace({{120, 2}, {120, 40}, {120, 2}});
  auto r = runServing(t, servingCatalog(), o, "static-peak");
  ASSERT_TRUE(r) << r.error().message;
  expectConserved(*r);
  EXPECT_EQ(r->coldStarts, 0);
  EXPECT_EQ(r->scaleEvents(), 0);
  ASSERT_FALSE(r->timeline.empty());
  for (const auto& p : r->timeline) {
    EXPECT_EQ(p.loading, 0);
    EXPECT_EQ(p.ready, r->timeline.front().ready);
  }
  EXPECT_GT(r->timeline.front().ready, 1);
}

TEST(ServingRun, Deterministic) {
  ServingOptions o;
  o.clairvoyantMaxRuns = 8;  // a short search keeps sanitizer builds quick
  ServingTrace t = phasedTrace({{200, 3}, {100, 30}, {200, 3}}, 1500, 300);
  auto a = runServing(t, servingCatalog(), o, "clairvoyant");
  auto b = runServing(t, servingCatalog(), o, "clairvoyant");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->sloMet, b->sloMet);
  EXPECT_DOUBLE_EQ(a->gpuHours, b->gpuHours);
  EXPECT_DOUBLE_EQ(a->ttftP99Ms, b->ttftP99Ms);
  EXPECT_DOUBLE_EQ(a->queueP50Ms, b->queueP50Ms);
  ASSERT_EQ(a->timeline.size(), b->timeline.size());
  for (std::size_t i = 0; i < a->timeline.size(); ++i) {
    EXPECT_EQ(a->timeline[i].queue, b->timeline[i].queue);
    EXPECT_EQ(a->timeline[i].ready, b->timeline[i].ready);
  }
}

TEST(ServingRun, UnknownPolicyAndGpuAreErrors) {
  ServingOptions o;
  ServingTrace t = phasedTrace({{10, 1}});
  auto policy = runServing(t, servingCatalog(), o, "nosuch");
  ASSERT_FALSE(policy);
  EXPECT_NE(policy.error().message.find("static-peak"), std::string::npos);
  o.fleet.gpuType = "K80";
  auto gpu = runServing(t, servingCatalog(), o, "static-peak");
  ASSERT_FALSE(gpu);
  EXPECT_NE(gpu.error().message.find("K80"), std::string::npos);
}

TEST(ServingRun, SharedTracesStaticPeakAndClairvoyant) {
  const std::string dir = testing::sharedDir() + "/data";
  const std::string azure = dir + "/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv";
  const std::string mooncake = dir + "/mooncake-fast25-traces/synthetic_trace.jsonl";
  if (!std::filesystem::exists(azure) || !std::filesystem::exists(mooncake)) {
    GTEST_SKIP() << "the serving traces are not under " << dir
                 << " (configure with -DTESSERA_SHARED_DIR=... to run this test)";
  }
  for (const auto& [path, format] : {std::pair{azure, ServingTraceFormat::kAzure},
                                     std::pair{mooncake, ServingTraceFormat::kMooncake}}) {
    auto t = readServingTrace(path, format);
    ASSERT_TRUE(t) << t.error().message;
    ServingOptions o;
    auto peak = runServing(*t, servingCatalog(), o, "static-peak");
    ASSERT_TRUE(peak);
    expectConserved(*peak);
    EXPECT_EQ(peak->requests, static_cast<int>(t->requests.size()));
    EXPECT_EQ(peak->coldStarts, 0);
    // The references on the first 10 minutes (a short search keeps sanitizer builds quick).
    ServingTrace head = *t;
    std::erase_if(head.requests,
                  [](const ServingRequest& r) { return r.arrivalUs >= 600'000'000; });
    o.clairvoyantMaxRuns = 8;
    auto headPeak = runServing(head, servingCatalog(), o, "static-peak");
    auto clairvoyant = runServing(head, servingCatalog(), o, "clairvoyant");
    ASSERT_TRUE(headPeak && clairvoyant);
    expectConserved(*clairvoyant);
    EXPECT_GE(clairvoyant->sloAttainment, o.sloTarget) << path;
    EXPECT_LE(clairvoyant->gpuHours, headPeak->gpuHours) << path;
    const auto perf = servingPerf(servingCatalog(), o);
    ASSERT_TRUE(perf);
    const ServingLowerBound bound = servingLowerBound(head, *perf, o, o.sloTarget);
    ASSERT_TRUE(bound.gpuHours) << bound.reason;
    EXPECT_LE(*bound.gpuHours, clairvoyant->gpuHours) << path;
    EXPECT_FALSE(peak->prefixCacheHitRate);
    if (format == ServingTraceFormat::kMooncake) {
      // Prefix caching: shared prompt blocks are prefilled once per replica.
      o.prefixCache = true;
      auto cached = runServing(*t, servingCatalog(), o, "static-peak");
      ASSERT_TRUE(cached);
      expectConserved(*cached);
      ASSERT_TRUE(cached->prefixCacheHitRate);
      EXPECT_GT(*cached->prefixCacheHitRate, 0.2);
      EXPECT_LT(cached->ttftP50Ms, peak->ttftP50Ms);
    }
  }
}

// --policy-arg's scale-down policy: one Percent policy in place of the configured ones, from
// the recommender's own where it names one, so setting only the period keeps tessera's 50 %.
TEST(ServingPolicySettings, ScaleDownPercentReplacesThePoliciesFromTheRecommendersOwn) {
  const auto onePercentPolicy = [](const scale::AutoscalerConfig& c, int value, int period) {
    ASSERT_EQ(c.behavior.scaleDown.policies.size(), 1u);
    EXPECT_EQ(c.behavior.scaleDown.policies[0].type, scale::PolicyType::kPercent);
    EXPECT_EQ(c.behavior.scaleDown.policies[0].value, value);
    EXPECT_EQ(c.behavior.scaleDown.policies[0].periodSeconds, period);
  };
  auto tessera = autoscalerConfigFor("tessera");
  ASSERT_TRUE(tessera);
  ASSERT_TRUE(overrideSetting(*tessera, "scaleDownPeriodSeconds", 120));
  onePercentPolicy(*tessera, 50, 120);
  auto hpa = autoscalerConfigFor("hpa");  // configured: one pod per 120 s
  ASSERT_TRUE(hpa);
  ASSERT_TRUE(overrideSetting(*hpa, "scaleDownPercent", 25));
  onePercentPolicy(*hpa, 25, 60);

  for (const auto& [key, value] : {std::pair{"scaleDownPercent", 0.0},
                                   {"scaleDownPercent", 101.0},
                                   {"scaleDownPercent", 50.5},
                                   {"scaleDownPeriodSeconds", 0.0},
                                   {"scaleDownPeriodSeconds", 1e300}}) {
    auto bad = overrideSetting(*tessera, key, value);
    ASSERT_FALSE(bad) << key << "=" << value;
    EXPECT_NE(bad.error().message.find(key), std::string::npos) << bad.error().message;
  }
}

}  // namespace
}  // namespace tessera::sim
