// The whole autoscaler: config validation, the cold-start guard in a burst, warm pool,
// victims, placement hint, draining replicas never counted.

#include "scale/autoscaler.h"

#include <gtest/gtest.h>

#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::Rep;

constexpr Millis kAutoscalerSec = 1000;

std::unique_ptr<Autoscaler> create(const AutoscalerConfig& config) {
  auto a = Autoscaler::create(config);
  EXPECT_TRUE(a.has_value()) << (a ? "" : a.error().message);
  return std::move(*a);
}

std::string createError(const AutoscalerConfig& config) {
  auto a = Autoscaler::create(config);
  return a ? "" : a.error().message;
}

AutoscalerConfig hpaConfig() {
  AutoscalerConfig c;
  c.recommender = "hpa";
  c.args = {{"queuePerReplica", 5}};
  c.minReplicas = 1;
  c.maxReplicas = 40;
  c.behavior.scaleUp.policies = {{PolicyType::kPods, 100, 15}};
  c.behavior.scaleDown.stabilizationWindowSeconds = 0;
  return c;
}

DeploymentSignals deployment(Millis now, int ready, double waitingEach, int loading,
                             std::optional<double> rate) {
  DeploymentSignals s;
  s.nowMs = now;
  for (int i = 0; i < ready; ++i) {
    s.replicas.push_back(Rep("r" + std::to_string(i)).waiting(waitingEach).created(i));
  }
  for (int i = 0; i < loading; ++i) {
    s.replicas.push_back(
        Rep("l" + std::to_string(i)).loading(60 * kAutoscalerSec).created(1000 + i));
  }
  s.arrivalRatePerSec = rate;
  return s;
}

TEST(ScalingPolicyType, SpelledAsTheHpaSpellsItBothWays) {
  for (PolicyType t : {PolicyType::kPods, PolicyType::kPercent}) {
    EXPECT_EQ(parsePolicyType(policyTypeName(t)), t);
  }
  EXPECT_EQ(policyTypeName(PolicyType::kPods), "Pods");
  EXPECT_EQ(policyTypeName(PolicyType::kPercent), "Percent");
  // The Kubernetes API is case-sensitive.
  EXPECT_EQ(parsePolicyType("pods"), std::nullopt);
  EXPECT_EQ(parsePolicyType("percent"), std::nullopt);
  EXPECT_EQ(parsePolicyType(""), std::nullopt);
}

TEST(AutoscalerCreate, ValidatesWithClearErrors) {
  AutoscalerConfig c;
  EXPECT_EQ(createError(c), "");  // the defaults: tessera, 1..10
  c.minReplicas = 5;
  c.maxReplicas = 3;
  EXPECT_NE(createError(c).find("minReplicas = 5 is above maxReplicas = 3"), std::string::npos);
  c = {};
  c.minReplicas = -1;
  EXPECT_NE(createError(c).find("minReplicas"), std::string::npos);
  c = {};
  c.maxReplicas = 0;
  EXPECT_NE(createError(c).find("maxReplicas"), std::string::npos);
  c = {};
  c.warmReplicas = -2;
  EXPECT_NE(createError(c).find("warmReplicas"), std::string::npos);
  c = {};
  c.syncPeriodSeconds = 0;
  EXPECT_NE(createError(c).find("syncPeriodSeconds"), std::string::npos);
  c = {};
  c.behavior.scaleUp.stabilizationWindowSeconds = -5;
  EXPECT_NE(createError(c).find("scaleUp.stabilizationWindowSeconds"), std::string::npos);
  c = {};
  c.behavior.scaleDown.policies = {{PolicyType::kPercent, 10, 60}, {PolicyType::kPods, -1, 60}};
  EXPECT_NE(createError(c).find("scaleDown.policies[1].value"), std::string::npos);
  c = {};
  c.recommender = "vpa";
  EXPECT_NE(createError(c).find("unknown recommender 'vpa'"), std::string::npos);
  c = {};
  c.args = {{"runningPerReplica", 5}};  // an hpa argument given to tessera
  EXPECT_NE(createError(c).find("unknown tessera argument 'runningPerReplica'"), std::string::npos);
  c.minReplicas = 0;  // scale to zero is allowed
  c.args = {};
  EXPECT_EQ(createError(c), "");
}

