#pragma once
// The cluster state as JSON for people and programs: the CLI's `-o json`, the server's API
// and the web dashboard all render placements, GPUs and decisions through these, so the
// field names agree everywhere (docs/cli.md and docs/api.md list them).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/cluster_state.h"
#include "sched/engine.h"

namespace tessera::sched {

// "1g.10gb" for a MIG assignment, "" otherwise.
std::string migProfileName(const ClusterState& state, const GpuAssignment& a);
// The catalogue name of a GPU's type (the spec's type when it is not in the catalogue).
std::string gpuTypeName(const ClusterState& state, const GpuRecord& g);

// {replica, model, deployment, priority, node, mode, gpus: [{id, reservedMib, estimateMib,
//  computeMilli, bandwidthGBps, migProfile, migStart}], memoryReservedMib, cpuMilli,
//  hostMemoryMib}
nlohmann::json placementJson(const ClusterState& state, const Placement& p);
// [{plugin, weight, score}]
nlohmann::json breakdownJson(const std::vector<ScoreTerm>& terms);
// [{node, gpu, plugin, reason}] (gpu "" when the whole node was rejected)
nlohmann::json rejectionsJson(const std::vector<Rejection>& rejections);
// One live GPU: {node, id, uuid, type, migEnabled, exclusive, memoryMib, reservedMib,
//  foreignMib, freeMib, computeMilli, bookedComputeMilli, replicas: [ids]}
// An eviction plan or, when none exists, the capacity advice (as `tessera place -o json`
// prints it under evictions[] and the API's explain under eviction).
nlohmann::json evictionJson(const ClusterState& state, const EvictionPlan& plan);
nlohmann::json gpuJson(const ClusterState& state, const GpuRecord& g);

}  // namespace tessera::sched
