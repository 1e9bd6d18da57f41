// The HPA replica arithmetic, case by case against hand-computed counts
// (replica_calculator.go: calcPlainMetricReplicas; horizontal.go: computeReplicasForMetrics).

#include <gtest/gtest.h>

#include "scale/autoscaler.h"
#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::at;
using testing::readyWithWaiting;
using testing::Rep;

std::unique_ptr<Recommender> hpa(const std::vector<std::pair<std::string, double>>& args) {
  auto r = makeRecommender("hpa", args);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return std::move(*r);
}

int recommend(Recommender& r, std::vector<ReplicaSignals> replicas, int current) {
  return r.recommend(at(0, std::move(replicas)), current).replicas;
}

TEST(Hpa, RatioTimesReadyRoundedUp) {
  auto r = hpa({{"queuePerReplica", 5}});
  // mean waiting (10 + 14) / 2 = 12, ratio 2.4, ceil(2.4 × 2) = 5
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(10), Rep("b").waiting(14)}, 2), 5);
  // mean 1, ratio 0.2, ceil(0.2 × 4) = 1
  EXPECT_EQ(recommend(*r, readyWithWaiting(4, 1), 4), 1);
}

TEST(Hpa, DefaultMetricIsQueueFivePerReplica) {
  auto r = hpa({});
  EXPECT_EQ(recommend(*r, readyWithWaiting(2, 10), 2), 4);  // ratio 2
}

TEST(Hpa, ToleranceBandAboveTarget) {
  auto r = hpa({{"queuePerReplica", 5}});
  // mean 5.5: ratio 1.1 is inside the band, no change (otherwise ceil(3.3) = 4)
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(5), Rep("b").waiting(5), Rep("c").waiting(6.5)}, 3), 3);
  // mean 5.6: ratio 1.12, ceil(3.36) = 4
  EXPECT_EQ(recommend(*r, readyWithWaiting(3, 5.6), 3), 4);
}

TEST(Hpa, ToleranceBandBelowTarget) {
  auto r = hpa({{"queuePerReplica", 5}});
  // mean 4.5: ratio 0.9 inside the band (otherwise ceil(9.0) = 9)
  EXPECT_EQ(recommend(*r, readyWithWaiting(10, 4.5), 10), 10);
  // mean 4.4: ratio 0.88, ceil(8.8) = 9
  EXPECT_EQ(recommend(*r, readyWithWaiting(10, 4.4), 10), 9);
}

TEST(Hpa, PerDirectionTolerance) {
  auto r = hpa({{"queuePerReplica", 5}, {"scaleUpTolerance", 0.2}, {"scaleDownTolerance", 0.05}});
  // ratio 1.18 <= 1.2: no change (with 0.1 it would be ceil(23.6) = 24)
  EXPECT_EQ(recommend(*r, readyWithWaiting(20, 5.9), 20), 20);
  // ratio 0.94 < 0.95: ceil(0.94 × 20) = 19 (with 0.1 it would stay 20)
  EXPECT_EQ(recommend(*r, readyWithWaiting(20, 4.7), 20), 19);
}

TEST(Hpa, MissingMetricsOnScaleDownCountAsTarget) {
  auto r = hpa({{"queuePerReplica", 5}});
  // 3 samples of 1 (ratio 0.2) and one ready replica without a sample, counted at the target:
  // (3 + 5) / 4 / 5 = 0.4, ceil(0.4 × 4) = 2 (ignoring it would give ceil(0.2 × 3) = 1)
  EXPECT_EQ(
      recommend(*r, {Rep("a").waiting(1), Rep("b").waiting(1), Rep("c").waiting(1), Rep("d")}, 4),
      2);
  // 1 sample of 4 and 3 missing: (4 + 15) / 4 / 5 = 0.95, inside the band: no change
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(4), Rep("b"), Rep("c"), Rep("d")}, 4), 4);
}

TEST(Hpa, MissingMetricsOnScaleUpCountAsZero) {
  auto r = hpa({{"queuePerReplica", 5}});
  // 2 samples of 15 (ratio 3) and 1 missing at 0: 30 / 3 / 5 = 2, ceil(2 × 3) = 6
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(15), Rep("b").waiting(15), Rep("c")}, 3), 6);
  // 2 samples of 8.1 (ratio 1.62) and 1 missing: 16.2 / 3 / 5 = 1.08, inside the band: 3
  // (the samples alone would give ceil(3.24) = 4)
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(8.1), Rep("b").waiting(8.1), Rep("c")}, 3), 3);
  // 1 sample of 6 (ratio 1.2) and 3 missing: 6 / 4 / 5 = 0.3 flips the direction: no change
  // (the sample alone would give ceil(1.2) = 2, a scale-down)
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(6), Rep("b"), Rep("c"), Rep("d")}, 4), 4);
}

TEST(Hpa, LoadingReplicasCountZeroOnScaleUp) {
  auto r = hpa({{"queuePerReplica", 5}});
  const ReplicaSignals l1 = Rep("l1").loading(60'000);
  const ReplicaSignals l2 = Rep("l2").loading(60'000).waiting(100);  // a loading sample is ignored
  // 2 ready at 11 (ratio 2.2) and 2 loading at 0: 22 / 4 / 5 = 1.1, inside the band: 4
  // (without them: ceil(4.4) = 5)
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(11), Rep("b").waiting(11), l1, l2}, 4), 4);
  // 2 ready at 15 (ratio 3) and 2 loading: 30 / 4 / 5 = 1.5, ceil(6) = 6
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(15), Rep("b").waiting(15), l1, l2}, 4), 6);
}