TEST(AutoscalerColdStart, BurstAddsOnceWhileReplicasLoad) {
  auto a = create(hpaConfig());
  // 2 ready with 20 waiting each: ratio 4 → 8
  const Decision first = a->evaluate(deployment(0, 2, 20, 0, 10));
  EXPECT_EQ(first.desiredReplicas, 8);
  EXPECT_EQ(first.recommendedReplicas, 8);
  // 15 s later the queue doubled while 6 load. HPA alone: 80 / 8 replicas / 5 = 2 → 16.
  // Same arrival rate: the loading replicas cover it, no more.
  const Decision during = a->evaluate(deployment(15 * kAutoscalerSec, 2, 40, 6, 10));
  EXPECT_EQ(during.recommendedReplicas, 16);
  EXPECT_EQ(during.desiredReplicas, 8);
  EXPECT_NE(during.reason.find("cold start"), std::string::npos) << during.reason;
  EXPECT_EQ(a->evaluate(deployment(30 * kAutoscalerSec, 2, 60, 6, 10.5)).desiredReplicas,
            8);  // +5 %
  // Demand doubled: the 8 asked for grow to ceil(8 × 2) = 16 (HPA wants 24)
  const Decision grown = a->evaluate(deployment(45 * kAutoscalerSec, 2, 60, 6, 20));
  EXPECT_EQ(grown.recommendedReplicas, 24);
  EXPECT_EQ(grown.desiredReplicas, 16);
}

TEST(AutoscalerColdStart, WithoutTheGuardTheBacklogCascades) {
  AutoscalerConfig c = hpaConfig();
  c.coldStartAware = false;
  auto a = create(c);
  EXPECT_EQ(a->evaluate(deployment(0, 2, 20, 0, 10)).desiredReplicas, 8);
  EXPECT_EQ(a->evaluate(deployment(15 * kAutoscalerSec, 2, 40, 6, 10)).desiredReplicas, 16);
}

TEST(AutoscalerColdStart, WithoutRatesTheRecommendationIsTheDemand) {
  auto a = create(hpaConfig());
  EXPECT_EQ(a->evaluate(deployment(0, 2, 20, 0, std::nullopt)).desiredReplicas, 8);
  // HPA wants 40 / 8 / 5 → ceil(1 × 8) = 8: within what is loading
  EXPECT_EQ(a->evaluate(deployment(15 * kAutoscalerSec, 2, 20, 6, std::nullopt)).desiredReplicas,
            8);
  // HPA wants 16 > 8 × 1.1: taken as more demand
  EXPECT_EQ(a->evaluate(deployment(30 * kAutoscalerSec, 2, 40, 6, std::nullopt)).desiredReplicas,
            16);
}

TEST(AutoscalerColdStart, GuardEndsWhenNothingLoads) {
  auto a = create(hpaConfig());
  EXPECT_EQ(a->evaluate(deployment(0, 2, 20, 0, 10)).desiredReplicas, 8);
  // all 8 ready now and still queueing: an ordinary scale-up, 8 × 3 = 24
  EXPECT_EQ(a->evaluate(deployment(75 * kAutoscalerSec, 8, 15, 0, 10)).desiredReplicas, 24);
}

