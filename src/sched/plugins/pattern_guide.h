#pragma once
// PatternGuide: what the bin-packing LP of an expected workload says about filling one GPU
// with sharing pods (k × g milli-GPU, 0 < g < 1000). PackingGradient uses it as its
// pattern terms (docs/tessera-policy.md §1, terms 4–6).
//
// Built once from the workload's sharing shapes weighted by frequency (sched/packing_lp.h):
//   - duals y_g: what one pod of g is worth in GPUs in an optimal fractional packing;
//   - tight patterns: every multiset of sizes that fits a GPU and whose duals sum to 1 (zero
//     reduced cost), i.e. every way to fill a GPU that an optimal packing may use;
//   - K(r, c): the most dual value that r free milli and c free CPU cores can still take
//     (pods of each size counted at the least CPU any shape of that size asks, rounded up to
//     whole cores; the node's free CPU rounded down: K errs on the side of less). The
//     pattern classes and completionCpu count CPU in exact milli.
// For a GPU holding pods C (level L = Σ C) on a node with c free CPU:
//   reducedCost(C, c) = 1 − Σ_{g∈C} y_g − K(1000 − L, c)
// is the part of the GPU that even the best completion leaves unused, in LP terms: 0 for an
// empty GPU and for any subset of a tight pattern that the node's CPU can still complete.
// It is a per-GPU view: each GPU is given the node's whole free CPU, so the GPUs of one node
// may count the same cores (PackingGradient's completion reserve looks at the node as a
// whole). Summed over GPUs with enough CPU it is what a packing loses against the LP bound,
// and a placement's increase of it on its GPU is the waste that placement commits to.
//
// Threading: immutable after build; any thread may read it.

#include <cstdint>
#include <span>
#include <vector>

#include "sched/plugins/artifact_policies.h"

namespace tessera::sched {

class PatternGuide {
 public:
  // Where a pod goes on a GPU, best first (see placementClass).
  enum Class : int { kCompletes = 0, kExtends = 1, kStarts = 2, kOffPattern = 3 };

  // From the workload's shapes with 0 < g < 1000 and a positive weight; empty (no terms)
  // when there are none or the LP does not converge.
  static PatternGuide build(std::span<const TaskShape> workload);

  bool empty() const { return patterns_.empty(); }
  const std::vector<std::vector<std::int32_t>>& patterns() const { return patterns_; }
  double dual(std::int32_t milli) const;

  // 1 − Σ y − K(1000 − level, cpuMilli) for pods `contents` (any order) on one GPU.
  double reducedCost(std::span<const std::int32_t> contents, std::int64_t cpuMilli) const;

  // `after` (ascending) holds the GPU's pods with the new one: kCompletes when it is a tight
  // pattern, kExtends (kStarts when the GPU was empty) when it is part of one whose other pods
  // find CPU in `cpuAfter`, else kOffPattern.
  Class placementClass(std::span<const std::int32_t> after, bool wasEmpty,
                       std::int64_t cpuAfter) const;

  // CPU the cheapest tight pattern holding `contents` (ascending) still needs: 0 for none,
  // a complete pattern, or contents on no pattern.
  std::int64_t completionCpu(std::span<const std::int32_t> contents) const;

 private:
  static constexpr std::size_t kCores = 129;  // K's CPU axis: 0..128 cores
  std::int64_t restCpu(const std::vector<std::int32_t>& pattern,
                       std::span<const std::int32_t> contents) const;

  std::vector<std::vector<std::int32_t>> patterns_;  // tight patterns, sizes ascending
  std::vector<double> dual_;                         // by milli 0..1000
  std::vector<std::int64_t> minCpu_;                 // by milli 0..1000 (0: none)
  std::vector<double> fill_;                         // K, (milli 0..1000) × kCores
};

}  // namespace tessera::sched
