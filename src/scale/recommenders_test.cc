// The simple baselines (weighted, littles-law) and the recommender table.

#include <gtest/gtest.h>

#include "scale/autoscaler.h"
#include "scale/test_support.h"

namespace tessera::scale {
namespace {

using testing::at;
using testing::Rep;

std::unique_ptr<Recommender> make(std::string_view name,
                                  const std::vector<std::pair<std::string, double>>& args = {}) {
  auto r = makeRecommender(name, args);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return std::move(*r);
}

TEST(RecommenderTable, KnowsEveryName) {
  EXPECT_EQ(recommenderNames(),
            (std::vector<std::string>{"hpa", "kpa", "littles-law", "tessera", "weighted"}));
  for (const std::string& n : recommenderNames()) EXPECT_EQ(make(n)->name(), n);
  auto unknown = makeRecommender("cpu", {});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("'cpu'"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("littles-law"), std::string::npos);
}

TEST(Weighted, GpuTermWins) {
  auto r = make("weighted");
  // max(0.84 / 0.7, 5 / 10) = 1.2 → ceil(2 × 1.2) = 3
  const Recommendation rec =
      r->recommend(at(0, {Rep("a").gpu(0.84).waiting(5), Rep("b").gpu(0.84).waiting(5)}), 2);
  EXPECT_EQ(rec.replicas, 3);
}

TEST(Weighted, QueueTermWins) {
  auto r = make("weighted");
  // max(0.7 / 0.7, 25 / 10) = 2.5 → ceil(2 × 2.5) = 5
  EXPECT_EQ(r->recommend(at(0, {Rep("a").gpu(0.7).waiting(20), Rep("b").gpu(0.7).waiting(30)}), 2)
                .replicas,
            5);
}

TEST(Weighted, ScalesDownAndUsesCurrentIncludingLoading) {
  auto r = make("weighted");
  std::vector<ReplicaSignals> four;
  for (int i = 0; i < 4; ++i) four.push_back(Rep("r" + std::to_string(i)).gpu(0.35).waiting(2));
  EXPECT_EQ(r->recommend(at(0, four), 4).replicas, 2);  // max(0.5, 0.2) × 4
  // current counts loading replicas: ceil(4 × 1.2) = 5
  EXPECT_EQ(r->recommend(at(0, {Rep("a").gpu(0.84), Rep("b").gpu(0.84), Rep("l1").loading(),
                                Rep("l2").loading()}),
                         4)
                .replicas,
            5);
}

TEST(Weighted, ThresholdArgsAndDrainingExcluded) {
  auto r = make("weighted", {{"gpuUtilization", 0.5}, {"queueDepth", 4}});
  // gpu mean over ready only (the draining replica at 1.0 is left out): 0.6 / 0.5 = 1.2,
  // queue 6 / 4 = 1.5 → ceil(2 × 1.5) = 3
  EXPECT_EQ(r->recommend(at(0, {Rep("a").gpu(0.6).waiting(6), Rep("b").gpu(0.6).waiting(6),
                                Rep("d").draining().gpu(1.0).waiting(50)}),
                         2)
                .replicas,
            3);
}

TEST(Weighted, NoSignalKeepsCurrent) {
  auto r = make("weighted");
  EXPECT_EQ(r->recommend(at(0, {Rep("a"), Rep("b")}), 2).replicas, 2);
}

TEST(Weighted, ArgumentsAreValidated) {
  auto zero = makeRecommender("weighted", {{"gpuUtilization", 0}});
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message.find("gpuUtilization"), std::string::npos);
  auto neg = makeRecommender("weighted", {{"queueDepth", -1}});
  ASSERT_FALSE(neg);
  EXPECT_NE(neg.error().message.find("queueDepth"), std::string::npos);
  auto unknown = makeRecommender("weighted", {{"queuePerReplica", 5}});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("queuePerReplica"), std::string::npos);
}

DeploymentSignals withRates(std::vector<ReplicaSignals> reps, double rate, double serviceMs) {
  DeploymentSignals s = at(0, std::move(reps));
  s.arrivalRatePerSec = rate;
  s.meanServiceMs = serviceMs;
  return s;
}

TEST(LittlesLaw, DemandOverUsableConcurrency) {
  auto r = make("littles-law");
  // demand 10/s × 2 s = 20; per replica mean(10, 6) × 0.8 = 6.4; ceil(3.125) = 4
  EXPECT_EQ(r->recommend(
                 withRates({Rep("a").maxConcurrency(10), Rep("b").maxConcurrency(6)}, 10, 2000), 2)
                .replicas,
            4);
  // exactly 2 replicas' worth: 12.8 × 1 s / 6.4 = 2
  EXPECT_EQ(r->recommend(withRates({Rep("a").maxConcurrency(8)}, 12.8, 1000), 1).replicas, 2);
}

TEST(LittlesLaw, ArgsOverrideConcurrencyAndUtilization) {
  auto r = make("littles-law", {{"maxConcurrency", 5}, {"targetUtilization", 1.0}});
  EXPECT_EQ(r->recommend(withRates({Rep("a").maxConcurrency(100)}, 10, 2000), 1).replicas, 4);
}

TEST(LittlesLaw, MissingInputsKeepCurrent) {
  auto r = make("littles-law");
  DeploymentSignals noRate = at(0, {Rep("a").maxConcurrency(8)});
  noRate.meanServiceMs = 1000;
  EXPECT_EQ(r->recommend(noRate, 3).replicas, 3);
  EXPECT_EQ(r->recommend(withRates({Rep("a")}, 10, 1000), 3).replicas, 3);  // no concurrency
  auto bad = makeRecommender("littles-law", {{"targetUtilization", 1.2}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("targetUtilization"), std::string::npos);
}

TEST(LittlesLaw, DrainingConcurrencyIsNotCounted) {
  auto r = make("littles-law");
  // the draining replica's maxConcurrency 100 stays out of the mean: 20 / 6.4 → 4
  EXPECT_EQ(
      r->recommend(withRates({Rep("a").maxConcurrency(8), Rep("d").draining().maxConcurrency(100)},
                             10, 2000),
                   1)
          .replicas,
      4);
}

}  // namespace
}  // namespace tessera::scale