TEST(AutoscalerColdStart, TesseraCountsLoadingItself) {
  AutoscalerConfig c;
  c.maxReplicas = 20;
  auto a = create(c);
  auto signals = [](Millis now, double waiting, int loading) {
    DeploymentSignals s;
    s.nowMs = now;
    for (int i = 0; i < 2; ++i) {
      s.replicas.push_back(
          Rep("r" + std::to_string(i)).maxConcurrency(10).running(10).waiting(waiting));
    }
    for (int i = 0; i < loading; ++i) {
      s.replicas.push_back(
          Rep("l" + std::to_string(i)).maxConcurrency(10).created(0).loading(60 * kAutoscalerSec));
    }
    s.arrivalRatePerSec = 12;
    s.meanServiceMs = 2000;
    return s;
  };
  // as in tessera_test: 4, then nothing more while 2 load
  EXPECT_EQ(a->evaluate(signals(0, 5, 0)).desiredReplicas, 4);
  EXPECT_EQ(a->evaluate(signals(15 * kAutoscalerSec, 20, 2)).desiredReplicas, 4);
  EXPECT_EQ(a->evaluate(signals(30 * kAutoscalerSec, 35, 2)).desiredReplicas, 4);
}

TEST(AutoscalerWarmPool, StandbyBeyondDesiredWithinMax) {
  AutoscalerConfig c = hpaConfig();
  c.maxReplicas = 10;
  c.warmReplicas = 2;
  auto a = create(c);
  const Decision d = a->evaluate(deployment(0, 3, 5, 0, std::nullopt));  // ratio 1: 3
  EXPECT_EQ(d.desiredReplicas, 3);
  EXPECT_EQ(d.warmReplicas, 2);
  EXPECT_EQ(a->evaluate(deployment(15 * kAutoscalerSec, 3, 15, 0, std::nullopt)).warmReplicas,
            1);  // 9
  EXPECT_EQ(a->evaluate(deployment(30 * kAutoscalerSec, 9, 20, 0, std::nullopt)).warmReplicas,
            0);  // 10
  AutoscalerConfig none = hpaConfig();
  EXPECT_EQ(create(none)->evaluate(deployment(0, 3, 5, 0, std::nullopt)).warmReplicas, 0);
}

TEST(AutoscalerScaleDown, VictimsInOrder) {
  auto a = create(hpaConfig());
  DeploymentSignals s;
  s.nowMs = 0;
  s.replicas = {Rep("a").waiting(2).running(4).created(1), Rep("b").waiting(1).created(2),
                Rep("c").waiting(1).created(3), Rep("d").waiting(0).priority(1).created(4),
                Rep("gone").draining().created(9)};
  // 4 serving, mean waiting 1 → ceil(0.2 × 4) = 1: three leave, never the draining one
  const Decision d = a->evaluate(s);
  EXPECT_EQ(d.desiredReplicas, 1);
  EXPECT_EQ(d.victims, (std::vector<std::string>{"c", "b", "a"}));
}

TEST(AutoscalerScaleDown, DefaultWindowHoldsFiveMinutes) {
  AutoscalerConfig c = hpaConfig();
  c.behavior = {};
  auto a = create(c);
  EXPECT_EQ(a->evaluate(deployment(0, 4, 5, 0, std::nullopt)).desiredReplicas, 4);
  const Decision held = a->evaluate(deployment(60 * kAutoscalerSec, 4, 1, 0, std::nullopt));
  EXPECT_EQ(held.desiredReplicas, 4);
  EXPECT_TRUE(held.victims.empty());
  EXPECT_EQ(a->evaluate(deployment(300 * kAutoscalerSec, 4, 1, 0, std::nullopt)).desiredReplicas,
            1);
}

