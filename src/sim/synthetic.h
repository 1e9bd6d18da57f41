#pragma once
// The built-in synthetic cluster and workload of `tessera simulate fgd` without a trace: a
// 100-node, 528-GPU cluster shaped like the Alibaba trace's (docs/simulator.md gives the
// tables) and a pod list drawn from a seed with the trace's mix of CPU-only, GPU-sharing,
// one-GPU and multi-GPU tasks, until its GPU requests reach 98 % of capacity (the default
// trace's 98.0 %). The experiment then treats it like any trace (typical pods, tuning to
// 1.3 × capacity, seeded arrival orders and ranks).

#include <cstdint>
#include <vector>

#include "model/inventory.h"
#include "sim/trace.h"

namespace tessera::sim {

struct SyntheticTrace {
  std::vector<model::NodeSpec> nodes;
  std::vector<TracePod> pods;
};

// Deterministic for a seed on every platform. GPU types are catalogue names.
SyntheticTrace makeSyntheticTrace(std::uint64_t seed);

}  // namespace tessera::sim
