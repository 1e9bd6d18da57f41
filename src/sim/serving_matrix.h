#pragma once
// The robustness matrix (docs/serving-simulator.md, "Robustness matrix"): every trace x request
// rate x warm start x GPU type x cold start, each cell a serving simulation of the policies
// with the clairvoyant reference and the lower bound, and a verdict on `tessera` per cell:
//   n/a    the clairvoyant cannot reach the target there (it says why);
//   pass   tessera reaches the target, within `withinClairvoyant` x the clairvoyant's GPU-hours,
//          and with no more GPU-hours than the cheapest baseline that also reaches it;
//   miss   otherwise, with which of the three it fails.
//
// Threading: cells run on `jobs` threads; each owns its runs (traces and catalogue are shared,
// read only). Results do not depend on `jobs`.

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sim/serving_report.h"

namespace tessera::sim {

struct MatrixTrace {
  std::string name;
  ServingTrace trace;  // at rate 1
};

struct MatrixOptions {
  std::vector<double> rates = {0.25, 0.5, 1, 2, 4};
  std::vector<std::string> gpus = {"H100-80GB", "A100-80GB", "L40S"};
  std::vector<bool> warmStarts = {true, false};
  std::vector<bool> nodeCacheHits = {true, false};
  std::vector<std::string> policies = {"static-peak", "hpa",     "weighted",   "littles-law",
                                       "kpa",         "tessera", "clairvoyant"};
  ServingOptions base;  // everything else (model, SLO, fleet size, model error)
  double withinClairvoyant = 1.25;
  int jobs = 1;
};

struct MatrixCell {
  std::string trace;
  double rate = 1;
  bool warmStart = true;
  std::string gpu;
  bool nodeCacheHit = false;
  ServingReport report;
};

struct CellVerdict {
  enum class Kind { kNotApplicable, kPass, kMiss } kind = Kind::kNotApplicable;
  std::string why;                          // what failed, or why n/a
  std::optional<std::string> bestBaseline;  // the cheapest baseline reaching the target
  double bestBaselineGpuHours = 0;
};
CellVerdict judgeCell(const MatrixCell& cell, double withinClairvoyant);
const char* verdictName(CellVerdict::Kind kind);

// What the matrix says of tessera as a whole. "Reachable" cells are those where the
// clairvoyant reaches the target (every cell that is not n/a); the ratios are tessera's
// GPU-hours over the clairvoyant's there.
struct MatrixSummary {
  int cells = 0, pass = 0, miss = 0, notApplicable = 0;
  // Every trace of the matrix in the order its cells come, 0 when none passes.
  std::vector<std::pair<std::string, int>> passByTrace;
  int reachable = 0;
  int tesseraAtTarget = 0;    // reachable cells where tessera reaches the target too
  int withinClairvoyant = 0;  // reachable cells at most withinClairvoyant x the clairvoyant
  // Over the reachable cells where the clairvoyant used GPU-hours (nullopt: none).
  std::optional<double> medianVsClairvoyant;
  double tesseraGpuHours = 0;  // summed over the reachable cells
};
MatrixSummary summarizeMatrix(const std::vector<MatrixCell>& cells, double withinClairvoyant);

Result<std::vector<MatrixCell>> runServingMatrix(const std::vector<MatrixTrace>& traces,
                                                 const model::GpuCatalog& catalog,
                                                 const MatrixOptions& options);

// {"cells": [{"trace", "rate", "warm_start", "gpu", "node_cache_hit", "verdict", "why",
//   "best_baseline", "lower_bound_gpu_hours", "policies": {name: {"slo_attainment",
//   "gpu_hours", ...}}}], "summary": {"cells", "pass", "miss", "n/a", "pass_by_trace",
//   "reachable", "tessera_at_target", "within_clairvoyant_cells",
//   "median_tessera_vs_clairvoyant", "tessera_gpu_hours_reachable", ...}}
nlohmann::json matrixJson(const std::vector<MatrixCell>& cells, const MatrixOptions& options);
// A Markdown table per trace, then the summary (MatrixSummary) and the cells that miss.
void writeMatrixMarkdown(std::ostream& out, const std::vector<MatrixCell>& cells,
                         const MatrixOptions& options);

}  // namespace tessera::sim