// tessera's recommender names its own scale-down policy: down to half the replicas per
// minute at most (rounded down), so each step is measured at the load it made before the next; a
// configured policy replaces it.
TEST(AutoscalerScaleDown, TesseraHalvesAtMostPerMinuteUnlessConfigured) {
  AutoscalerConfig c;
  c.recommender = "tessera";
  c.maxReplicas = 40;
  c.behavior.scaleDown.stabilizationWindowSeconds = 0;
  auto a = create(c);
  // Nothing running or waiting: the recommender asks for none, minReplicas keeps one.
  const Decision first = a->evaluate(deployment(0, 14, 0, 0, std::nullopt));
  EXPECT_EQ(first.recommendedReplicas, 0);
  EXPECT_EQ(first.desiredReplicas, 7);
  EXPECT_EQ(first.victims.size(), 7u);
  EXPECT_EQ(a->evaluate(deployment(45 * kAutoscalerSec, 7, 0, 0, std::nullopt)).desiredReplicas, 7);
  EXPECT_EQ(a->evaluate(deployment(61 * kAutoscalerSec, 7, 0, 0, std::nullopt)).desiredReplicas, 3);
  EXPECT_EQ(a->evaluate(deployment(122 * kAutoscalerSec, 3, 0, 0, std::nullopt)).desiredReplicas,
            1);

  c.behavior.scaleDown.policies = {{PolicyType::kPercent, 100, 15}};
  EXPECT_EQ(create(c)->evaluate(deployment(0, 14, 0, 0, std::nullopt)).desiredReplicas, 1);
}

// tessera's own scale-down window is the time a replica given up takes to come back (a 60-s
// signal window and the default 60-s cold start) where the configuration sets none (its burst
// headroom holds what a dip needs); a configured one, HPA's 300 s here, holds longer.
TEST(AutoscalerScaleDown, TesseraWindowIsTwoMinutesUnlessConfigured) {
  AutoscalerConfig c;
  c.recommender = "tessera";
  c.maxReplicas = 40;
  c.behavior.scaleDown.policies = {{PolicyType::kPercent, 100, 15}};  // no rate limit in the way
  auto a = create(c);
  // No rates: one slot per queued request, at 0.8 of the one slot a replica is known to hold:
  // 4 waiting → 5.
  EXPECT_EQ(a->evaluate(deployment(0, 4, 1, 0, std::nullopt)).desiredReplicas, 5);
  EXPECT_EQ(a->evaluate(deployment(90 * kAutoscalerSec, 5, 0, 0, std::nullopt)).desiredReplicas, 5);
  EXPECT_EQ(a->evaluate(deployment(121 * kAutoscalerSec, 5, 0, 0, std::nullopt)).desiredReplicas,
            1);

  c.behavior.scaleDown.stabilizationWindowSeconds = 300;
  a = create(c);
  a->evaluate(deployment(0, 4, 1, 0, std::nullopt));
  EXPECT_EQ(a->evaluate(deployment(121 * kAutoscalerSec, 5, 0, 0, std::nullopt)).desiredReplicas,
            5);
}

// `rate` requests/s of 10 s each on `ready` replicas of 50 slots, for tessera: 20/s is 200 in
// flight, 5 replicas at 0.8 of their slots; 2/s is 20, one replica.
DeploymentSignals flowing(Millis now, int ready, double rate) {
  DeploymentSignals s;
  s.nowMs = now;
  for (int i = 0; i < ready; ++i) {
    s.replicas.push_back(
        Rep("r" + std::to_string(i)).running(rate * 10 / ready).maxConcurrency(50).created(i));
  }
  s.arrivalRatePerSec = rate;
  s.meanServiceMs = 10000;
  return s;
}

AutoscalerConfig tesseraWithoutRateLimit() {
  AutoscalerConfig c;
  c.recommender = "tessera";
  c.maxReplicas = 40;
  c.behavior.scaleDown.policies = {{PolicyType::kPercent, 100, 15}};  // no rate limit in the way
  return c;
}

// The first call sees a replica that loads in 30 s; then 5 ready at 20/s every minute from
// `from` to `to`. Returns the time of the last of those calls.
Millis steadyFlow(Autoscaler& a, Millis from, Millis to) {
  if (from == 0) {
    DeploymentSignals first = flowing(0, 4, 20);
    first.replicas.push_back(Rep("l0").loading(30 * kAutoscalerSec).created(0));
    EXPECT_EQ(a.evaluate(first).desiredReplicas, 5);
    from = 60 * kAutoscalerSec;
  }
  Millis now = from;
  for (; now <= to; now += 60 * kAutoscalerSec) {
    EXPECT_EQ(a.evaluate(flowing(now, 5, 20)).desiredReplicas, 5);
  }
  return now - 60 * kAutoscalerSec;
}

