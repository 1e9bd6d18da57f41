#pragma once
// ClusterState keeps the books of a GPU fleet: capacity, allocations, reservations, live
// usage and model residency. It is a state machine changed only by events (apply); every
// policy reads it through const accessors. Events are self-contained (names and times, see
// "Events" below): a log of them replays onto a fresh state and gives the same books.
//
// Memory accounting per GPU (what the memory-fit filter sees as free):
//   free = capacity - foreign - sum over replicas of charge(replica)
// where charge is
//   - while the replica's reservation is active: max(reserved, usage attributed to it),
//   - once telemetry has shown its real usage after it loaded: that usage,
//   - after the reservation lapsed (TTL) without such telemetry: its raw estimate;
// and foreign = telemetry-reported usage not attributed to any replica (other processes).
// A replica's memory is therefore never counted twice (reservation plus live usage).
// Compute and bandwidth are booked by request: the sum of what the replicas asked for.
//
// Threading: single owner. One thread (the server's event loop, the simulator loop) calls
// apply() and reads; other threads send it events. No internal locking.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "model/gpu_catalog.h"
#include "model/inventory.h"
#include "sched/types.h"

namespace tessera::sched {

// ---- Events -------------------------------------------------------------------------------
//
// Events are self-contained, so that a log of them replays onto a fresh state and gives the
// same books: they name nodes, GPUs (by id on their node) and replicas, never the state's
// dense ids, and every event whose effect depends on time carries that time. apply() never
// reads a clock. The one who applies an event stamps it (the engine, the control plane, the
// extender, the simulators, a cluster file's seeding).

struct NodeAdded {
  model::NodeSpec node;
};
// Replaces labels, taints, health, cordon, cached models, CPU, host memory and GPU settings
// of an existing node with those of `node` (the whole spec). GPU capacity and topology may
// change only on GPUs that hold no replica. To change one thing, NodePatched.
struct NodeUpdated {
  model::NodeSpec node;
};
// Changes only the fields present on node `name`; everything else stays as it is. GPUs are
// named by id; one not on the node refuses the whole patch.
struct NodePatched {
  std::string name;
  std::optional<bool> healthy;
  std::optional<bool> cordoned;
  std::optional<std::vector<std::string>> cachedModels;
  std::optional<std::map<std::string, std::string>> labels;
  std::optional<std::vector<model::Taint>> taints;
  std::map<std::string, bool> gpuHealthy;  // by GPU id
};
// Fails while replicas are still placed on the node unless `force`, which unloads them.
struct NodeRemoved {
  std::string name;
  bool force = false;
};
// What the node's agent measured on one GPU at `atMs`.
struct GpuTelemetry {
  std::string node;
  std::string gpuId;
  std::int64_t usedMib = 0;             // whole-card usage as NVML reports it
  std::int32_t utilizationMilli = 0;    // SM activity, thousandths
  std::map<std::string, std::int64_t> replicaUsedMib;  // usage attributed to replicas
  bool healthy = true;
  Millis atMs = 0;  // GpuRecord::telemetryAtMs
};
// A replica booked at `atMs`: its reservation lapses at atMs + the TTL (ReservationsExpired).
struct ReplicaPlaced {
  NamedPlacement placement;
  Millis atMs = 0;
};
// The replica finished loading its weights and serves traffic.
struct ReplicaLoaded {
  std::string replicaId;
};
// The replica was unloaded (or failed); its resources are free.
struct ReplicaUnloaded {
  std::string replicaId;
};
// The replica served a request at `atMs` (feeds least-recently-used eviction order).
struct ReplicaActivity {
  std::string replicaId;
  Millis atMs = 0;
};
// Lapses every reservation whose TTL has passed at `nowMs`. No default: the time is the event.
struct ReservationsExpired {
  explicit ReservationsExpired(Millis now) : nowMs(now) {}
  Millis nowMs;
};
// A replica the books held before, put back as it was booked (a restart from the store, a
// rollback) at `atMs`: placed at `placedAtMs`, its reservation active only if
// `reservationActive` and its TTL from then has not passed by atMs, charged what it was.
// Every check of ReplicaPlaced applies except memory fit: memory is the one figure that
// follows telemetry, which is not restored with it, so a replica admitted against observed
// usage may not fit the estimates; it holds that memory on the card all the same. A GPU it
// leaves over-committed shows negative free memory (nothing more is placed there) until
// telemetry charges it again.
struct ReplicaRestored {
  NamedPlacement placement;
  Millis placedAtMs = 0;
  bool reservationActive = true;
  bool loaded = false;
  // Per GPU, usage telemetry attributed to it (-1: none); empty: none on any GPU.
  std::vector<std::int64_t> attributedMib;
  Millis atMs = 0;
};

using Event = std::variant<NodeAdded, NodeUpdated, NodeRemoved, GpuTelemetry, ReplicaPlaced,
                           ReplicaLoaded, ReplicaUnloaded, ReplicaActivity, ReservationsExpired,
                           ReplicaRestored, NodePatched>;
std::string_view eventName(const Event& event);

class ClusterState;
// The event that books `p`, decided on `state` (dense ids), at `atMs`: p's node and GPUs
// named as `state` knows them.
ReplicaPlaced replicaPlaced(const ClusterState& state, const Placement& p, Millis atMs);

// ---- Read-only records --------------------------------------------------------------------

enum class ReplicaPhase : std::uint8_t { kReserved, kLoaded };

struct MigInstance {
  std::int16_t profile = -1;  // index into the GPU type's migProfiles
  std::int8_t start = 0;
  ReplicaId occupant = -1;    // -1: free
  bool dynamic = false;       // created by Tessera for its occupant; destroyed when freed
};

struct GpuRecord {
  NodeId node = -1;
  int indexInNode = 0;
  int typeIndex = -1;  // into the catalogue
  model::GpuSpec spec;  // capacity filled in from the catalogue
  // Bookkeeping (derived from replicas and telemetry; kept incrementally).
  std::int64_t chargedMib = 0;
  std::int64_t foreignMib = 0;
  std::int32_t bookedComputeMilli = 0;
  double bookedBandwidthGBps = 0;
  bool exclusive = false;  // held whole by one replica
  std::uint32_t migSlotsUsed = 0;  // bit i: memory slice i belongs to an instance
  std::vector<MigInstance> migInstances;
  std::vector<ReplicaId> replicas;
  // Live telemetry.
  bool hasTelemetry = false;
  std::int64_t telemetryUsedMib = 0;
  std::int32_t utilizationMilli = 0;
  Millis telemetryAtMs = 0;

