#pragma once
// PackingGradient: Tessera's own placement score for GPU-sharing workloads (the FGD paper's
// setting: pods that ask for CPU, host memory and k GPUs × g milli-GPU each, against an
// expected mix of task shapes). docs/tessera-policy.md explains the design and the numbers.
//
// The expected workload should be every task shape of the pod list with its frequency: the
// simulator's tessera profile passes all of them, not FGD's 95 % "typical" prefix, which in
// the Alibaba traces leaves out every multi-GPU shape, so that term 1 could not see what
// breaking up a whole 8-GPU node costs.
//
// For each option the plugin computes a cost in milli-GPU (lower is better) from six terms:
//
//   1. Usable-capacity loss. For a node state (free CPU c, free milli per GPU r_i, GPU type)
//      and a task shape m = (c_m, g_m, k_m, types) of the expected workload, usable_m is the
//      GPU milli the node could still give to copies of m alone:
//        instances_m = min(GPU instances, floor(c / c_m)),   GPU instances =
//          k_m == 1: Σ_i floor(r_i / g_m)     k_m > 1: floor(#{i: r_i >= g_m} / k_m),
//        usable_m    = instances_m × k_m × g_m   (0 when the node's type is not in m's types;
//                      CPU-only shapes have none).
//      U(node) = Σ_m p_m usable_m. The term is U(before) − U(after): how much of the
//      expected workload's room the placement destroys. It is the gradient of FGD's idea
//      (free GPU capacity the workload cannot use), but counted in instances, so it sees
//      what FGD's "does one copy still fit" test cannot: GPUs left without the CPU to use
//      them, and the leftover of repeated sharing placements (two 470s in a GPU waste 60).
//      It is exact (no logistic squashing into 0..100 and no rank lottery among ties).
//   2. Stranded GPU (weight `stranding`): S(node) = max(0, R − c / κ), R the node's free GPU
//      milli and κ = cpuPerGpuScale × Σ p_m c_m / Σ p_m k_m g_m the CPU the workload
//      brings per milli-GPU. The term is S(after) − S(before): GPU capacity that would be
//      left with less CPU than even lean GPU pods need. It keeps CPU-only and CPU-heavy
//      pods on nodes with CPU to spare.
//   3. Type pressure (weight `typePressure`): GPU types that type-constrained shapes need
//      are kept for them. ρ_T = Σ over shapes m whose type list holds T of d_m × F / F(m),
//      d_m = p_m k_m g_m / Σ p k g the shape's share of GPU demand, F the cluster's free GPU
//      milli and F(m) the free milli of the types m accepts: the part of T's remaining
//      capacity that typed demand is expected to claim. The term is ρ_T × k × g for an
//      option on a node of type T. (Zero when no shape names a type.)
//
//   4. LP waste (weight `lpWaste`), for pods on one GPU: PatternGuide (pattern_guide.h) solves
//      the bin-packing LP of the workload's sharing shapes once; its duals price each pod
//      size in GPUs. reducedCost(C, c) = 1 − Σ_{g∈C} y_g − K(1000 − level, c) is the part of
//      a GPU holding pods C that even the best CPU-feasible completion leaves unused, in LP
//      terms; the term is 1000 × (reducedCost after − before) for the chosen GPU (c: the
//      node's free CPU before and after). Placements that keep every GPU on a way to fill it
//      that an optimal packing uses cost nothing; the weight makes the term decide first.
//      (A whole-GPU pod ends the GPU's LP value, so it prefers GPUs that lack the CPU to be
//      filled well by sharing pods.)
//   5. Pattern order (weight `patternOrder` per step), for sharing pods: 0 when the pod
//      completes a tight pattern (a fill the LP may use), 1 when it extends a started one,
//      2 when it starts one on an empty GPU, 3 off every tight pattern or when the node lacks
//      the CPU for the pattern's other pods. Among options term 4 finds equal, finish GPUs
//      before opening new ones.
//   6. Completion reserve (weight `completionReserve`): N(node) = Σ over its GPUs of the CPU
//      the cheapest tight pattern holding the GPU's pods still needs; the term is the change
//      of max(0, N − free CPU) / κ (milli-GPU): CPU taken from GPUs that wait for partners.
//
// raw score = −1000 × cost (0.001 milli-GPU resolution). normalize() keeps the ranking at
// the top exactly: the best option gets 100 and an option δ raw units below it 100 − δ
// (clamped at 0), so the engine's argmax is the plugin's; ties (identical states) fall to the
// engine's node rank and GPU tie-break. Use it as a profile's only score plugin, with
// gpuTieBreak=index (a sharing pod's GPUs are scored one by one).
//
// Resource model: as the artifact policies (artifact_policies.h): a trace pod is a request
// with cpuMilli, gpusPerReplica = k, computeMilli = g, no GPU memory; a GPU's free milli is
// GpuRecord::freeComputeMilli(). Host memory is not looked at (memory-aware variants were
// measured and did not help).
//
// Cost: per decision, one pass over the nodes' generations when the workload names GPU types
// (for ρ). Per option, one cached value: per node and pod shape the costs by GPU index are
// kept while the node's generation stands, so a placement recomputes one node; a recompute
// is O(|workload| × GPUs per GPU choice), plus, with terms 4–6, the pods on each of the node's
// GPUs checked against the tight patterns (O(GPUs × patterns × pods per GPU)). The LP is
// solved once, when the plugin is built (about a millisecond for 20 sizes). Threading: one
// thread at a time (mutable caches keyed by NodeRecord::generation, like the artifact
// plugins); scores depend only on the state and the request, never on what the instance saw
// before.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "common/result.h"
#include "sched/plugin.h"
#include "sched/plugins/artifact_policies.h"

namespace tessera::sched {

struct PackingGradientWeights {
  double stranding = 2.0;       // weight of the stranded-GPU term
  double cpuPerGpuScale = 1.0;  // κ as a multiple of the workload's CPU per milli-GPU
  double typePressure = 4.0;    // weight of the type-pressure term
  double lpWaste = 30.0;        // weight of term 4 (LP waste committed), per milli-GPU
  double patternOrder = 100.0;  // term 5: milli-GPU per placement class step
  double completionReserve = 2.0;  // weight of term 6 (CPU for open patterns)
};

// U(node) of term 1: Σ_m p_m × usable_m in milli-GPU. `gpuType` is the node's catalogue type
// index (-1: no GPUs); shapes must be resolved (resolveTaskShapes).
double usableCapacityMilli(std::int64_t freeCpuMilli, std::span<const std::int32_t> freeGpuMilli,
                           int gpuType, std::span<const TaskShape> workload);

// S(node) of term 2, for κ in CPU milli per milli-GPU (κ <= 0: no term).
double strandedGpuMilli(std::int64_t freeCpuMilli, std::span<const std::int32_t> freeGpuMilli,
                        double cpuPerGpuMilli);

// args: {workload: [task shapes as parseTaskShapes reads them], stranding = 2,
//        cpuPerGpuScale = 1, typePressure = 4, lpWaste = 30, patternOrder = 100,
//        completionReserve = 2}. The workload is required. Terms 4–6 need sharing shapes
//        (0 < g < 1000) in the workload; without them they are 0.
Result<std::unique_ptr<ScorePlugin>> createPackingGradient(const PluginArgs& args);

inline constexpr std::string_view kPackingGradientName = "PackingGradient";

}  // namespace tessera::sched
