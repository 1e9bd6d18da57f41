// Bucketing of per-pod metrics by arrived load, as the artifact's pandas scripts do it.

#include "sim/metrics.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

namespace tessera::sim {
namespace {

TEST(RoundHalfEven, MatchesPythonRound) {
  EXPECT_EQ(roundHalfEven(2.5, 0), 2.0);
  EXPECT_EQ(roundHalfEven(3.5, 0), 4.0);
  EXPECT_EQ(roundHalfEven(-0.5, 0), -0.0);
  EXPECT_EQ(roundHalfEven(0.125, 2), 0.12);  // exactly representable tie: to even
  EXPECT_EQ(roundHalfEven(0.375, 2), 0.38);
  EXPECT_EQ(roundHalfEven(2.675, 2), 2.67);  // 2.675 is 2.67499999... in binary
  EXPECT_EQ(roundHalfEven(1.005, 2), 1.0);
}

TEST(PairwiseSum, AgreesWithNumpyOrderOnLargeInputs) {
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(0.1 * (i % 7) + 1e-3 * i);
  const double naive = std::accumulate(v.begin(), v.end(), 0.0);
  EXPECT_NEAR(pairwiseSum(v), naive, 1e-9);
  // Small inputs sum left to right.
  std::vector<double> small = {0.1, 0.2, 0.3};
  EXPECT_EQ(pairwiseSum(small), (0.1 + 0.2) + 0.3);
  // Blocks of up to 128 use eight accumulators: (r0+r1)+(r2+r3) + ... then the rest.
  std::vector<double> nine = {1e16, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(pairwiseSum(nine), (((1e16 + 1) + (1 + 1)) + ((1 + 1) + (1 + 1))) + 1);
  EXPECT_NE(pairwiseSum(nine), std::accumulate(nine.begin(), nine.end(), 0.0));
}

TEST(MeanSd, SampleStandardDeviation) {
  std::vector<double> v = {1, 2, 3, 4};
  const MeanSd m = meanSd(v);
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  EXPECT_NEAR(m.sd, 1.2909944, 1e-6);
  EXPECT_EQ(meanSd(std::vector<double>{5}).sd, 0);
}

// A 10-GPU cluster (10,000 milli): one arrived % is 100 milli.
TEST(Bucketize, MeansPerBucketWithNeighbourFallback) {
  std::vector<PodSample> s;
  // Arrived 100, 120 (both round to bucket 1); 250 -> 2.5 -> bucket 2 (half to even);
  // 350 -> 3.5 -> bucket 4; then 1000 -> 10.
  s.push_back({100, 100, 1000.004, 10.004});
  s.push_back({120, 110, 1000.0, 10.0});
  s.push_back({250, 200, 2000, 20});
  s.push_back({350, 300, 3000, 30});
  s.push_back({1000, 900, 4000, 40});
  const Curve c = bucketize(s, 10);
  // Bucket 0 is empty: its neighbours within ±1 are the two bucket-1 events.
  ASSERT_TRUE(c.allocPct[0]);
  EXPECT_DOUBLE_EQ(*c.allocPct[0], 1.05);  // mean(1.0, 1.1)
  ASSERT_TRUE(c.allocPct[1]);
  EXPECT_DOUBLE_EQ(*c.allocPct[1], 1.05);
  EXPECT_DOUBLE_EQ(*c.allocPct[2], 2.0);
  // Bucket 3 is empty: events of buckets 2 and 4.
  EXPECT_DOUBLE_EQ(*c.allocPct[3], 2.5);
  EXPECT_DOUBLE_EQ(*c.allocPct[4], 3.0);
  EXPECT_FALSE(c.allocPct[6]);  // nothing within 5..7
  EXPECT_DOUBLE_EQ(*c.allocPct[10], 9.0);
  EXPECT_FALSE(c.allocPct[12]);
  // Fragment amount: frag milli (2 decimals) averaged, as % of 10 GPUs.
  EXPECT_DOUBLE_EQ(*c.fragPct[1], 10.0);
  // Rate: mean of the 2-decimal rates, not rounded again.
  EXPECT_DOUBLE_EQ(*c.fragRatePct[1], 10.0);
  EXPECT_DOUBLE_EQ(*c.fragRatePct[3], 25.0);
}

TEST(Bucketize, ArtifactScaleRoundsAllocationPerEvent) {
  // 6212 GPUs: allocated 5,919,410 milli is 95.2899... % -> 95.29 per event.
  std::vector<PodSample> s = {{6'212'000, 5'919'410, 0, 0}};
  const Curve c = bucketize(s, 6212);
  ASSERT_TRUE(c.allocPct[100]);
  EXPECT_DOUBLE_EQ(*c.allocPct[100], 95.29);
}

}  // namespace
}  // namespace tessera::sim