  std::int64_t freeMemoryMib() const { return spec.memoryMib - chargedMib - foreignMib; }
  std::int32_t freeComputeMilli() const { return spec.computeMilli - bookedComputeMilli; }
  bool healthy() const { return spec.healthy; }
};

struct NodeRecord {
  model::NodeSpec spec;  // `gpus` is emptied; see gpuIds
  std::vector<GpuId> gpuIds;
  bool removed = false;
  std::int64_t rank = 0;
  std::int64_t bookedCpuMilli = 0;
  std::int64_t bookedHostMemoryMib = 0;
  std::vector<ReplicaId> replicas;
  // Changes whenever anything about the node or its GPUs changes. Values come from one
  // process-wide counter, so they never repeat, even across copies of a state: a plugin may
  // memoise per-node work keyed by (node id, generation).
  std::uint64_t generation = 0;

  std::int64_t freeCpuMilli() const { return spec.cpuMilli - bookedCpuMilli; }
  std::int64_t freeHostMemoryMib() const { return spec.hostMemoryMib - bookedHostMemoryMib; }
};

struct ReplicaRecord {
  Placement placement;
  ReplicaPhase phase = ReplicaPhase::kReserved;
  Millis placedAtMs = 0;
  Millis lastActiveMs = 0;
  std::int32_t modelId = -1;       // ClusterState::nameId of placement.modelName
  std::int32_t deploymentId = -1;  // ... and of placement.deployment
  bool reservationActive = true;
  bool removed = false;
  // Per GPU (parallel to placement.gpus): current charge and attributed telemetry usage.
  std::vector<std::int64_t> chargeMib;
  std::vector<std::int64_t> attributedMib;  // -1: no telemetry names this replica yet
};

// ---- The state ----------------------------------------------------------------------------

class ClusterState {
 public:
  // `clock` is the owner's clock, kept for reads only: apply() and every query below ignore
  // it (times come with the events, and no query depends on "now": a reservation is active
  // until a ReservationsExpired or its settling says otherwise). It is kept so that code
  // acting on the owner's behalf without a clock of its own can stamp the events it makes:
  // PlacementEngine::place (and planBatch through it), the eviction planner's what-ifs on
  // scratch copies, a cluster file's seeding. A replay may use a state whose clock reads
  // anything: the books it gets depend on the events alone.
  ClusterState(const model::GpuCatalog& catalog, const Clock& clock, EngineOptions options = {});

