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

}  // namespace
}  // namespace tessera::scale
