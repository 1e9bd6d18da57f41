#include "scale/queueing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

namespace tessera::scale {
namespace {

TEST(Queueing, ServiceVariabilityFromTheP99OfALogNormal) {
  // A log-normal with sigma 1 has p99 / mean = exp(2.326 - 0.5) and cs² = e - 1.
  EXPECT_NEAR(serviceCs2(1, std::exp(2.3263478740408408 - 0.5)), std::exp(1.0) - 1, 1e-9);
  EXPECT_NEAR(serviceCs2(10, 20), 0.1077, 1e-3);
  EXPECT_DOUBLE_EQ(serviceCs2(10, 10), 0);  // every prompt alike
  EXPECT_DOUBLE_EQ(serviceCs2(10, 5), 0);   // a p99 below the mean: no spread to read
  EXPECT_DOUBLE_EQ(serviceCs2(0, 5), 0);
  // Beyond the log-normal's reach: its largest spread, and more p99 never reads as less.
  EXPECT_NEAR(serviceCs2(1, 100), std::expm1(2.3263478740408408 * 2.3263478740408408), 1e-6);
  EXPECT_LE(serviceCs2(1, 10), serviceCs2(1, 14));
}

TEST(Queueing, ExponentialServiceIsTheMMcTail) {
  // M/M/1 at ρ = 0.5: P(W > t) = ρ exp(-(μ - λ) t).
  EXPECT_NEAR(waitTail(0.5, 1, 1, 1, 2), 0.5 * std::exp(-1.0), 1e-12);
  // M/M/2 at a = 1: Erlang C = 1/3, decay c μ - λ = 1.
  EXPECT_NEAR(waitTail(1, 1, 1, 2, 0), 1.0 / 3, 1e-12);
  EXPECT_NEAR(waitTail(1, 1, 1, 2, 3), std::exp(-3.0) / 3, 1e-12);
  // Deterministic service (cs² 0) halves the mean wait: twice the decay rate.
  EXPECT_NEAR(waitTail(0.5, 1, 0, 1, 2), 0.5 * std::exp(-2.0), 1e-12);
  // Unstable, no servers, nothing arriving.
  EXPECT_DOUBLE_EQ(waitTail(2, 1, 1, 2, 100), 1);
  EXPECT_DOUBLE_EQ(waitTail(1, 1, 1, 0, 0), 1);
  EXPECT_DOUBLE_EQ(waitTail(0, 1, 1, 1, 0), 0);
}

// Randomised: serversForTail gives the fewest servers whose tail is within eps.
TEST(Queueing, ServersForTailIsTheFewestThatMeetIt) {
  const unsigned seed = std::random_device{}();
  std::printf("Queueing.ServersForTailIsTheFewestThatMeetIt seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 5000; ++i) {
    const double lambda = 100 * u(rng), service = 2 * u(rng) + 1e-3, cs2 = 5 * u(rng);
    const double t = 3 * u(rng), eps = 0.001 + 0.1 * u(rng);
    const int c = serversForTail(lambda, service, cs2, t, eps, 100000);
    ASSERT_LT(c, 100000) << "seed " << seed << " case " << i;
    EXPECT_LE(waitTail(lambda, service, cs2, c, t), eps + 1e-12)
        << "seed " << seed << " case " << i;
    if (c > 1) {
      EXPECT_GT(waitTail(lambda, service, cs2, c - 1, t), eps) << "seed " << seed << " case " << i;
    }
  }
  EXPECT_EQ(serversForTail(0, 1, 1, 1, 0.01, 10), 0);
  EXPECT_EQ(serversForTail(1000, 1, 1, 0, 1e-9, 10), 10);  // capped
}

TEST(Queueing, PoissonLoadWithinAReplicasSlots) {
  // One slot: P(N > 1) = 1 - e^-m (1 + m) = 1 % at m = 0.1486.
  EXPECT_NEAR(poissonLoadWithin(1, 0.01), 0.14855, 1e-4);
  // Few slots run well below them, many close to them.
  EXPECT_NEAR(poissonLoadWithin(18, 0.01), 10.35, 0.01);
  EXPECT_NEAR(poissonLoadWithin(150, 0.01), 123.9, 0.1);
  EXPECT_LT(poissonLoadWithin(18, 0.01) / 18, poissonLoadWithin(150, 0.01) / 150);
  // A looser target holds more; a fractional slot count is the whole slots it has.
  EXPECT_GT(poissonLoadWithin(18, 0.1), poissonLoadWithin(18, 0.01));
  EXPECT_DOUBLE_EQ(poissonLoadWithin(18.7, 0.01), poissonLoadWithin(18, 0.01));
  // Nothing to hold, or no overflow allowed; every overflow allowed: all the slots.
  EXPECT_DOUBLE_EQ(poissonLoadWithin(0.5, 0.01), 0);
  EXPECT_DOUBLE_EQ(poissonLoadWithin(18, 0), 0);
  EXPECT_DOUBLE_EQ(poissonLoadWithin(18, 1), 18);
  EXPECT_DOUBLE_EQ(poissonLoadWithin(std::nan(""), 0.01), 0);
}

// Randomised: the load returned overflows its slots with at most eps probability, and 1 % more
// load overflows them with more (the largest such load), by the Poisson pmf's own recursion.
TEST(Queueing, PoissonLoadWithinIsTheLargestThatMeetsTheTarget) {
  const unsigned seed = std::random_device{}();
  std::printf("Queueing.PoissonLoadWithinIsTheLargestThatMeetsTheTarget seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const auto above = [](double m, int k) {
    double p = std::exp(-m), below = p;
    for (int i = 1; i <= k; ++i) below += (p *= m / i);
    return 1 - below;
  };
  for (int i = 0; i < 300; ++i) {
    const int slots = 1 + static_cast<int>(300 * u(rng));
    const double eps = 0.001 + 0.2 * u(rng);
    const double m = poissonLoadWithin(slots, eps);
    ASSERT_GT(m, 0) << "seed " << seed << " case " << i;
    EXPECT_LE(m, slots);
    EXPECT_LE(above(m, slots), eps + 1e-9) << "seed " << seed << " case " << i;
    EXPECT_GT(above(m * 1.01, slots), eps) << "seed " << seed << " case " << i;
  }
}

}  // namespace
}  // namespace tessera::scale