  // Applies one event. On error nothing changed.
  Result<void> apply(const Event& event);

  // A placement decided on this state, with its node and GPUs named (the event's form). Ids
  // that name nothing here, and GPUs not on p's node, become empty names, which apply refuses.
  NamedPlacement named(const Placement& p) const;
  // The other way: the named node and GPUs resolved to this state's ids (not found: an error
  // that names them). Nothing else is checked; checkPlacement does that.
  Result<Placement> resolve(const NamedPlacement& p) const;

  // Copies (the batch planner and the eviction planner work on scratch copies).
  ClusterState(const ClusterState&) = default;
  ClusterState& operator=(const ClusterState&) = delete;

  const model::GpuCatalog& catalog() const { return *catalog_; }
  const Clock& clock() const { return *clock_; }
  const EngineOptions& options() const { return options_; }

  // Tables, indexed by id; removed entries stay as tombstones (check `removed`). A removed
  // replica's slot (and id) is given to the next replica placed, a removed node's (and its
  // GPUs') to the next node with as many GPUs: hold ids only within one decision, and names
  // across changes.
  std::span<const NodeRecord> nodes() const { return nodes_; }
  std::span<const GpuRecord> gpus() const { return gpus_; }
  std::span<const ReplicaRecord> replicas() const { return replicas_; }
  const NodeRecord& node(NodeId id) const { return nodes_[static_cast<std::size_t>(id)]; }
  const GpuRecord& gpu(GpuId id) const { return gpus_[static_cast<std::size_t>(id)]; }
  const ReplicaRecord& replica(ReplicaId id) const {
    return replicas_[static_cast<std::size_t>(id)];
  }

  std::optional<NodeId> findNode(std::string_view name) const;
  std::optional<GpuId> findGpu(std::string_view node, std::string_view gpuId) const;
  std::optional<ReplicaId> findReplica(std::string_view replicaId) const;

  // Changes whenever anything in the state changes; unique across copies (see generation).
  std::uint64_t generation() const { return generation_; }

  int liveNodeCount() const { return liveNodes_; }
  int liveGpuCount() const { return liveGpus_; }
  int liveReplicaCount() const { return static_cast<int>(replicaIndex_.size()); }
  int activeReservationCount() const { return activeReservations_; }
  // The earliest instant a reservation lapses; nullopt if none is active.
  std::optional<Millis> nextReservationExpiryMs() const;

  // Model and deployment names of placed replicas, interned: -1 for a name no replica has
  // ever carried. Score plugins resolve the request's names once per decision and then use
  // the id overloads below, which compare integers.
  std::int32_t nameId(std::string_view name) const;

  // True when the model's weights are in GPU memory on this GPU (a replica of it is placed).
  bool modelResidentOnGpu(GpuId gpu, std::string_view modelName) const;
  bool modelResidentOnGpu(GpuId gpu, std::int32_t modelId) const;
  // The same, counting only replicas of other deployments than `exceptDeploymentId`.
  bool modelResidentOnGpu(GpuId gpu, std::int32_t modelId, std::int32_t exceptDeploymentId) const;
  // True when the node's local cache holds the model's weights.
  bool modelCachedOnNode(NodeId node, std::string_view modelName) const;
  // Replicas of a deployment placed on a node.
  int deploymentReplicasOnNode(NodeId node, std::string_view deployment) const;
  int deploymentReplicasOnNode(NodeId node, std::int32_t deploymentId) const;
  // Replicas of a deployment on a GPU.
  int deploymentReplicasOnGpu(GpuId gpu, std::int32_t deploymentId) const;

