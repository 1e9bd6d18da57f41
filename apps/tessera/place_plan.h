#pragma once
// The plan `tessera place` reports: assignments with their scores, refusals with their
// reasons, an eviction plan (or capacity advice) per refusal, and optionally the full
// explanation of one request.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cmd_place.h"
#include "model/workload.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"

namespace tessera::cli {

struct AssignedReplica {
  sched::Placement placement;
  std::optional<std::int64_t> score;  // the engine's total score, when it could be recovered
  std::vector<sched::ScoreTerm> breakdown;
};

struct RefusedReplica {
  model::PlacementRequest request;
  std::string reason;
};

struct EvictionAdvice {
  model::PlacementRequest request;
  sched::EvictionPlan plan;
};

struct Explanation {
  std::string replicaId;
  bool placed = false;
  sched::Decision decision;  // decided with DecideOptions::explain
  std::string basis;         // the cluster state the decision was taken on, in words
};

struct PlanReport {
  PlaceMode mode = PlaceMode::kBatch;
  int requestCount = 0;
  std::vector<AssignedReplica> assignments;  // in the order they were placed
  std::vector<RefusedReplica> unplaceable;
  std::vector<EvictionAdvice> evictions;  // one per refusal; none of them is applied
  std::optional<Explanation> explanation;
};

// `state` is the seeded cluster on entry and the cluster after the plan on return.
// `explainReplica`, when set, must name one of `requests`.
PlanReport planPlacement(sched::PlacementEngine& engine, sched::ClusterState& state,
                         const std::vector<model::PlacementRequest>& requests, PlaceMode mode,
                         const std::optional<std::string>& explainReplica);

}  // namespace tessera::cli
