#pragma once
// The placement policies of the FGD paper's artifact (Weng et al., USENIX ATC '23;
// hkust-adsl/kubernetes-scheduler-simulator), as score plugins with the artifact's integer
// scores, so that `tessera simulate fgd` reproduces its experiments with the real engine in
// the loop. shared/docs/fgd-benchmark.md sections 4-5 define them; docs/simulator-policies.md
// gives each formula and how it maps onto Tessera's engine.
//
// Resource mapping used throughout: a trace pod is a PlacementRequest with
// model.cpuMilli / hostMemoryMib = the pod's CPU and memory, model.gpusPerReplica = k and
// model.computeMilli = g (per-GPU milli-GPUs; 1000 = a whole GPU), no GPU memory; a GPU's
// "free milli" r_i is GpuRecord::freeComputeMilli(), a node's free CPU is
// NodeRecord::freeCpuMilli(). Like the artifact, the policies take a GPU to be 1000 milli
// (kArtifactMilliPerGpu): "fully free" means r_i == 1000, a sharing pod is k == 1 and
// g < 1000, and the normalisers are 128 cores and 8 GPUs.
//
// Registered plugins (registerArtifactPlugins):
//   ArtifactRandom {seed}     uniform random feasible node; uniform random fitting GPU for a
//                             sharing pod (reproducible in distribution only)
//   ArtifactDotProd           Tetris dot product of free (CPU, GPU) and the request
//   ArtifactGpuClustering     keeps pods of one GPU-count tag together
//   ArtifactGpuPacking        shared GPUs first, then used nodes, then empty nodes
//   ArtifactBestFit           least CPU and GPU left, min-max normalised over feasible nodes
//   ArtifactFgd {workload}    fragmentation gradient descent against a target workload
// The four packing baselines score nodes (every option on a node gets the node's score) and
// rely on the engine's gpuTieBreak=bestFit to pick the artifact's best-fit GPU; ArtifactFgd
// scores each GPU of a sharing pod and wants gpuTieBreak=index.
//
// Threading: like every plugin, one thread at a time. The plugins memoise per-node work in
// mutable caches keyed by NodeRecord::generation, so a plugin instance may be used across
// decisions, states and state copies, but never from two threads at once.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sched/plugin.h"

namespace tessera::sched {

inline constexpr std::int32_t kArtifactMilliPerGpu = 1000;

// One task shape of a target workload ("typical pods"): what FGD measures fragments against.
struct TaskShape {
  std::int64_t cpuMilli = 0;
  std::int32_t gpuMilli = 0;          // per GPU; 0 for CPU-only shapes
  int gpus = 0;                       // k; 0 for CPU-only shapes
  std::vector<std::string> gpuTypes;  // acceptable types (catalogue names); empty = any
  std::vector<int> gpuTypeIndices;    // the same, resolved by resolveTaskShapes
  double weight = 0;                  // popularity p_m in [0, 1]; a workload's weights sum to 1
};

// Resolves every shape's gpuTypes against the catalogue; unknown names are an error that
// lists the known ones.
Result<void> resolveTaskShapes(const model::GpuCatalog& catalog, std::vector<TaskShape>& shapes);

// Parses {"workload": [{"cpuMilli", "gpuMilli", "gpus", "gpuTypes", "weight"}, ...]}: a
// non-empty list; cpuMilli >= 0, gpuMilli 0..1000 and gpus 0..16 (both 0 for a CPU-only
// shape, both > 0 otherwise), gpuTypes optional, weight required in [0, 1]. The order of the
// list is kept: it is the order in which FGD sums (see fgdNodeFragmentMilli).
Result<std::vector<TaskShape>> parseTaskShapes(const PluginArgs& args);
// The inverse of parseTaskShapes (weights round-trip exactly).
PluginArgs taskShapesToArgs(std::span<const TaskShape> shapes);

// The artifact's fragment measure of one node for a target workload, in GPU milli
// (fgd-benchmark.md section 5): per shape m, all free GPU milli R counts when m is CPU-only,
// cannot use the node's GPU type, or does not fit; when m fits, only the GPUs too small for
// it count. Amounts p_m x milli are summed per category in workload order, then across the
// categories (Q1, Q2, Q4, XL, XR, NA), as the artifact does, so results are bit-identical.
// `gpuType` is the node's catalogue type index (-1: no GPUs); `freeGpuMilli` one entry per
// GPU, any order. A shape with gpuTypes accepts only the types in gpuTypeIndices, so an
// unresolved shape (names but no indices) matches no node.
double fgdNodeFragmentMilli(std::int64_t freeCpuMilli, std::span<const std::int32_t> freeGpuMilli,
                            int gpuType, std::span<const TaskShape> workload);

// Registers "ArtifactRandom" (args: seed), "ArtifactDotProd", "ArtifactGpuClustering",
// "ArtifactGpuPacking", "ArtifactBestFit", "ArtifactFgd" (args: workload). Separate from
// registerBuiltinPlugins so that the server's registry stays lean; the simulator calls both.
void registerArtifactPlugins(PluginRegistry& registry);

}  // namespace tessera::sched
