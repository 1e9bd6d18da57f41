#pragma once
// Rendering a placement plan: a readable table for people, one JSON object for programs.
// The JSON field names are a stable interface (docs/cli.md).

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "place_plan.h"
#include "sched/cluster_state.h"

namespace tessera::cli {

// `state` is the cluster after the plan (it names nodes, GPUs and MIG profiles).
void printPlanTable(const PlanReport& report, const sched::ClusterState& state, std::ostream& out);
nlohmann::json planToJson(const PlanReport& report, const sched::ClusterState& state);

}  // namespace tessera::cli
