// Knative KPA: stable and panic windows, the panic hold and its exit, rate clamps.

#include <gtest/gtest.h>

#include "scale/autoscaler.h"
#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::at;
using testing::Rep;

constexpr Millis kKpaSec = 1000;

std::unique_ptr<Recommender> kpa(const std::vector<std::pair<std::string, double>>& args = {
                                     {"containerConcurrency", 10}}) {
  auto r = makeRecommender("kpa", args);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return std::move(*r);
}

// n ready replicas each with `concurrency` in flight (running only).
std::vector<ReplicaSignals> busy(int n, double concurrency) {
  std::vector<ReplicaSignals> out;
  for (int i = 0; i < n; ++i) out.push_back(Rep("r" + std::to_string(i)).running(concurrency));
  return out;
}

TEST(Kpa, StableCountIsTotalOverTarget) {
  auto r = kpa();
  // target 10 × 0.7 = 7; total 3 × 7 = 21 → 3
  EXPECT_EQ(r->recommend(at(0, busy(3, 7)), 3).replicas, 3);
  // running + waiting both count: 3 × (5 + 4) = 27, mean over (21, 27) = 24 → ceil(3.43) = 4
  std::vector<ReplicaSignals> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(Rep("q" + std::to_string(i)).running(5).waiting(4));
  EXPECT_EQ(r->recommend(at(2 * kKpaSec, queued), 3).replicas, 4);
}

TEST(Kpa, PanicsHoldsThePeakAndExitsAfterAStableWindow) {
  auto r = kpa();
  EXPECT_EQ(r->recommend(at(0, busy(2, 7)), 2).replicas, 2);  // total 14 → 2
  // t=30 s: total 42. stable mean (14 + 42) / 2 = 28 → 4; panic window (6 s) holds only 42 → 6;
  // 6 / 2 ready = 3 ≥ 2: panic, max(4, 6) = 6
  const Recommendation burst = r->recommend(at(30 * kKpaSec, busy(2, 21)), 2);
  EXPECT_EQ(burst.replicas, 6);
  EXPECT_NE(burst.reason.find("panic"), std::string::npos);
  // t=32 s, 6 ready at total 14: stable (14 + 42 + 14) / 3 → 4, panic (42 + 14) / 2 = 28 → 4
  // (4 / 6 < 2: not over), still in panic: never below the peak 6
  EXPECT_EQ(r->recommend(at(32 * kKpaSec, busy(6, 14.0 / 6)), 6).replicas, 6);
  // t=90 s: 30 s + 60 s is not yet before now: still 6
  EXPECT_EQ(r->recommend(at(90 * kKpaSec, busy(6, 14.0 / 6)), 6).replicas, 6);
  // t=91 s: panic over. Stable window (31, 91]: 14, 14, 14 → 2, but at most halve per tick:
  // floor(6 / 2) = 3
  EXPECT_EQ(r->recommend(at(91 * kKpaSec, busy(6, 14.0 / 6)), 6).replicas, 3);
}

TEST(Kpa, NoPanicBelowThreshold) {
  auto r = kpa();
  EXPECT_EQ(r->recommend(at(0, busy(4, 7)), 4).replicas, 4);
  // total 42 → panic 6, 6 / 4 = 1.5 < 2: no panic; stable (28 + 42) / 2 = 35 → 5
  EXPECT_EQ(r->recommend(at(30 * kKpaSec, busy(4, 10.5)), 4).replicas, 5);
  // back to 28 at t=40: stable (28 + 42 + 28) / 3 = 32.67 → 5; no panic hold
  EXPECT_EQ(r->recommend(at(40 * kKpaSec, busy(4, 7)), 5).replicas, 5);
  // t=71: the t=0 sample is out of the window: (42 + 28 + 28) / 3 → 5
  EXPECT_EQ(r->recommend(at(71 * kKpaSec, busy(5, 5.6)), 5).replicas, 5);
  // t=101: (28, 28) → 4
  EXPECT_EQ(r->recommend(at(101 * kKpaSec, busy(5, 5.6)), 5).replicas, 4);
}

TEST(Kpa, ScaleUpRateAndDefaultConcurrency) {
  auto r = kpa({{"maxScaleUpRate", 2}});
  // unknown containerConcurrency → 100 × 0.7 = 70; total 2 × 700 = 1400 → 20, capped at
  // ceil(2 × 2 ready) = 4
  EXPECT_EQ(r->recommend(at(0, busy(2, 700)), 2).replicas, 4);
  // from the replicas' maxConcurrency: 2 × 20 × 0.7 = 14 per replica; total 28 → 2
  auto m = kpa({});
  EXPECT_EQ(m->recommend(at(0, {Rep("a").running(14).maxConcurrency(20),
                                Rep("b").running(14).maxConcurrency(20)}),
                         2)
                .replicas,
            2);
}

TEST(Kpa, LoadingAndDrainingReplicasAreNotReady) {
  auto r = kpa();
  // 1 ready at 14 (+ a loading and a draining replica with in-flight requests not counted):
  // dppc 2, 2 / 1 ≥ 2 → panic, 2
  EXPECT_EQ(r->recommend(at(0, {Rep("a").running(14), Rep("l").loading().running(30),
                                Rep("d").draining().running(50)}),
                         3)
                .replicas,
            2);
}

TEST(Kpa, ScaleDownDelayKeepsTheMaximum) {
  auto r = kpa(
      {{"containerConcurrency", 10}, {"scaleDownDelaySeconds", 30}, {"stableWindowSeconds", 6}});
  EXPECT_EQ(r->recommend(at(0, busy(4, 7)), 4).replicas, 4);
  EXPECT_EQ(r->recommend(at(10 * kKpaSec, busy(4, 3.5)), 4).replicas, 4);  // 2, held at 4
  EXPECT_EQ(r->recommend(at(31 * kKpaSec, busy(4, 3.5)), 4).replicas, 2);
}

TEST(Kpa, BufferedRequestsScaleFromZero) {
  auto r = kpa();
  DeploymentSignals s = at(0, {});
  s.bufferedRequests = 14;
  EXPECT_EQ(r->recommend(s, 0).replicas, 2);  // 14 / 7, ready counted as 1
}

TEST(Kpa, NoSamplesKeepCurrent) {
  auto r = kpa();
  EXPECT_EQ(r->recommend(at(0, {Rep("a"), Rep("l").loading()}), 2).replicas, 2);
}

TEST(Kpa, ArgumentsAreValidated) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, double>>{{"panicThreshold", 0},
                                                   {"maxScaleDownRate", 0.5},
                                                   {"panicWindowPercentage", 150},
                                                   {"stableWindowSeconds", -60},
                                                   {"targetUtilization", 0},
                                                   {"panicWindow", 6}}) {
    auto r = makeRecommender("kpa", {{key, value}});
    ASSERT_FALSE(r) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace tessera::scale
