#pragma once
// One run of the FGD experiment (shared/docs/fgd-benchmark.md §3 step 7-8): every pod of an
// arrival order submitted one by one to the real placement engine
// (sched::PlacementEngine::place) on a sched::ClusterState fed by NodeAdded events, with the
// profile of one policy; no departures, no retries. After each pod: arrived and allocated GPU
// milli and the cluster's FGD fragment for the trace's target workload.
//
// Threading: a run owns its cluster state, engine and plugins; runs of the same trace may go
// on different threads at once (the trace and the catalogue are only read).

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sched/profile.h"
#include "sim/metrics.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace tessera::sim {

// Policy names, in the order reports list them.
inline constexpr std::array<std::string_view, 7> kPolicyNames = {
    "random", "dotprod", "clustering", "packing", "bestfit", "fgd", "tessera"};
bool isPolicyName(std::string_view name);

// The placement profile of an artifact policy: its score plugin alone (weight 1000, as the
// artifact configures kube-scheduler), the artifact's feasibility as filters (NodeResources:
// CPU and memory; GpuType; ComputeCap hard at the whole card, so a GPU takes a pod only when
// its free milli covers g), and the GPU choice on equal scores: lowest index for FGD (its
// reserve takes the first GPU reaching the best score), best fit for the others (smallest
// free milli that still fits, then lowest index). `typical` is FGD's target workload; `seed`
// drives Random. "tessera" gives tesseraProfile(typical): pass it FgdTrace::workload, as
// runFgd does.
Result<sched::Profile> policyProfile(std::string_view policy,
                                     std::span<const sched::TaskShape> typical, std::uint64_t seed);

// Tessera's own policy (PackingGradient, docs/tessera-policy.md) for an expected workload:
// every task shape of the pod list with its frequency (FgdTrace::workload). One weight set
// for every trace.
sched::Profile tesseraProfile(std::span<const sched::TaskShape> workload);

// A trace ready to run: nodes (without ranks), pods, and the target workload resolved
// against the catalogue.
struct FgdTrace {
  std::string name;
  std::vector<model::NodeSpec> nodes;
  std::vector<TracePod> pods;
  TypicalWorkload typical;   // FGD's target workload (95 % of tasks)
  TypicalWorkload workload;  // every task shape: Tessera's expected workload
  std::int64_t capacityMilli = 0;
  std::int64_t gpuCount = 0;
};
Result<FgdTrace> makeFgdTrace(std::string name, std::vector<model::NodeSpec> nodes,
                              std::vector<TracePod> pods, const model::GpuCatalog& catalog);

struct RunSpec {
  std::string policy;
  int seed = 0;
  ArrivalPlan plan;  // order (pod row indices) and per-node ranks
  // Also compute the LP lower bounds at 100 % arrived (RunResult::boundAt100).
  bool bound = false;
};

struct RunResult {
  std::string policy;
  int seed = 0;
  std::vector<PodSample> samples;  // one per submitted pod (dropped by runExperiments)
  int pods = 0;                    // pods submitted
  Curve curve;
  int placed = 0;
  int failed = 0;
  double seconds = 0;  // wall time of the run
  // With RunSpec::bound (sched/packing_lp.h), % of the GPUs, averaged over the samples of bucket
  // 100 as the curve is: the free capacity that the sharing pods (k × g milli with g below a
  // whole card) placed so far must leave whatever the placement (`boundAt100`), and the same
  // for every sharing pod arrived so far (`placeAllBoundAt100`: what any policy that places
  // them all leaves at least; it depends on the arrival order only).
  std::optional<double> boundAt100;
  std::optional<double> placeAllBoundAt100;
  // Unallocated GPU % at 100 % arrived (100 - bucket 100 of the allocation curve).
  std::optional<double> unallocatedAt100() const;
};

// `progress` (optional) is called now and then from the running thread with the number of
// pods submitted since its last call.
Result<RunResult> runFgd(const FgdTrace& trace, const model::GpuCatalog& catalog,
                         const RunSpec& spec, const std::function<void(int)>& progress = {});

}  // namespace tessera::sim
