#include "scale/queueing.h"

#include <algorithm>
#include <cmath>

namespace tessera::scale {
namespace {

constexpr double kZ99 = 2.3263478740408408;  // the standard normal's 0.99 quantile

// Erlang C for c servers at offered load a (< c), from Erlang B with c servers (b).
double erlangCFromB(int c, double a, double b) {
  return c * b / (c - a * (1 - b));
}

// P(wait > t) given Erlang C: the M/M/c decay rate scaled by 2 / (1 + cs²).
double tailFrom(double erlangC, int c, double lambda, double service, double cs2, double t) {
  const double rate = (c / service - lambda) * 2 / (1 + std::max(0.0, cs2));
  return erlangC * std::exp(-rate * std::max(0.0, t));
}

}  // namespace

double serviceCs2(double mean, double p99) {
  if (!(mean > 0) || !(p99 > mean)) return 0;
  // Log-normal with log-scale sigma: ln(p99 / mean) = z sigma − sigma² / 2; the smaller root.
  const double r = std::log(p99 / mean);
  const double disc = kZ99 * kZ99 - 2 * r;
  const double sigma = disc > 0 ? kZ99 - std::sqrt(disc) : kZ99;
  return std::expm1(sigma * sigma);
}

double waitTail(double lambda, double service, double cs2, int servers, double t) {
  if (lambda <= 0 || service <= 0) return 0;
  if (servers <= 0) return 1;
  const double a = lambda * service;
  if (a >= servers) return 1;  // unstable: the queue grows without bound
  double b = 1;                // Erlang B, by its recursion (stable for any c)
  for (int k = 1; k <= servers; ++k) b = a * b / (k + a * b);
  return tailFrom(erlangCFromB(servers, a, b), servers, lambda, service, cs2, t);
}

int serversForTail(double lambda, double service, double cs2, double t, double eps, int cap) {
  if (lambda <= 0 || service <= 0) return 0;
  const double a = lambda * service;
  double b = 1;  // Erlang B with c servers, carried up c by c
  for (int c = 1; c <= cap; ++c) {
    b = a * b / (c + a * b);
    if (c <= a) continue;
    if (tailFrom(erlangCFromB(c, a, b), c, lambda, service, cs2, t) <= eps) return c;
  }
  return cap;
}

namespace {

// P(N > k) for N Poisson with mean m, summed in log space (no underflow at large m).
double poissonAbove(double m, int k) {
  if (m <= 0) return 0;
  double below = 0;
  const double logM = std::log(m);
  for (int i = 0; i <= k; ++i) below += std::exp(-m + i * logM - std::lgamma(i + 1.0));
  return std::max(0.0, 1 - below);
}

}  // namespace

double poissonLoadWithin(double slots, double eps) {
  if (!(slots >= 1) || !(eps > 0)) return 0;
  if (eps >= 1) return slots;
  // Whole slots; a count the caller's arithmetic left a hair below a whole one (24 × 0.0625 /
  // 0.375) is that whole one.
  const int k = static_cast<int>(std::floor(std::min(slots, 1e6) + 1e-9));
  double lo = 0, hi = k;  // P(N > k) <= eps at lo; the mean never exceeds the slots
  if (poissonAbove(hi, k) <= eps) return hi;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (poissonAbove(mid, k) <= eps ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace tessera::scale
