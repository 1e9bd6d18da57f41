#pragma once
// What a serving simulation reports: JSON, a summary CSV, per-policy timeline CSVs and a
// self-contained SVG timeline (replicas against load, one panel per policy).

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/serving_reference.h"
#include "sim/serving_run.h"

namespace tessera::sim {

struct ServingReport {
  std::string trace;
  int requests = 0;
  std::string gpuType;
  std::string model;
  double sloTtftMs = 0;
  double sloPrefillFactor = 0;
  double timeScale = 1;
  double sloTarget = 0.99;
  std::vector<ServingPolicyResult> policies;  // in the order asked for
  std::optional<ServingLowerBound> lowerBound;

  // The lower bound's GPU-hours, or `none` when there is no bound (a plain double: GCC's
  // maybe-uninitialized check trips over an optional<double> taken from here).
  double lowerBoundOr(double none) const;
  // The clairvoyant's GPU-hours, if it ran and met the target.
  std::optional<double> clairvoyantGpuHours() const;
};

// {"trace", "requests", "gpu", "model", "slo_ttft_ms", "slo_prefill_factor", "time_scale",
//  "slo_target", "lower_bound_gpu_hours" (null: no policy can meet the target), "lower_bound":
//  {its parts}, "policies": {name: {"slo_attainment", "gpu_hours", "meets_target",
//  "vs_clairvoyant" (GPU-hours / the clairvoyant's), "vs_lower_bound", "ttft_p50_ms", "ttft_p99_ms",
//  "queue_p50_ms", "queue_p99_ms", "scale_events", "scale_ups", "scale_downs", "cold_starts",
//  "cold_starts_by_tier": {...}, "served", "unserved", "rejected", "cut_off",
//  "placement_failures", "peak_replicas", "mean_serving_replicas", "horizon_s",
//  "wall_seconds", "detail", "infeasible" (the clairvoyant, when it cannot meet the
//  target)}}}
nlohmann::json servingJson(const ServingReport& report);

// One row per policy: trace,policy,requests,slo_attainment,gpu_hours,... (the JSON's fields).
void writeServingCsv(std::ostream& out, const ServingReport& report, bool header = true);

// time_s,arrivals_per_s,queue,running,replicas_loading,replicas_ready,replicas_draining,desired
void writeTimelineCsv(std::ostream& out, const ServingPolicyResult& result);

// time_s,serving,recommended,desired,drained,reason (the reason quoted)
void writeDecisionsCsv(std::ostream& out, const ServingPolicyResult& result);

// Per policy: arrivals per second (grey, right axis) and replicas ready / loading / draining
// (left axis) against time. Standalone SVG, no scripts or external resources.
std::string servingPlotSvg(const ServingReport& report);

}  // namespace tessera::sim
