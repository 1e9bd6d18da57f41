// Kubernetes `behavior` semantics: stabilisation windows, Pods/Percent policies with period
// accounting, selectPolicy, min/max. Hand-computed against horizontal.go.

#include "scale/governor.h"

#include <gtest/gtest.h>

namespace tessera::scale {
namespace {

constexpr Millis kGovernorSec = 1000;

TEST(GovernorDefaults, FilledAsKubernetesDoes) {
  const Behavior b = withDefaults({});
  EXPECT_EQ(*b.scaleUp.stabilizationWindowSeconds, 0);
  EXPECT_EQ(*b.scaleDown.stabilizationWindowSeconds, 300);
  ASSERT_EQ(b.scaleUp.policies.size(), 2u);
  EXPECT_EQ(b.scaleUp.policies[0].type, PolicyType::kPods);
  EXPECT_EQ(b.scaleUp.policies[0].value, 4);
  EXPECT_EQ(b.scaleUp.policies[1].type, PolicyType::kPercent);
  EXPECT_EQ(b.scaleUp.policies[1].value, 100);
  EXPECT_EQ(b.scaleUp.policies[1].periodSeconds, 15);
  ASSERT_EQ(b.scaleDown.policies.size(), 1u);
  EXPECT_EQ(b.scaleDown.policies[0].type, PolicyType::kPercent);
  EXPECT_EQ(b.scaleDown.policies[0].value, 100);
  EXPECT_EQ(b.scaleUp.selectPolicy, SelectPolicy::kMax);
}

TEST(GovernorStabilization, ScaleDownWaitsForTheWindowMaximum) {
  Governor g({}, 1, 100);
  EXPECT_EQ(g.normalize(0, 10, 10).replicas, 10);
  // max(10 at t=0, 5) = 10 for the next 300 s
  const GovernorResult held = g.normalize(15 * kGovernorSec, 10, 5);
  EXPECT_EQ(held.replicas, 10);
  EXPECT_EQ(held.reason, "ScaleDownStabilized");
  EXPECT_EQ(g.normalize(299'999, 10, 5).replicas, 10);
  // at 300 s the t=0 sample is out (strictly after the cutoff counts): max(5, 5, 5) = 5
  EXPECT_EQ(g.normalize(300 * kGovernorSec, 10, 5).replicas, 5);
}

TEST(GovernorStabilization, ScaleDownGoesToTheWindowMaximumNotTheNewRecommendation) {
  Behavior b;
  b.scaleDown.stabilizationWindowSeconds = 60;
  Governor g(b, 1, 100);
  EXPECT_EQ(g.normalize(0, 10, 8).replicas, 8);         // alone in its window
  EXPECT_EQ(g.normalize(30 * kGovernorSec, 8, 6).replicas, 8);  // max(8, 6)
  EXPECT_EQ(g.normalize(45 * kGovernorSec, 8, 3).replicas, 8);  // max(8, 6, 3)
  EXPECT_EQ(g.normalize(61 * kGovernorSec, 8, 3).replicas, 6);  // max(6, 3, 3)
  EXPECT_EQ(g.normalize(91 * kGovernorSec, 6, 3).replicas, 3);  // max(3, 3)
}

TEST(GovernorStabilization, ScaleUpWindowTakesTheMinimum) {
  Behavior b;
  b.scaleUp.stabilizationWindowSeconds = 60;
  Governor g(b, 1, 100);
  EXPECT_EQ(g.normalize(0, 2, 2).replicas, 2);
  const GovernorResult held = g.normalize(15 * kGovernorSec, 2, 8);  // min(2, 8) = 2
  EXPECT_EQ(held.replicas, 2);
  EXPECT_EQ(held.reason, "ScaleUpStabilized");
  EXPECT_EQ(g.normalize(30 * kGovernorSec, 2, 8).replicas, 2);
  // at 61 s the 2 is out: min(8, 8, 8) = 8, rate-limited to max(2 + 4, 2 × 2) = 6
  const GovernorResult up = g.normalize(61 * kGovernorSec, 2, 8);
  EXPECT_EQ(up.replicas, 6);
  EXPECT_EQ(up.reason, "ScaleUpLimit");
}

TEST(GovernorStabilization, StabilizedCountStaysBetweenCurrentAndRecommendation) {
  Behavior b;
  b.scaleDown.stabilizationWindowSeconds = 60;
  Governor g(b, 1, 100);
  EXPECT_EQ(g.normalize(0, 4, 12).replicas, 8);  // up: max(4 + 4, 8) = 8
  // current 8, down window max(12, 5) = 12 ≥ current: stays 8 (never up from a down window)
  EXPECT_EQ(g.normalize(15 * kGovernorSec, 8, 5).replicas, 8);
}

TEST(GovernorRate, DefaultScaleUpIsMaxOfFourPodsAndDoubling) {
  Governor small({}, 1, 100);
  EXPECT_EQ(small.normalize(0, 2, 30).replicas, 6);  // Pods 2 + 4 = 6 > Percent 4
  Governor large({}, 1, 100);
  EXPECT_EQ(large.normalize(0, 10, 30).replicas, 20);  // Percent 20 > Pods 14
}

TEST(GovernorRate, SelectPolicyMinAndDisabled) {
  Behavior min;
  min.scaleUp.selectPolicy = SelectPolicy::kMin;
  Governor gMin(min, 1, 100);
  EXPECT_EQ(gMin.normalize(0, 10, 30).replicas, 14);  // min(Pods 14, Percent 20)
  Governor gMin2(min, 1, 100);
  EXPECT_EQ(gMin2.normalize(0, 2, 30).replicas, 4);  // min(Pods 6, Percent 4)

  Behavior off;
  off.scaleUp.selectPolicy = SelectPolicy::kDisabled;
  off.scaleDown.selectPolicy = SelectPolicy::kDisabled;
  off.scaleDown.stabilizationWindowSeconds = 0;
  Governor gOff(off, 1, 100);
  EXPECT_EQ(gOff.normalize(0, 10, 30).replicas, 10);
  EXPECT_EQ(gOff.normalize(15 * kGovernorSec, 10, 2).replicas, 10);
}

TEST(GovernorRate, PercentUpRoundsUpPercentDownTruncates) {
  Behavior b;
  b.scaleUp.policies = {{PolicyType::kPercent, 50, 15}};
  b.scaleDown.policies = {{PolicyType::kPercent, 50, 15}};
  b.scaleDown.stabilizationWindowSeconds = 0;
  Governor up(b, 1, 100);
  EXPECT_EQ(up.normalize(0, 3, 30).replicas, 5);  // ceil(3 × 1.5) = ceil(4.5)
  Governor down(b, 1, 100);
  EXPECT_EQ(down.normalize(0, 5, 1).replicas, 2);  // trunc(5 × 0.5) = trunc(2.5)
}

TEST(GovernorRate, ScaleDownPodsVersusPercent) {
  Behavior b;
  b.scaleDown.stabilizationWindowSeconds = 0;
  b.scaleDown.policies = {{PolicyType::kPods, 1, 15}, {PolicyType::kPercent, 50, 15}};
  Governor maxChange(b, 1, 100);
  EXPECT_EQ(maxChange.normalize(0, 8, 1).replicas, 4);  // max change: min(8 - 1, 4) = 4
  b.scaleDown.selectPolicy = SelectPolicy::kMin;
  Governor minChange(b, 1, 100);
  EXPECT_EQ(minChange.normalize(0, 8, 1).replicas, 7);  // min change: max(7, 4) = 7
}

TEST(GovernorRate, PeriodCountsRecordedScaleEvents) {
  Behavior b;
  b.scaleUp.policies = {{PolicyType::kPods, 4, 60}};
  Governor g(b, 1, 100);
  EXPECT_EQ(g.normalize(0, 2, 20).replicas, 6);  // +4 at t=0
  // 15 s later: period start = 6 − 4 = 2, limit 2 + 4 = 6: no more room
  EXPECT_EQ(g.normalize(15 * kGovernorSec, 6, 20).replicas, 6);
  EXPECT_EQ(g.normalize(59 * kGovernorSec, 6, 20).replicas, 6);
  // at 60 s the t=0 event left the period: 6 + 4 = 10
  EXPECT_EQ(g.normalize(60 * kGovernorSec, 6, 20).replicas, 10);
  // and at 75 s: start = 10 − 4 = 6 → 10 again
  EXPECT_EQ(g.normalize(75 * kGovernorSec, 10, 20).replicas, 10);
}

TEST(GovernorRate, PercentPeriodAccounting) {
  Behavior b;
  b.scaleUp.policies = {{PolicyType::kPercent, 100, 60}};
  Governor g(b, 1, 100);
  EXPECT_EQ(g.normalize(0, 2, 50).replicas, 4);
  EXPECT_EQ(g.normalize(15 * kGovernorSec, 4, 50).replicas, 4);  // start 2 → ceil(2 × 2) = 4
  EXPECT_EQ(g.normalize(61 * kGovernorSec, 4, 50).replicas, 8);
}

TEST(GovernorRate, PeriodStartCountsBothDirections) {
  // Upstream counts replicas added and removed in the period: up 4 → 8 at t=0, then a
  // scale-down 5 s later under Pods 2 / 15 s starts from 8 − 4 = 4, so the floor is 2.
  Behavior b;
  b.scaleDown.stabilizationWindowSeconds = 0;
  b.scaleDown.policies = {{PolicyType::kPods, 2, 15}};
  Governor g(b, 1, 100);
  EXPECT_EQ(g.normalize(0, 4, 8).replicas, 8);
  EXPECT_EQ(g.normalize(5 * kGovernorSec, 8, 1).replicas, 2);
}

TEST(GovernorClamp, MinAndMax) {
  Governor g({}, 2, 10);
  const GovernorResult high = g.normalize(0, 8, 50);
  EXPECT_EQ(high.replicas, 10);
  EXPECT_EQ(high.reason, "TooManyReplicas");
  Behavior b;
  b.scaleDown.stabilizationWindowSeconds = 0;
  Governor h(b, 2, 10);
  const GovernorResult low = h.normalize(0, 5, 0);
  EXPECT_EQ(low.replicas, 2);
  EXPECT_EQ(low.reason, "TooFewReplicas");
}

TEST(GovernorClamp, CurrentOutsideBoundsGoesStraightThere) {
  Behavior off;
  off.scaleUp.selectPolicy = SelectPolicy::kDisabled;
  off.scaleDown.selectPolicy = SelectPolicy::kDisabled;
  Governor g(off, 3, 10);
  EXPECT_EQ(g.normalize(0, 14, 14).replicas, 10);  // no rate limit, no window
  EXPECT_EQ(g.normalize(15 * kGovernorSec, 0, 0).replicas, 3);
}

TEST(GovernorValidate, NamesTheField) {
  Behavior b;
  b.scaleDown.stabilizationWindowSeconds = -1;
  auto r = validateBehavior(b);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("scaleDown.stabilizationWindowSeconds"), std::string::npos);
  Behavior p;
  p.scaleUp.policies = {{PolicyType::kPods, 0, 15}};
  auto q = validateBehavior(p);
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("scaleUp.policies[0].value"), std::string::npos);
  Behavior period;
  period.scaleDown.policies = {{PolicyType::kPercent, 10, 0}};
  auto s = validateBehavior(period);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("periodSeconds"), std::string::npos);
}

}  // namespace
}  // namespace tessera::scale
