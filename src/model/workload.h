#pragma once
// Workload value types: a model's resource profile and one replica placement request.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/inventory.h"

namespace tessera::model {

enum class SharingMode : std::uint8_t {
  kExclusive = 1,  // the replica owns whole GPUs
  kShared = 2,     // a fraction of a GPU, next to other replicas (time-sliced / MPS)
  kMig = 4,        // a MIG slice
};
using SharingModes = std::uint8_t;  // bit set of SharingMode
constexpr SharingModes kAllSharingModes = 1 | 2 | 4;
inline bool allows(SharingModes set, SharingMode mode) {
  return (set & static_cast<SharingModes>(mode)) != 0;
}
const char* sharingModeName(SharingMode mode);

// What one replica of a model needs, per GPU. The memory fit filter multiplies the
// estimate by the profile's safety factor; the figures here are the raw estimate.
struct ModelProfile {
  std::string name;
  std::int64_t weightsMib = 0;     // whole model; split evenly across gpusPerReplica
  std::int64_t kvCacheMib = 0;     // KV-cache reserve for the whole replica
  std::int64_t overheadMib = 0;    // activations, CUDA context, allocator slack
  std::int32_t computeMilli = 0;   // per GPU, thousandths of a GPU's SMs
  double memoryBandwidthGBps = 0;  // per GPU
  int gpusPerReplica = 1;          // tensor-parallel degree
  bool nvlinkRequired = false;     // multi-GPU replica needs an NVLink-connected set
  bool numaAligned = false;        // all GPUs (and CPUs) on one NUMA node
  int priority = 0;                // higher wins; eviction only takes strictly lower
  SharingModes sharing = kAllSharingModes;
  std::string migProfile;          // smallest acceptable MIG profile ("" = any that fits)
  std::int64_t cpuMilli = 0;       // host CPU per replica
  std::int64_t hostMemoryMib = 0;  // host memory per replica

  // Memory one GPU of the replica needs before the safety factor.
  std::int64_t memoryPerGpuMib() const {
    const std::int64_t total = weightsMib + kvCacheMib + overheadMib;
    const std::int64_t n = gpusPerReplica > 0 ? gpusPerReplica : 1;
    return (total + n - 1) / n;
  }
};

// A request to place one replica.
struct PlacementRequest {
  std::string replicaId;  // unique across the cluster
  ModelProfile model;
  std::vector<std::string> gpuTypes;  // acceptable GPU types; empty = any
  std::map<std::string, std::string> nodeSelector;
  std::vector<Toleration> tolerations;
  std::string deployment;  // replicas of one deployment repel each other (anti-affinity)
};

}  // namespace tessera::model
