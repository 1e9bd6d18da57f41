#pragma once
// Identifiers and small value types shared by the scheduler's state, plugins and engine.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/workload.h"

namespace tessera::sched {

// Dense indices into ClusterState's tables: an in-memory detail of one state. A removed
// node's or replica's slot is reused (see ClusterState::nodes), and another state holding the
// same nodes may number them otherwise, so events never carry them: they name nodes, GPUs
// and replicas.
using NodeId = std::int32_t;
using GpuId = std::int32_t;
using ReplicaId = std::int32_t;
constexpr int kMaxGpusPerReplica = 16;

// Which GPU wins among options of equal total score on the same node.
enum class GpuTieBreak : std::uint8_t {
  kBestFit,  // least free memory (then compute) left after placement, then lowest index
  kIndex,    // lowest GPU index on the node
};

// Scheduler-wide settings (the top of a placement profile).
struct EngineOptions {
  double memorySafetyFactor = 1.2;   // applied to a replica's memory estimate
  Millis reservationTtlMs = 30'000;  // how long a reservation waits for telemetry
  GpuTieBreak gpuTieBreak = GpuTieBreak::kBestFit;
  // Whether a MIG placement may create a new instance (the node agent makes it). false: only
  // free instances that exist are placed on, as in a DRA cluster, which publishes the MIG
  // instances a card has (docs/dra.md). Every MIG decision reads it from the state's options.
  bool migCreation = true;
};

// What one request needs per GPU, derived once per decision.
struct Needs {
  int gpuCount = 1;
  std::int64_t estimateMib = 0;  // per GPU, before the safety factor
  std::int64_t memoryMib = 0;    // per GPU, estimate x safety factor, rounded up
  std::int32_t computeMilli = 0;
  double bandwidthGBps = 0;
  std::int64_t cpuMilli = 0;
  std::int64_t hostMemoryMib = 0;
};
Needs deriveNeeds(const model::PlacementRequest& request, const EngineOptions& options);

// One candidate placement for a request: a node and the GPUs (or MIG slice) it would use.
struct Option {
  NodeId node = -1;
  std::int8_t gpuCount = 0;
  model::SharingMode mode = model::SharingMode::kShared;
  std::array<GpuId, kMaxGpusPerReplica> gpus{};
  // MIG only: the profile index in the GPU type and the first memory slice of the instance.
  std::int16_t migProfile = -1;
  std::int8_t migStart = -1;
  bool migCreates = false;  // the instance must be created (no free one of that shape)
};

// Per-GPU share of a placed replica.
struct GpuAssignment {
  GpuId gpu = -1;
  std::int64_t estimateMib = 0;  // the raw estimate (charged after the reservation lapses)
  std::int64_t reservedMib = 0;  // estimate x safety factor, or the whole card / MIG slice
  std::int32_t computeMilli = 0;
  double bandwidthGBps = 0;
  std::int16_t migProfile = -1;
  std::int8_t migStart = -1;
};

// A decision as the engine returns it and the books keep it: node and GPUs by dense id, good
// only for the state it was decided on (see ClusterState). Events carry a NamedPlacement.
struct Placement {
  std::string replicaId;
  std::string deployment;
  std::string modelName;
  int priority = 0;
  model::SharingMode mode = model::SharingMode::kShared;
  NodeId node = -1;
  std::vector<GpuAssignment> gpus;
  std::int64_t cpuMilli = 0;
  std::int64_t hostMemoryMib = 0;
};

// A GpuAssignment as an event carries it: the GPU by its id on the placement's node (unique
// there, and the same in every state that holds the node).
struct NamedGpuAssignment {
  std::string gpuId;
  std::int64_t estimateMib = 0;
  std::int64_t reservedMib = 0;
  std::int32_t computeMilli = 0;
  double bandwidthGBps = 0;
  std::int16_t migProfile = -1;
  std::int8_t migStart = -1;
};

// A Placement as an event carries it (ReplicaPlaced, ReplicaRestored): the node by name, its
// GPUs by id, so that a log of events replays onto any state that holds those nodes.
// ClusterState::named and ClusterState::resolve convert between the two.
struct NamedPlacement {
  std::string replicaId;
  std::string deployment;
  std::string modelName;
  int priority = 0;
  model::SharingMode mode = model::SharingMode::kShared;
  std::string node;
  std::vector<NamedGpuAssignment> gpus;
  std::int64_t cpuMilli = 0;
  std::int64_t hostMemoryMib = 0;
};

}  // namespace tessera::sched
