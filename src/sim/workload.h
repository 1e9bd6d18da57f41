#pragma once
// The FGD experiment's workload preparation (shared/docs/fgd-benchmark.md §3 steps 2-6):
// the target workload ("typical pods") of a trace, and — when the artifact's reference order
// is not used — Tessera's own seeded arrival order, workload tuning and node ranks.
//
// Randomness: one std::mt19937_64 per run, seeded with the run's seed, with an unbiased
// bounded draw of our own (std::uniform_int_distribution differs between standard
// libraries), so a seed gives the same sequence on every platform. Draw order: shuffle the
// name-sorted pods, tune, then permute the name-sorted nodes.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/inventory.h"
#include "sched/plugins/artifact_policies.h"
#include "sim/trace.h"

namespace tessera::sim {

struct TypicalWorkload {
  std::vector<sched::TaskShape> shapes;  // most popular first; weights sum to 1
  int distinctShapes = 0;                // shapes in the whole trace
  std::int64_t coveredTasks = 0;         // tasks whose shape is in `shapes`
  std::int64_t totalTasks = 0;
  double coveragePct() const {
    return totalTasks > 0
               ? 100.0 * static_cast<double>(coveredTasks) / static_cast<double>(totalTasks)
               : 0.0;
  }
};

// Counts tasks per shape (CPU milli, per-GPU milli, GPU count, gpu_spec as written), sorts by
// count descending (ties: larger CPU, then larger per-GPU milli, GPU count, gpu_spec string
// first — the artifact's sort.Reverse of its Less), keeps the shortest prefix covering at
// least `thresholdPct` % of tasks and sets p_m = (count/total) / (covered/total) (two
// divisions, as the artifact: the last bits matter at FGD's truncation edges).
// Shapes carry catalogue type names; indices are left for sched::resolveTaskShapes.
TypicalWorkload typicalPods(const std::vector<TracePod>& pods, double thresholdPct = 95.0);

// A seeded generator with a portable unbiased bounded draw.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, n); n > 0.
  std::uint64_t below(std::uint64_t n);
  double unit();  // uniform in [0, 1)
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[static_cast<std::size_t>(below(i))]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

struct ArrivalPlan {
  std::vector<int> order;           // pod row indices in arrival order (copies repeat)
  std::vector<std::int64_t> ranks;  // per node (node-list order): tie-break rank, lower wins
  int appended = 0;                 // resampled copies appended by tuning
  int removed = 0;                  // originals removed by tuning
  std::int64_t arrivingGpuMilli = 0;
};

// Workload tuning of `order` to ratio × capacity GPU milli, as the artifact does it: when
// the sequence requests less, draw a pod uniformly from `byName` (the original pods sorted
// by name) and stop at the first draw whose per-GPU milli would push the total past the
// target, else append it at the end; when it requests more, remove uniformly random entries
// until the total is at most the target. Updates plan.order/appended/removed/arrivingGpuMilli.
void tuneWorkload(const std::vector<TracePod>& pods, const std::vector<int>& byName,
                  std::int64_t capacityMilli, double ratio, Rng& rng, ArrivalPlan& plan);

// Tessera's own procedure: sort pods by name, shuffle, tune, then a random permutation of
// the name-sorted nodes as ranks.
ArrivalPlan ownArrivalPlan(const std::vector<TracePod>& pods,
                           const std::vector<model::NodeSpec>& nodes, double ratio,
                           std::uint64_t seed);

// Pod row indices sorted by pod name (byte order).
std::vector<int> podsByName(const std::vector<TracePod>& pods);

}  // namespace tessera::sim
