#pragma once
// Clusters and request mixes for the placement benchmarks (docs/benchmarks.md describes them).
// Everything random comes from one seeded generator: the same seed builds the same cluster
// and the same requests on every machine. TESSERA_BENCH_SEED overrides the default seed.
//
// Threading: plain functions and values; a Fleet is used by one thread at a time.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "model/gpu_catalog.h"
#include "model/workload.h"
#include "sched/cluster_state.h"

namespace tessera::bench {

// A cluster state together with the catalogue and clock it borrows, at a fixed address.
struct Fleet {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock{0};
  std::unique_ptr<sched::ClusterState> state;
  std::vector<std::string> gpuTypes;  // catalogue names present, for type-constrained requests
  int residentReplicas = 0;
  double memoryUsedFraction = 0;  // charged / capacity over every GPU of known capacity
};

struct SyntheticOptions {
  int gpus = 10'000;         // rounded up to whole 8-GPU nodes
  double memoryFill = 0.60;  // stop filling once this fraction of GPU memory is charged
  bool saturate = false;     // every GPU's fill target is the whole card (no fresh nodes)
  std::uint64_t seed = 1;
};

// Nodes of 8 GPUs of one type each (the last node holds the remainder) (a mix of H200, H100, A100
// 80/40 GB on NVSwitch boards, L40S, A10, L4 and T4 on PCIe), two NUMA nodes per board, a few
// MIG-mode, tainted and cordoned nodes; pre-filled with loaded replicas of mixed model sizes (1, 2
// GPUs) whose reservations have lapsed, up to `memoryFill` of the fleet's GPU memory.
std::unique_ptr<Fleet> syntheticFleet(const SyntheticOptions& options);

// The Alibaba GPU cluster of the FGD experiments (openb_node_list_gpu_node.csv: 1,213 nodes,
// 6,212 GPUs), empty. The trace has no topology; its undisclosed G2 and G3 types get the
// memory below (assumptions, documented in docs/benchmarks.md).
Result<std::unique_ptr<Fleet>> alibabaFleet(const std::string& csvPath);
inline constexpr std::int64_t kG2MemoryMib = 32 * 1024;
inline constexpr std::int64_t kG3MemoryMib = 80 * 1024;

// $TESSERA_SHARED_DIR, else the build's TESSERA_SHARED_DIR (the repository's ../shared).
std::string sharedDir();
// $TESSERA_BENCH_SEED, else 20240601.
std::uint64_t benchSeed();

// A 7B model in fp16 (~16 GiB with KV cache), one shared GPU.
model::PlacementRequest small7bRequest(std::string replicaId);
// A 70B model in fp16 tensor-parallel over 4 NVLink-connected GPUs (~38 GiB per GPU).
model::PlacementRequest tp70bRequest(std::string replicaId);

// `count` replica requests of 45 inference deployments: many small models, 7-8B fp16, a few
// 2-, 4- and 8-GPU tensor-parallel replicas and exclusive-only ones, ~10 % of deployments
// pinned to one or two of `gpuTypes`. No NVLink or NUMA demands (the Alibaba trace has no
// topology), so the same mix runs on both batch clusters.
std::vector<model::PlacementRequest> inferenceMix(int count,
                                                  const std::vector<std::string>& gpuTypes,
                                                  std::uint64_t seed);

}  // namespace tessera::bench
