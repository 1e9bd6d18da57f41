#pragma once
// The baseline the placement benchmarks are measured against: a straightforward decision that
// puts every live node and every GPU through every filter of the plugin set, builds and scores
// every feasible option, and picks the winner with the engine's tie-break rules. Plugins get
// their per-decision prepare() calls as in the engine, and the winner is booked with
// sched::placementFor like the engine's. No capacity index, no scratch-buffer
// reuse, no memoised node verdicts, no failed-shape cache in batches.
//
// It is written to choose exactly what PlacementEngine::decide chooses (the benchmarks check
// that on their inputs: counters same_choice and differing, and a warning on stderr), so that
// the time ratio between the two is what the engine's shortcuts buy and nothing else.
//
// Threading: one instance per thread (plugins may memoise).

#include <cstdint>
#include <optional>
#include <vector>

#include "model/workload.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/profile.h"

namespace tessera::bench {

class ReferenceScan {
 public:
  ReferenceScan(sched::PluginSet plugins, sched::EngineOptions options);

  struct Choice {
    sched::Placement placement;
    std::int64_t totalScore = 0;
    int feasibleOptions = 0;
  };
  // nullopt when nothing fits (or the request asks for no GPU, which the benchmarks never do).
  std::optional<Choice> decide(const sched::ClusterState& state,
                               const model::PlacementRequest& request);

  // sched::planBatch's best-fit-decreasing order, each request decided by decide() and applied
  // to a scratch copy of `state` (which is left untouched).
  sched::BatchPlan planBatch(const sched::ClusterState& state,
                             std::vector<model::PlacementRequest> requests);

 private:
  std::optional<sched::Option> nodeOption(const sched::DecisionContext& ctx, sched::NodeId node,
                                          const std::vector<sched::GpuId>& passing) const;

  sched::PluginSet plugins_;
  sched::EngineOptions options_;
};

}  // namespace tessera::bench
