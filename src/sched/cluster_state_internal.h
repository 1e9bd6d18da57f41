#pragma once
// Helpers shared by cluster_state.cc and cluster_state_invariants.cc; not part of the API.

#include <cstdint>
#include <string>

#include "sched/cluster_state.h"

namespace tessera::sched::internal {

inline std::string gpuName(const NodeRecord& node, const GpuRecord& gpu) {
  return node.spec.name + "/" + gpu.spec.id;
}

// The MIG memory slices [start, start + count) as a bit mask.
inline std::uint32_t slotMask(int start, int count) { return ((1u << count) - 1u) << start; }

}  // namespace tessera::sched::internal