  // Largest memory a new placement could get on a GPU: free memory, or on a MIG card the
  // biggest free or creatable instance. This is the key of the capacity index.
  std::int64_t placeableMemoryMib(GpuId gpu) const;
  // The capacity keys, kept on every change: a GPU's placeableMemoryMib (-1 when it is
  // removed or unhealthy), and per node the largest key of its GPUs and the largest free
  // compute of its non-MIG GPUs. The engine skips whole nodes and GPUs with them: the books
  // would refuse a placement beyond them whatever the filters say. O(1).
  std::int64_t indexedPlaceableMib(GpuId gpu) const {
    return indexedKey_[static_cast<std::size_t>(gpu)];
  }
  std::int64_t nodePlaceableMib(NodeId node) const {
    return nodeMaxKey_[static_cast<std::size_t>(node)];
  }
  std::int32_t nodeMaxFreeComputeMilli(NodeId node) const {
    return nodeMaxCompute_[static_cast<std::size_t>(node)];
  }
  // Healthy, live GPUs with placeableMemoryMib >= minMib, in ascending placeable memory
  // (then id). fn returns false to stop early. O(GPUs log GPUs): for tools and tests.
  template <typename Fn>
  void forEachGpuWithPlaceableMemory(std::int64_t minMib, Fn&& fn) const {
    std::vector<std::pair<std::int64_t, GpuId>> keyed;
    for (std::size_t g = 0; g < indexedKey_.size(); ++g) {
      if (indexedKey_[g] >= 0 && indexedKey_[g] >= minMib) {
        keyed.emplace_back(indexedKey_[g], static_cast<GpuId>(g));
      }
    }
    std::sort(keyed.begin(), keyed.end());
    for (const auto& [key, g] : keyed) {
      if (!fn(g)) return;
    }
  }

  // Checks every bookkeeping invariant from scratch (no GPU over-committed in any dimension,
  // MIG layouts legal, indices consistent); returns the first violation. For tests and
  // debug builds; O(size of state).
  Result<void> checkInvariants() const;

  // Whether apply(ReplicaPlaced{p}) would accept `p`, and if not, why; changes nothing.
  Result<void> checkPlacement(const Placement& p) const;

 private:
  // checkPlacement; without memory fit for ReplicaRestored.
  Result<void> checkBooking(const Placement& p, bool memoryFit) const;
  // Replicas of a deployment among `replicas` (a node's or a GPU's).
  int countOfDeployment(const std::vector<ReplicaId>& replicas, std::int32_t deploymentId) const;
  Result<void> addNode(const model::NodeSpec& spec);
  Result<void> updateNode(const model::NodeSpec& spec);
  Result<void> patchNode(const NodePatched& ev);
  Result<void> removeNode(const NodeRemoved& ev);
  Result<void> telemetry(const GpuTelemetry& ev);
  Result<void> place(const ReplicaPlaced& ev);
  Result<void> restoreReplica(const ReplicaRestored& ev);
  // Books an already checked placement; its reservation expires at placedAtMs + TTL.
  ReplicaId book(const Placement& placement, Millis placedAtMs);
  Result<void> loaded(const std::string& replicaId);
  Result<void> unload(const std::string& replicaId);
  Result<void> activity(const ReplicaActivity& ev);
  void expireReservations(Millis nowMs);

  Result<model::GpuSpec> resolveGpu(const model::NodeSpec& node, const model::GpuSpec& gpu,
                                    int* typeIndex) const;
  void recharge(ReplicaId id);  // recomputes a replica's per-GPU charge from its state
  void setCharge(ReplicaId id, std::size_t slot, std::int64_t charge);
  void reindex(GpuId gpu);
  void releaseReplica(ReplicaId id);
  void touch(NodeId node);  // new generation

  const model::GpuCatalog* catalog_;
  const Clock* clock_;
  EngineOptions options_;
  std::vector<NodeRecord> nodes_;
  std::vector<GpuRecord> gpus_;
  std::vector<ReplicaRecord> replicas_;
  std::vector<ReplicaId> freeReplicaSlots_;  // removed replicas' slots, reused by place()
  std::vector<NodeId> freeNodeSlots_;  // removed nodes' slots (with their GPUs'), reused by addNode
  std::unordered_map<std::string, NodeId> nodeIndex_;
  std::unordered_map<std::string, ReplicaId> replicaIndex_;
  std::unordered_map<std::string, std::int32_t> nameIds_;  // grows only
  std::vector<std::int64_t> indexedKey_;    // per GPU: placeableMemoryMib, or -1
  std::vector<std::int64_t> nodeMaxKey_;    // per node: the largest indexedKey_ of its GPUs
  std::vector<std::int32_t> nodeMaxCompute_;  // per node: the largest free compute (non-MIG)
  std::set<std::pair<Millis, ReplicaId>> expiries_;
  int liveNodes_ = 0;
  int liveGpus_ = 0;
  int activeReservations_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace tessera::sched