// The window is the time a replica given up takes to come back once a rise shows: 60 s plus a
// cold start. While tessera's burst history fills (its first 15 minutes, from a signal window
// after the first call with rates) the default 60-s cold start, 120 s; once it is full, the load
// time it saw (30 s here), 90 s: the same fall 91 s after the last high recommendation is held
// early on and followed later.
TEST(AutoscalerScaleDown, TesseraWindowFollowsTheMeasuredColdStartOnceItsBurstHistoryIsFull) {
  for (const Millis fallAt : {300 * kAutoscalerSec, 960 * kAutoscalerSec}) {
    SCOPED_TRACE(fallAt);
    auto a = create(tesseraWithoutRateLimit());
    const Millis lastHigh = steadyFlow(*a, 0, fallAt);
    EXPECT_EQ(a->evaluate(flowing(lastHigh + 15 * kAutoscalerSec, 5, 2)).desiredReplicas, 5);
    const int at91 = a->evaluate(flowing(lastHigh + 91 * kAutoscalerSec, 5, 2)).desiredReplicas;
    if (fallAt < 960 * kAutoscalerSec) {
      EXPECT_EQ(at91, 5);  // 120 s: the history is not full yet
      EXPECT_EQ(a->evaluate(flowing(lastHigh + 121 * kAutoscalerSec, 5, 2)).desiredReplicas, 1);
    } else {
      EXPECT_EQ(at91, 1);  // 60 s + the 30-s load time
    }
  }
}

// A gap longer than the burst history (20 minutes without a call with rates) empties it: the
// window is 120 s again until 15 more minutes of history have been seen.
TEST(AutoscalerScaleDown, TesseraWindowIsTwoMinutesAgainAfterAGapEmptiesTheBurstHistory) {
  auto a = create(tesseraWithoutRateLimit());
  steadyFlow(*a, 0, 960 * kAutoscalerSec);  // full: 90 s from here
  const Millis resumed = (960 + 20 * 60) * kAutoscalerSec;
  const Millis lastHigh = steadyFlow(*a, resumed, resumed + 120 * kAutoscalerSec);
  EXPECT_EQ(a->evaluate(flowing(lastHigh + 15 * kAutoscalerSec, 5, 2)).desiredReplicas, 5);
  EXPECT_EQ(a->evaluate(flowing(lastHigh + 91 * kAutoscalerSec, 5, 2)).desiredReplicas, 5);
  EXPECT_EQ(a->evaluate(flowing(lastHigh + 121 * kAutoscalerSec, 5, 2)).desiredReplicas, 1);
}

TEST(AutoscalerScaleDown, DrainingReplicasAreNeverCapacity) {
  auto a = create(hpaConfig());
  DeploymentSignals s = deployment(0, 2, 10, 0, std::nullopt);
  for (int i = 0; i < 3; ++i) {
    s.replicas.push_back(Rep("d" + std::to_string(i)).draining().waiting(0).running(0));
  }
  // current is 2 (not 5); waiting 10 per ready replica → 4
  const Decision d = a->evaluate(s);
  EXPECT_EQ(d.desiredReplicas, 4);
  EXPECT_TRUE(d.victims.empty());
}

TEST(AutoscalerClamp, MinMaxAndScaleFromZero) {
  AutoscalerConfig c = hpaConfig();
  c.minReplicas = 2;
  c.maxReplicas = 5;
  auto a = create(c);
  EXPECT_EQ(a->evaluate(deployment(0, 2, 50, 0, std::nullopt)).desiredReplicas, 5);
  auto b = create(c);
  EXPECT_EQ(b->evaluate(deployment(0, 0, 0, 0, std::nullopt)).desiredReplicas, 2);
}

}  // namespace
}  // namespace tessera::scale
