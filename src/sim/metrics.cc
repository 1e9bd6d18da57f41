#include "sim/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera::sim {

double roundHalfEven(double x, int decimals) {
  if (!std::isfinite(x)) return x;
  if (decimals == 0) return std::nearbyint(x);  // the default rounding mode: ties to even
  // glibc's printf rounds the exact binary value correctly (ties to even), as CPython does.
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return std::strtod(buf, nullptr);
}

double pairwiseSum(std::span<const double> a) {
  const std::size_t n = a.size();
  if (n < 8) {
    double res = 0.;
    for (double v : a) res += v;
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (std::size_t j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (std::size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwiseSum(a.first(n2)) + pairwiseSum(a.subspan(n2));
}

namespace {

// Per sample, its arrive_ratio (% of capacity, rounded half to even).
std::vector<int> arriveRatios(std::span<const PodSample> samples, std::int64_t gpus) {
  const double total = static_cast<double>(gpus);
  std::vector<int> arrive(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    arrive[i] = static_cast<int>(
        roundHalfEven(static_cast<double>(samples[i].arrivedMilli) / total / 10, 0));
  }
  return arrive;
}

// Bucket k: the samples with arrive_ratio == k, or, when there are none, k-1..k+1.
void membersOf(const std::vector<int>& arrive, int k, std::vector<std::size_t>& out) {
  out.clear();
  for (int pass = 0; pass < 2 && out.empty(); ++pass) {
    const int lo = pass == 0 ? k : k - 1;
    const int hi = pass == 0 ? k : k + 1;
    for (std::size_t i = 0; i < arrive.size(); ++i) {
      if (arrive[i] >= lo && arrive[i] <= hi) out.push_back(i);
    }
  }
}

}  // namespace

std::vector<std::size_t> bucketMembers(std::span<const PodSample> samples, std::int64_t gpus,
                                       int k) {
  std::vector<std::size_t> out;
  membersOf(arriveRatios(samples, gpus), k, out);
  return out;
}

Curve bucketize(std::span<const PodSample> samples, std::int64_t gpus) {
  const auto n = samples.size();
  const double total = static_cast<double>(gpus);
  const std::vector<int> arrive = arriveRatios(samples, gpus);
  std::vector<double> alloc(n), frag(n), rate(n);
  for (std::size_t i = 0; i < n; ++i) {
    const PodSample& s = samples[i];
    alloc[i] = roundHalfEven(static_cast<double>(s.allocatedMilli) / total / 10, 2);
    frag[i] = roundHalfEven(s.fragMilli, 2);
    rate[i] = roundHalfEven(s.fragRatePct, 2);
  }
  Curve c;
  std::vector<double> a, f, r;
  std::vector<std::size_t> members;
  for (int k = 0; k < kBuckets; ++k) {
    membersOf(arrive, k, members);
    if (members.empty()) continue;
    a.clear();
    f.clear();
    r.clear();
    for (std::size_t i : members) {
      a.push_back(alloc[i]);
      f.push_back(frag[i]);
      r.push_back(rate[i]);
    }
    const double count = static_cast<double>(a.size());
    const auto kk = static_cast<std::size_t>(k);
    c.allocPct[kk] = roundHalfEven(pairwiseSum(a) / count, 2);
    c.fragPct[kk] = roundHalfEven(100 * (pairwiseSum(f) / count) / 1000 / total, 2);
    c.fragRatePct[kk] = pairwiseSum(r) / count;
  }
  return c;
}

MeanSd meanSd(std::span<const double> values) {
  MeanSd out;
  out.n = static_cast<int>(values.size());
  if (values.empty()) return out;
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / out.n;
  if (out.n > 1) {
    double sq = 0;
    for (double v : values) sq += (v - out.mean) * (v - out.mean);
    out.sd = std::sqrt(sq / (out.n - 1));
  }
  return out;
}

}  // namespace tessera::sim