TEST(Hpa, LoadingReplicasIgnoredOnScaleDown) {
  auto r = hpa({{"queuePerReplica", 5}});
  // As upstream: with ratio < 1 unready pods are simply left out, ceil(0.2 × 4) = 1 even
  // though 6 replicas exist.
  std::vector<ReplicaSignals> reps = readyWithWaiting(4, 1);
  reps.push_back(Rep("l1").loading());
  reps.push_back(Rep("l2").loading());
  EXPECT_EQ(recommend(*r, reps, 6), 1);
}

TEST(Hpa, DrainingReplicasAreNotCapacity) {
  auto r = hpa({{"queuePerReplica", 5}});
  // The draining replica's queue does not count, nor does it count as a replica.
  EXPECT_EQ(
      recommend(*r, {Rep("a").waiting(10), Rep("b").waiting(10), Rep("d").draining().waiting(0)},
                2),
      4);
}

TEST(Hpa, SeveralMetricsTakeTheLargest) {
  auto r = hpa({{"queuePerReplica", 5}, {"kvCacheUsage", 0.8}});
  // queue 10/5 → ceil(2 × 2) = 4; kv 0.96/0.8 = 1.2 → ceil(2.4) = 3
  EXPECT_EQ(recommend(*r, {Rep("a").waiting(10).kv(0.96), Rep("b").waiting(10).kv(0.96)}, 2), 4);
  // queue 2/5 = 0.4 → ceil(0.8) = 1; kv 1.0/0.8 = 1.25 → ceil(2.5) = 3
  auto one = recommend(*r, {Rep("a").waiting(2).kv(1.0), Rep("b").waiting(2).kv(1.0)}, 2);
  EXPECT_EQ(one, 3);
  const Recommendation rec =
      r->recommend(at(0, {Rep("a").waiting(2).kv(1.0), Rep("b").waiting(2).kv(1.0)}), 2);
  EXPECT_NE(rec.reason.find("kvCacheUsage"), std::string::npos) << rec.reason;
}

TEST(Hpa, RunningAndGpuMetrics) {
  auto r = hpa({{"runningPerReplica", 8}, {"gpuUtilization", 0.6}});
  // running 12/8 = 1.5 → 3; gpu 0.9/0.6 = 1.5 → 3
  EXPECT_EQ(recommend(*r, {Rep("a").running(12).gpu(0.9), Rep("b").running(12).gpu(0.9)}, 2), 3);
  // running 4/8 → ceil(1) = 1; gpu 0.95/0.6 → ceil(3.17) = 4
  EXPECT_EQ(recommend(*r, {Rep("a").running(4).gpu(0.95), Rep("b").running(4).gpu(0.95)}, 2), 4);
}

TEST(Hpa, FailedMetricSkipsScaleDownButNotScaleUp) {
  auto r = hpa({{"queuePerReplica", 5}, {"kvCacheUsage", 0.8}});
  // No replica reports kv: that metric fails. Queue says ceil(0.2 × 4) = 1 < 4: skipped.
  const Recommendation down = r->recommend(at(0, readyWithWaiting(4, 1)), 4);
  EXPECT_EQ(down.replicas, 4);
  EXPECT_NE(down.reason.find("kvCacheUsage"), std::string::npos) << down.reason;
  // Queue says ceil(2 × 4) = 8 > 4: scale-up proceeds.
  EXPECT_EQ(recommend(*r, readyWithWaiting(4, 10), 4), 8);
}

TEST(Hpa, AllMetricsFailedKeepsCurrent) {
  auto r = hpa({{"kvCacheUsage", 0.8}});
  EXPECT_EQ(recommend(*r, readyWithWaiting(3, 50), 3), 3);
  // Nothing ready at all (all loading): nothing to measure.
  EXPECT_EQ(recommend(*r, {Rep("l").loading()}, 1), 1);
}

TEST(Hpa, ArgumentsAreValidated) {
  auto unknown = makeRecommender("hpa", {{"queuePerReplca", 5}});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("queuePerReplca"), std::string::npos);
  auto kv = makeRecommender("hpa", {{"kvCacheUsage", 1.5}});
  ASSERT_FALSE(kv);
  EXPECT_NE(kv.error().message.find("kvCacheUsage"), std::string::npos);
  auto q = makeRecommender("hpa", {{"queuePerReplica", 0}});
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("queuePerReplica"), std::string::npos);
  auto tol = makeRecommender("hpa", {{"tolerance", -0.1}});
  ASSERT_FALSE(tol);
  EXPECT_NE(tol.error().message.find("tolerance"), std::string::npos);
  auto wide = makeRecommender("hpa", {{"tolerance", 1.0}});
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().message.find("'tolerance'"), std::string::npos) << wide.error().message;
  auto twice = makeRecommender("hpa", {{"queuePerReplica", 5}, {"queuePerReplica", 6}});
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("twice"), std::string::npos);
}

}  // namespace
}  // namespace tessera::scale
