#pragma once
// Per-pod metrics of an FGD experiment run and their bucketing by arrived load, exactly as
// the artifact's analysis does it (shared/docs/fgd-benchmark.md §3 steps 8 and 10; its
// scripts/analysis.py and experiments/analysis/merge_*_discrete.py):
//   arrive_ratio = round(arrived milli / GPUs / 10)               (Python round: half to even)
//   alloc_ratio  = round(allocated milli / GPUs / 10, 2)          per pod event
//   bucket k (0..130) = mean over events with arrive_ratio == k, or, when there are none, over
//   those with k-1 <= arrive_ratio <= k+1; missing when both are empty.
//   allocation: round(mean(alloc_ratio), 2)
//   fragment amount: round(100 × mean(frag milli as logged, 2 decimals) / 1000 / GPUs, 2)
//   fragmentation rate: mean(rate % as logged, 2 decimals), not rounded
// Means sum like numpy (pairwise summation), so that a mean on a rounding edge rounds the
// same way as pandas'.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim/reference.h"

namespace tessera::sim {

// The cluster after one pod was submitted (placed or not).
struct PodSample {
  std::int64_t arrivedMilli = 0;    // k × g of every pod submitted so far, failed ones included
  std::int64_t allocatedMilli = 0;  // GPU milli held by placed pods
  double fragMilli = 0;             // cluster FGD fragment for the target workload
  double fragRatePct = 0;           // 100 × fragment / unallocated milli
};

using BucketValues = std::array<std::optional<double>, kBuckets>;

struct Curve {
  BucketValues allocPct;     // GPU allocation ratio, % of capacity
  BucketValues fragPct;      // fragment amount, % of capacity
  BucketValues fragRatePct;  // fragment / unallocated, %
};

// `gpus` = the cluster's GPU count (the artifact's total_gpus).
Curve bucketize(std::span<const PodSample> samples, std::int64_t gpus);

// The samples bucket k averages over (indices in order; empty when the bucket is missing).
std::vector<std::size_t> bucketMembers(std::span<const PodSample> samples, std::int64_t gpus,
                                       int k);

// Python's round(x, decimals) for floats: correctly rounded, ties (on the exact binary
// value) to even.
double roundHalfEven(double x, int decimals);
// numpy's pairwise summation (the order add.reduce uses on a contiguous float64 array).
double pairwiseSum(std::span<const double> values);

// Mean and sample standard deviation (n - 1; 0 for fewer than two values).
struct MeanSd {
  double mean = 0;
  double sd = 0;
  int n = 0;
};
MeanSd meanSd(std::span<const double> values);

}  // namespace tessera::sim
