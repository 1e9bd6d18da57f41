#pragma once
// What `tessera simulate fleet` reports: JSON, a per-policy summary table's numbers, the
// fleet's utilisation time line as CSV, and an SVG of utilisation over time per policy.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/fleet.h"

namespace tessera::sim {

// Recorded load latencies the cold-start model is set against (GenTD26).
struct RecordedLoads {
  std::string source;
  Distribution baseModel;  // base-model load ("main component of cold start")
  Distribution lora;       // LoRA adapter load
};

struct FleetReport {
  std::string fleet;   // the spec's name
  std::string source;  // where the traffic came from
  int nodes = 0;
  int gpus = 0;
  double sloTarget = 0.99;
  std::vector<FleetDeployment> deployments;  // traces not kept (only names and counts used)
  std::vector<FleetPolicyResult> policies;   // in the order run
  std::optional<RecordedLoads> recorded;
};

// {"fleet", "source", "nodes", "gpus", "slo_target", "deployments": [{name, model, slo_ttft_ms,
//  priority, traffic, requests}], "policies": {NAME: {"gpu_hours", "replica_gpu_hours", "cost",
//  "peak_gpus", "mean_gpus", "slo_attainment", "deployments_meeting_target",
//  "min_deployment_attainment", "mean_gpu_memory_utilization", "mean_gpu_memory_allocated",
//  "mean_gpu_compute_utilization", "cold_starts", "cold_starts_by_tier": {host_memory,
//  local_disk, remote}, "cold_start_seconds": {tier: {count, p50, p90, p99, max, mean}},
//  "evictions", "placement_failures", "pending_replica_seconds", "worst_ttft_p99_ms",
//  "wall_seconds", "deployments": {name: {slo_attainment, gpu_hours, ttft_p50_ms, ttft_p99_ms,
//  cold_starts, evicted, requests, served, unserved, rejected, peak_replicas, replica_share}}}},
//  "savings": {"gpu_hours_vs_whole_gpu", "cost_vs_whole_gpu"} (tessera / whole-gpu, when both
//  ran), "recorded_loads": {...} (when the GenTD26 latency files were read)}
nlohmann::json fleetJson(const FleetReport& report);

// time_s,policy,gpus_in_use,replicas,memory_used,memory_allocated,compute
void writeFleetTimelineCsv(std::ostream& out, const FleetReport& report);

// Two panels (compute utilisation, memory used) over time, one line per policy, with the cards
// in use beneath. Standalone SVG.
std::string fleetPlotSvg(const FleetReport& report);

}  // namespace tessera::sim
