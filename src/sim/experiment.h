#pragma once
// The FGD experiment over policies × seeds (× traces): plans every run (the artifact's
// reference order and ranks, or Tessera's own seeded procedure), runs them on a pool of
// threads and summarises each policy: unallocated GPU % at 100 % arrived (mean ± s.d. over
// seeds) and the mean curves.
//
// Threading: runExperiments blocks; it runs `jobs` worker threads, each taking whole runs;
// runs share nothing mutable. Results do not depend on `jobs` or on scheduling order.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sim/fgd_run.h"
#include "sim/metrics.h"
#include "sim/reference.h"

namespace tessera::sim {

struct ExperimentOptions {
  std::vector<std::string> policies;  // names from kPolicyNames
  std::vector<int> seeds;
  // The fgd-simulator-reference folder: replay the artifact's exact arrival order and node
  // ranks where it has them for the trace; Tessera's own generator otherwise.
  std::optional<std::string> referenceDir;
  double tuneRatio = 1.3;
  int jobs = 1;
  // Keep every run's per-pod samples (tests); by default only the bucketed curves stay, so
  // that 1,400 runs fit in little memory.
  bool keepSamples = false;
  // Compute the LP lower bounds at 100 % arrived for every run (RunResult::boundAt100).
  bool bound = false;
};

struct PolicySummary {
  std::string policy;
  std::vector<RunResult> runs;  // in seed order
  MeanSd unallocatedAt100;      // over the runs that reach 100 % arrived
  Curve meanCurve;              // per bucket, the mean over runs that have it
  MeanSd boundAt100;            // with ExperimentOptions::bound (n = 0 otherwise)
};

struct TraceResult {
  std::string trace;
  bool replayed = false;  // order and ranks came from the reference folder
  std::vector<PolicySummary> policies;
  TypicalWorkload typical;
  std::int64_t gpuCount = 0;
  std::vector<ArrivalPlan> plans;  // per seed, as run
  // With ExperimentOptions::bound: RunResult::placeAllBoundAt100 over the seeds (the same
  // for every policy, since it depends on the arrival order only).
  MeanSd placeAllBoundAt100;
};

struct ProgressSnapshot {
  std::int64_t podsDone = 0;
  std::int64_t podsTotal = 0;
  int runsDone = 0;
  int runsTotal = 0;
  double elapsedSeconds = 0;
};

// Runs every (trace, policy, seed). `onTick` (optional) is called from the calling thread
// about five times a second while runs go on, and once at the end.
Result<std::vector<TraceResult>> runExperiments(
    const std::vector<FgdTrace>& traces, const model::GpuCatalog& catalog,
    const ExperimentOptions& options,
    const std::function<void(const ProgressSnapshot&)>& onTick = {});

// The artifact's arrival orders and node ranks for one trace.
struct TraceReference {
  ArrivalOrders orders;
  NodeRanks ranks;
};
// Loads them from the reference folder; nullopt when the folder has no files for the trace.
Result<std::optional<TraceReference>> loadTraceReference(const std::string& referenceDir,
                                                         const std::string& trace);
// The plan of one seed from the reference (rows checked against the trace).
Result<ArrivalPlan> referencePlan(const FgdTrace& trace, const TraceReference& reference, int seed);

// "42-51", "42,44,50-51" -> seeds.
Result<std::vector<int>> parseSeedList(std::string_view text);

}  // namespace tessera::sim
