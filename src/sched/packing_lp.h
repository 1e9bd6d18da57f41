#pragma once
// A lower bound on the GPUs a set of GPU-sharing pods needs, whatever the placement: the
// linear-programming relaxation of bin packing (Gilmore and Gomory's cutting-stock LP),
// solved by column generation and certified by its dual.
//
// Why the simulator wants it: at 100 % arrived load the FGD experiment's "unallocated GPU %"
// is the free GPU capacity. Pods asking for one GPU × g milli with g below a whole card
// (sharing pods) share GPUs with each other only; whole-GPU and multi-GPU pods take whole
// cards. So the GPUs that hold sharing pods have at least
//     waste = (fewest GPUs the sharing pods fit into) × 1000 − their milli
// free between them, under any policy, even one that knows the future, ignores CPU, host
// memory, nodes and GPU types (dropping constraints can only lower the count). The bound
// here is that count from below; docs/tessera-policy.md §2 uses it to show how far a policy
// is from the best any placement could do with the pods it placed.
//
// The bound is the LP's dual objective Σ_s n_s y_s for duals y ≥ 0 that are feasible for
// every pattern (Σ_s a_s y_s ≤ 1 whenever Σ_s a_s s ≤ capacity), checked by an exact
// knapsack over the patterns after the last iteration and scaled down when rounding left
// them a little above 1. It is valid even when the iteration limit stops the column
// generation early (the bound is then weaker, never wrong). GPUs needed ≥ ceil(bound).
//
// Cost: m distinct sizes; each iteration solves three m × m systems and one knapsack over the
// capacity (sizes and capacity are first divided by their common divisor: 1000 milli with
// sizes in tens is a knapsack of 100). The Alibaba traces have about 20 sizes: well under a
// millisecond per bound.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "common/result.h"

namespace tessera::sched {

// One pattern of the LP's solution: a way to fill one bin, used `bins` times (fractional).
struct PackingPattern {
  std::vector<std::pair<std::int32_t, std::int32_t>> items;  // (size, count), sizes ascending
  double bins = 0;
};

struct PackingLowerBound {
  double lpBins = 0;        // the certified LP bound (fractional GPUs)
  std::int64_t bins = 0;    // GPUs needed at least: ceil(lpBins), and ≥ the item count
                            // over half a card, and ≥ the volume over the capacity
  std::int64_t volume = 0;  // Σ count × size
  std::int64_t capacity = 0;
  int iterations = 0;      // column-generation steps taken
  bool converged = false;  // no improving pattern was left
  // The primal solution when converged: the patterns an optimal fractional packing uses
  // (x > 0). Every size with a positive count is in at least one of them.
  std::vector<PackingPattern> patterns;
  // The certified duals per size (what one item of the size is worth in bins).
  std::vector<std::pair<std::int32_t, double>> duals;
  // Free capacity the bins must keep between them, in the sizes' unit.
  std::int64_t waste() const { return bins * capacity - volume; }
};

// Every pattern (sizes ascending, expanded) whose items' duals sum to at least 1 − eps: the
// patterns an optimal fractional packing may use (zero reduced cost). Stops at `limit`
// patterns or after 2·10^6 search steps (the Alibaba traces have 60–109 tight patterns).
std::vector<std::vector<std::int32_t>> tightPatterns(const PackingLowerBound& lp, double eps,
                                                     std::size_t limit);

// `counts`: item size → how many, sizes in 1..capacity-1 (milli-GPU with capacity 1000).
// Zero counts are ignored. An empty set needs no bins.
Result<PackingLowerBound> packingLowerBound(const std::map<std::int32_t, std::int64_t>& counts,
                                            std::int32_t capacity = 1000);

}  // namespace tessera::sched
