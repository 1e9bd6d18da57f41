#include "place_plan.h"

#include <string>
#include <unordered_map>
#include <utility>

namespace tessera::cli {
namespace {

sched::DecideOptions explainIf(bool explain) {
  sched::DecideOptions options;
  options.explain = explain;
  return options;
}

bool samePlace(const sched::Placement& a, const sched::Placement& b) {
  if (a.node != b.node || a.mode != b.mode || a.gpus.size() != b.gpus.size()) return false;
  for (std::size_t i = 0; i < a.gpus.size(); ++i) {
    const sched::GpuAssignment& x = a.gpus[i];
    const sched::GpuAssignment& y = b.gpus[i];
    if (x.gpu != y.gpu || x.migProfile != y.migProfile || x.migStart != y.migStart) return false;
  }
  return true;
}

void planSequential(sched::PlacementEngine& engine, sched::ClusterState& state,
                    const std::vector<model::PlacementRequest>& requests,
                    const std::optional<std::string>& explainReplica, PlanReport& report) {
  for (const model::PlacementRequest& request : requests) {
    const bool explain = explainReplica && *explainReplica == request.replicaId;
    sched::Decision decision = engine.place(state, request, explainIf(explain));
    if (decision.placement) {
      report.assignments.push_back({*decision.placement, decision.totalScore, decision.breakdown});
    } else {
      report.unplaceable.push_back({request, decision.summary});
    }
    if (explain) {
      const bool placed = decision.placement.has_value();
      report.explanation = Explanation{request.replicaId, placed, std::move(decision),
                                       "the cluster as it was when this request's turn came"};
    }
  }
}

// planBatch returns placements, not decisions. The scores (and an explanation) are recovered
// by replaying the assignments in order on a copy of the cluster as it was before the batch:
// the engine is deterministic, so each decision is the one the batch took, and it is checked.
void planBatchWithScores(sched::PlacementEngine& engine, sched::ClusterState& state,
                         const std::vector<model::PlacementRequest>& requests,
                         const std::optional<std::string>& explainReplica, PlanReport& report) {
  sched::ClusterState replay = state;
  sched::BatchPlan plan = sched::planBatch(engine, state, requests, /*commit=*/true);

  std::unordered_map<std::string, const model::PlacementRequest*> byId;
  for (const model::PlacementRequest& request : requests) byId.emplace(request.replicaId, &request);

  bool replaying = true;
  for (sched::Placement& placement : plan.assignments) {
    AssignedReplica row{std::move(placement), std::nullopt, {}};
    const auto it = byId.find(row.placement.replicaId);
    if (replaying && it != byId.end()) {
      const bool explain = explainReplica && *explainReplica == row.placement.replicaId;
      sched::Decision decision = engine.decide(replay, *it->second, explainIf(explain));
      const bool same = decision.placement && samePlace(*decision.placement, row.placement);
      if (same) {
        row.score = decision.totalScore;
        row.breakdown = decision.breakdown;
      }
      if (explain) {
        report.explanation = Explanation{
            row.placement.replicaId, true, std::move(decision),
            same ? "the cluster as it was when the batch placed this request"
                 : "the cluster as it was when the batch placed this request (the batch "
                   "chose differently: see the assignment above)"};
      }
      replaying = replay.apply(sched::replicaPlaced(replay, row.placement, replay.clock().nowMs()))
                      .has_value();
    }
    report.assignments.push_back(std::move(row));
  }
  for (sched::Unplaceable& refused : plan.unplaceable) {
    const auto it = byId.find(refused.replicaId);
    if (it == byId.end()) continue;
    if (explainReplica && *explainReplica == refused.replicaId) {
      report.explanation =
          Explanation{refused.replicaId, false, engine.decide(state, *it->second, explainIf(true)),
                      "the cluster after the whole batch was placed"};
    }
    report.unplaceable.push_back({*it->second, std::move(refused.reason)});
  }
}

}  // namespace

PlanReport planPlacement(sched::PlacementEngine& engine, sched::ClusterState& state,
                         const std::vector<model::PlacementRequest>& requests, PlaceMode mode,
                         const std::optional<std::string>& explainReplica) {
  PlanReport report;
  report.mode = mode;
  report.requestCount = static_cast<int>(requests.size());
  if (mode == PlaceMode::kSequential) {
    planSequential(engine, state, requests, explainReplica, report);
  } else {
    planBatchWithScores(engine, state, requests, explainReplica, report);
  }
  // The advice is about the cluster after the plan, and never unloads what the plan placed.
  std::vector<std::string> placed;
  for (const AssignedReplica& row : report.assignments) placed.push_back(row.placement.replicaId);
  // The books do not change between these what-ifs, so requests of one shape get one plan:
  // it is searched once per shape (thousands of refused twins took minutes otherwise), not
  // for a request refused on its own account (a duplicate id, say).
  std::unordered_map<std::string, sched::EvictionPlan> byShape;
  for (const RefusedReplica& refused : report.unplaceable) {
    const std::string key = sched::requestShapeKey(refused.request);
    sched::EvictionPlan plan;
    if (const auto it = byShape.find(key); it != byShape.end()) {
      plan = it->second;
      if (plan.placement) plan.placement->replicaId = refused.request.replicaId;
    } else {
      plan = sched::planEviction(engine, state, refused.request, placed);
      if (!plan.requestRefused) byShape.emplace(key, plan);
    }
    report.evictions.push_back({refused.request, std::move(plan)});
  }
  return report;
}

}  // namespace tessera::cli
