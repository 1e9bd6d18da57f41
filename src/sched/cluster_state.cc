#include "sched/cluster_state.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "model/mig.h"
#include "sched/cluster_state_internal.h"

namespace tessera::sched {
namespace {

using internal::gpuName;
using internal::slotMask;

bool slotsFree(std::uint32_t used, int start, int count) {
  const std::uint32_t mask = ((count >= 32) ? ~0u : ((1u << count) - 1u)) << start;
  return (used & mask) == 0;
}

int instancesOfProfile(const GpuRecord& gpu, int profile) {
  return static_cast<int>(
      std::count_if(gpu.migInstances.begin(), gpu.migInstances.end(),
                    [&](const MigInstance& m) { return m.profile == profile; }));
}

// True when an instance of `profile` may be created at `start` on this card now.
bool migCreatable(const model::GpuType& type, const GpuRecord& gpu, int profile, int start) {
  const model::MigProfile& p = type.migProfiles[static_cast<std::size_t>(profile)];
  if (std::find(p.allowedStarts.begin(), p.allowedStarts.end(), start) == p.allowedStarts.end()) {
    return false;
  }
  if (start + p.slotCount > type.migMemorySlots) return false;
  if (p.maxInstances > 0 && instancesOfProfile(gpu, profile) >= p.maxInstances) return false;
  // A card has one media-extension engine: at most one "+me" instance (model/mig.h).
  if (model::isMediaExtended(p) &&
      std::any_of(gpu.migInstances.begin(), gpu.migInstances.end(), [&](const MigInstance& m) {
        return model::isMediaExtended(type.migProfiles[static_cast<std::size_t>(m.profile)]);
      })) {
    return false;
  }
  return slotsFree(gpu.migSlotsUsed, start, p.slotCount);
}

}  // namespace

std::string_view eventName(const Event& event) {
  static constexpr std::string_view kNames[] = {
      "NodeAdded",           "NodeUpdated",     "NodeRemoved",     "GpuTelemetry",
      "ReplicaPlaced",       "ReplicaLoaded",   "ReplicaUnloaded", "ReplicaActivity",
      "ReservationsExpired", "ReplicaRestored", "NodePatched"};
  static_assert(std::size(kNames) == std::variant_size_v<Event>);
  return kNames[event.index()];
}

ClusterState::ClusterState(const model::GpuCatalog& catalog, const Clock& clock,
                           EngineOptions options)
    : catalog_(&catalog), clock_(&clock), options_(options) {}

Result<void> ClusterState::apply(const Event& event) {
  return std::visit(
      [this](const auto& ev) -> Result<void> {
        using T = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<T, NodeAdded>) return addNode(ev.node);
        if constexpr (std::is_same_v<T, NodeUpdated>) return updateNode(ev.node);
        if constexpr (std::is_same_v<T, NodeRemoved>) return removeNode(ev);
        if constexpr (std::is_same_v<T, GpuTelemetry>) return telemetry(ev);
        if constexpr (std::is_same_v<T, ReplicaPlaced>) return place(ev);
        if constexpr (std::is_same_v<T, ReplicaLoaded>) return loaded(ev.replicaId);
        if constexpr (std::is_same_v<T, ReplicaUnloaded>) return unload(ev.replicaId);
        if constexpr (std::is_same_v<T, ReplicaActivity>) return activity(ev);
        if constexpr (std::is_same_v<T, ReservationsExpired>) {
          expireReservations(ev.nowMs);
          return {};
        }
        if constexpr (std::is_same_v<T, ReplicaRestored>) return restoreReplica(ev);
        if constexpr (std::is_same_v<T, NodePatched>) return patchNode(ev);
      },
      event);
}

// ---- queries -----------------------------------------------------------------------------

std::int64_t ClusterState::placeableMemoryMib(GpuId g) const {
  const GpuRecord& rec = gpu(g);
  if (!rec.spec.migEnabled) {
    if (rec.exclusive) return 0;
    return std::max<std::int64_t>(0, rec.freeMemoryMib());
  }
  const model::GpuType& type = catalog_->at(rec.typeIndex);
  std::int64_t best = 0;
  for (const MigInstance& m : rec.migInstances) {
    if (m.occupant < 0) {
      best = std::max(best, type.migProfiles[static_cast<std::size_t>(m.profile)].memoryMib);
    }
  }
  for (std::size_t p = 0; options_.migCreation && p < type.migProfiles.size(); ++p) {
    const model::MigProfile& prof = type.migProfiles[p];
    if (prof.memoryMib <= best) continue;
    for (int start : prof.allowedStarts) {
      if (migCreatable(type, rec, static_cast<int>(p), start)) {
        best = prof.memoryMib;
        break;
      }
    }
  }
  return best;
}

// ---- nodes --------------------------------------------------------------------------------

Result<model::GpuSpec> ClusterState::resolveGpu(const model::NodeSpec& n, const model::GpuSpec& in,
                                                int* typeIndex) const {
  const std::string where = "node " + n.name + " gpu " + in.id;
  if (in.id.empty()) return fail(Error::invalid("node " + n.name + ": a GPU has an empty id"));
  const int t = catalog_->indexOf(in.type);
  if (t < 0) return fail(Error::invalid(where + ": unknown GPU type '" + in.type + "'"));
  const model::GpuType& type = catalog_->at(t);
  model::GpuSpec out = in;
  if (out.memoryMib < 0) return fail(Error::invalid(where + ": memoryMib must be >= 0"));
  if (out.memoryMib == 0 && type.memoryMib) out.memoryMib = *type.memoryMib;
  if (out.smCount == 0 && type.smCount) out.smCount = *type.smCount;
  if (out.memoryBandwidthGBps == 0 && type.memoryBandwidthGBps) {
    out.memoryBandwidthGBps = *type.memoryBandwidthGBps;
  }
  if (out.computeMilli <= 0 || out.computeMilli > 1000) {
    return fail(Error::invalid(where + ": computeMilli must be in 1..1000"));
  }
  if (out.timeSlicingReplicas < 0) {
    return fail(Error::invalid(where + ": timeSlicingReplicas must be >= 0"));
  }
  if (out.migEnabled && !type.migCapable()) {
    return fail(Error::invalid(where + ": migEnabled but type " + type.name + " has no MIG"));
  }
  // An NVLink group on a card whose form factor has no NVLink is a typo in the inventory,
  // and would make GpuTopology accept multi-GPU replicas that cannot exchange tensors fast.
  if (out.nvlinkGroup >= 0 && !type.opaque && !type.nvlinkGBps) {
    return fail(Error::invalid(where + ": an NVLink group is given, but type " + type.name +
                               " has no NVLink (its catalogue entry has no nvlinkGBps)"));
  }
  if (!out.migEnabled && !out.migInstances.empty()) {
    return fail(Error::invalid(where + ": migInstances given but migEnabled is false"));
  }
  *typeIndex = t;
  return out;
}

Result<void> ClusterState::addNode(const model::NodeSpec& spec) {
  if (spec.name.empty()) return fail(Error::invalid("node name is empty"));
  if (nodeIndex_.contains(spec.name)) {
    return fail(Error::exists("node " + spec.name + " already exists"));
  }
  if (spec.cpuMilli < 0 || spec.hostMemoryMib < 0) {
    return fail(Error::invalid("node " + spec.name + ": cpuMilli and hostMemoryMib must be >= 0"));
  }
  // A removed node's slot, and its GPUs' slots, go to the next node with as many GPUs (a node
  // replaced, or re-registered after a removal): months of node churn keep the tables at the
  // fleet's size.
  auto reuse = std::find_if(freeNodeSlots_.begin(), freeNodeSlots_.end(), [&](NodeId n) {
    return nodes_[static_cast<std::size_t>(n)].gpuIds.size() == spec.gpus.size();
  });
  const bool reused = reuse != freeNodeSlots_.end();
  const NodeId nid = reused ? *reuse : static_cast<NodeId>(nodes_.size());
  std::vector<GpuRecord> newGpus;
  newGpus.reserve(spec.gpus.size());
  for (std::size_t i = 0; i < spec.gpus.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (spec.gpus[j].id == spec.gpus[i].id) {
        return fail(Error::invalid("node " + spec.name + ": duplicate GPU id " + spec.gpus[i].id));
      }
    }
    GpuRecord rec;
    auto resolved = resolveGpu(spec, spec.gpus[i], &rec.typeIndex);
    if (!resolved) return fail(resolved.error());
    rec.spec = std::move(*resolved);
    rec.node = nid;
    rec.indexInNode = static_cast<int>(i);
    // Pre-existing MIG instances must form a legal layout.
    if (rec.spec.migEnabled) {
      const model::GpuType& type = catalog_->at(rec.typeIndex);
      auto layout = model::resolveMigInstances(type, rec.spec.migInstances);
      if (!layout) {
        return fail(Error::invalid("node " + spec.name + " gpu " + rec.spec.id + ": " +
                                   layout.error().message));
      }
      for (const model::MigPlacement& m : *layout) {
        rec.migSlotsUsed |=
            model::migSliceMask(type.migProfiles[static_cast<std::size_t>(m.profile)], m.start);
        rec.migInstances.push_back(
            {static_cast<std::int16_t>(m.profile), static_cast<std::int8_t>(m.start), -1, false});
      }
    }
    newGpus.push_back(std::move(rec));
  }
  NodeRecord node;
  node.spec = spec;
  node.spec.gpus.clear();
  node.rank = spec.rank.value_or(static_cast<std::int64_t>(nid));
  if (reused) {
    node.gpuIds = nodes_[static_cast<std::size_t>(nid)].gpuIds;
    freeNodeSlots_.erase(reuse);
    nodes_[static_cast<std::size_t>(nid)] = std::move(node);
    nodeMaxKey_[static_cast<std::size_t>(nid)] = -1;
    nodeMaxCompute_[static_cast<std::size_t>(nid)] = -1;
  } else {
    for (std::size_t i = 0; i < newGpus.size(); ++i) {
      node.gpuIds.push_back(static_cast<GpuId>(gpus_.size() + i));
    }
    nodes_.push_back(std::move(node));
    nodeMaxKey_.push_back(-1);
    nodeMaxCompute_.push_back(-1);
  }
  touch(nid);
  // All of the node's GPUs exist before the first reindex: it summarises over them.
  const std::vector<GpuId> gpuIds = nodes_[static_cast<std::size_t>(nid)].gpuIds;
  for (std::size_t i = 0; i < newGpus.size(); ++i) {
    const auto gi = static_cast<std::size_t>(gpuIds[i]);
    if (reused) {
      gpus_[gi] = std::move(newGpus[i]);
      indexedKey_[gi] = -1;
    } else {
      gpus_.push_back(std::move(newGpus[i]));
      indexedKey_.push_back(-1);
    }
  }
  for (GpuId gid : gpuIds) reindex(gid);
  liveGpus_ += static_cast<int>(newGpus.size());
  ++liveNodes_;
  nodeIndex_.emplace(spec.name, nid);
  return {};
}

Result<void> ClusterState::updateNode(const model::NodeSpec& spec) {
  auto id = findNode(spec.name);
  if (!id) return fail(Error::notFound("node " + spec.name + " does not exist"));
  NodeRecord& node = nodes_[static_cast<std::size_t>(*id)];
  if (spec.gpus.size() != node.gpuIds.size()) {
    return fail(Error::invalid("node " + spec.name +
                               ": an update must list the same GPUs; remove and re-add the node "
                               "to change its GPU set"));
  }
  if (spec.cpuMilli < node.bookedCpuMilli || spec.hostMemoryMib < node.bookedHostMemoryMib) {
    return fail(Error::precondition("node " + spec.name +
                                    ": new CPU or host memory is below what replicas hold"));
  }
  // Validate everything before changing anything.
  std::vector<std::pair<GpuId, model::GpuSpec>> updates;
  for (const auto& g : spec.gpus) {
    auto gid = findGpu(spec.name, g.id);
    if (!gid) return fail(Error::invalid("node " + spec.name + ": unknown GPU id " + g.id));
    int typeIndex = -1;
    auto resolved = resolveGpu(spec, g, &typeIndex);
    if (!resolved) return fail(resolved.error());
    const GpuRecord& cur = gpu(*gid);
    const bool capacityChanged = resolved->memoryMib != cur.spec.memoryMib ||
                                 resolved->computeMilli != cur.spec.computeMilli ||
                                 typeIndex != cur.typeIndex ||
                                 resolved->migEnabled != cur.spec.migEnabled;
    if (capacityChanged && !cur.replicas.empty()) {
      return fail(Error::precondition("node " + spec.name + " gpu " + g.id +
                                      ": capacity, type or MIG mode cannot change while replicas "
                                      "are placed on it"));
    }
    // Replicas were placed for the topology they saw: an NVLink set or NUMA alignment must
    // not vanish under a multi-GPU replica (drain the GPU first, then change it).
    const bool topologyChanged = resolved->numaNode != cur.spec.numaNode ||
                                 resolved->nvlinkGroup != cur.spec.nvlinkGroup ||
                                 resolved->pcieSwitch != cur.spec.pcieSwitch;
    if (topologyChanged && !cur.replicas.empty()) {
      return fail(Error::precondition("node " + spec.name + " gpu " + g.id +
                                      ": NUMA node, NVLink group or PCIe switch cannot change "
                                      "while replicas are placed on it"));
    }
    if (capacityChanged) {
      return fail(Error::invalid("node " + spec.name + " gpu " + g.id +
                                 ": capacity, type or MIG mode changed; remove and re-add the "
                                 "node"));
    }
    // Like CPU and host memory: a limit may not drop below what placed replicas already hold.
    if (resolved->timeSlicingReplicas > 0 &&
        static_cast<int>(cur.replicas.size()) > resolved->timeSlicingReplicas) {
      return fail(Error::precondition("node " + spec.name + " gpu " + g.id +
                                      ": timeSlicingReplicas below the replicas placed on it"));
    }
    if (resolved->memoryBandwidthGBps > 0 &&
        cur.bookedBandwidthGBps > resolved->memoryBandwidthGBps + 1e-9) {
      return fail(Error::precondition("node " + spec.name + " gpu " + g.id +
                                      ": memory bandwidth below what replicas have booked"));
    }
    updates.emplace_back(*gid, std::move(*resolved));
  }
  node.spec.labels = spec.labels;
  node.spec.taints = spec.taints;
  node.spec.healthy = spec.healthy;
  node.spec.cordoned = spec.cordoned;
  node.spec.cachedModels = spec.cachedModels;
  node.spec.cpuMilli = spec.cpuMilli;
  node.spec.hostMemoryMib = spec.hostMemoryMib;
  if (spec.rank) node.rank = *spec.rank;
  touch(*id);
  for (auto& [gid, g] : updates) {
    GpuRecord& rec = gpus_[static_cast<std::size_t>(gid)];
    rec.spec.healthy = g.healthy;
    rec.spec.numaNode = g.numaNode;
    rec.spec.nvlinkGroup = g.nvlinkGroup;
    rec.spec.pcieSwitch = g.pcieSwitch;
    rec.spec.uuid = g.uuid;
    rec.spec.timeSlicingReplicas = g.timeSlicingReplicas;
    rec.spec.memoryBandwidthGBps = g.memoryBandwidthGBps;
    reindex(gid);
  }
  return {};
}

Result<void> ClusterState::patchNode(const NodePatched& ev) {
  auto id = findNode(ev.name);
  if (!id) return fail(Error::notFound("node " + ev.name + " does not exist"));
  // Validate everything before changing anything.
  std::vector<std::pair<GpuId, bool>> gpuHealth;
  for (const auto& [gpuId, healthy] : ev.gpuHealthy) {
    auto gid = findGpu(ev.name, gpuId);
    if (!gid) return fail(Error::invalid("node " + ev.name + ": unknown GPU id " + gpuId));
    gpuHealth.emplace_back(*gid, healthy);
  }
  model::NodeSpec& spec = nodes_[static_cast<std::size_t>(*id)].spec;
  if (ev.healthy) spec.healthy = *ev.healthy;
  if (ev.cordoned) spec.cordoned = *ev.cordoned;
  if (ev.cachedModels) spec.cachedModels = *ev.cachedModels;
  if (ev.labels) spec.labels = *ev.labels;
  if (ev.taints) spec.taints = *ev.taints;
  touch(*id);
  for (const auto& [gid, healthy] : gpuHealth) {
    gpus_[static_cast<std::size_t>(gid)].spec.healthy = healthy;
    reindex(gid);
  }
  return {};
}

Result<void> ClusterState::removeNode(const NodeRemoved& ev) {
  auto id = findNode(ev.name);
  if (!id) return fail(Error::notFound("node " + ev.name + " does not exist"));
  NodeRecord& node = nodes_[static_cast<std::size_t>(*id)];
  if (!node.replicas.empty() && !ev.force) {
    return fail(Error::precondition("node " + ev.name + " still holds " +
                                    std::to_string(node.replicas.size()) +
                                    " replica(s); drain it first or remove with force"));
  }
  const std::vector<ReplicaId> victims = node.replicas;
  for (ReplicaId r : victims) releaseReplica(r);
  node.removed = true;
  touch(*id);
  for (GpuId g : node.gpuIds) indexedKey_[static_cast<std::size_t>(g)] = -1;
  nodeMaxKey_[static_cast<std::size_t>(*id)] = -1;
  nodeMaxCompute_[static_cast<std::size_t>(*id)] = -1;
  liveGpus_ -= static_cast<int>(node.gpuIds.size());
  --liveNodes_;
  nodeIndex_.erase(ev.name);
  freeNodeSlots_.push_back(*id);
  return {};
}

// ---- telemetry ----------------------------------------------------------------------------

Result<void> ClusterState::telemetry(const GpuTelemetry& ev) {
  auto gid = findGpu(ev.node, ev.gpuId);
  if (!gid) return fail(Error::notFound("telemetry for unknown GPU " + ev.node + "/" + ev.gpuId));
  if (ev.usedMib < 0 || ev.utilizationMilli < 0 || ev.utilizationMilli > 1000) {
    return fail(Error::invalid("telemetry for " + ev.node + "/" + ev.gpuId +
                               ": usedMib must be >= 0 and utilizationMilli in 0..1000"));
  }
  for (const auto& [name, used] : ev.replicaUsedMib) {
    if (used < 0) {
      return fail(Error::invalid("telemetry for " + ev.node + "/" + ev.gpuId + ": replica " + name +
                                 " usage must be >= 0"));
    }
  }
  GpuRecord& rec = gpus_[static_cast<std::size_t>(*gid)];
  rec.hasTelemetry = true;
  rec.telemetryUsedMib = ev.usedMib;
  rec.utilizationMilli = ev.utilizationMilli;
  rec.telemetryAtMs = ev.atMs;
  rec.spec.healthy = ev.healthy;
  std::int64_t attributed = 0;
  for (ReplicaId r : rec.replicas) {
    ReplicaRecord& rep = replicas_[static_cast<std::size_t>(r)];
    for (std::size_t slot = 0; slot < rep.placement.gpus.size(); ++slot) {
      if (rep.placement.gpus[slot].gpu != *gid) continue;
      auto it = ev.replicaUsedMib.find(rep.placement.replicaId);
      rep.attributedMib[slot] = it == ev.replicaUsedMib.end() ? -1 : it->second;
      if (it != ev.replicaUsedMib.end()) attributed += it->second;
    }
  }
  // MIG usage lives inside instances Tessera already charges whole, and everything on an
  // exclusive card is its replica's: no foreign share there.
  const std::int64_t foreign =
      rec.spec.migEnabled || rec.exclusive ? 0 : std::max<std::int64_t>(0, ev.usedMib - attributed);
  rec.foreignMib = foreign;
  const std::vector<ReplicaId> onGpu = rec.replicas;
  for (ReplicaId r : onGpu) recharge(r);
  reindex(*gid);
  return {};
}

// ---- replicas -----------------------------------------------------------------------------

Result<void> ClusterState::checkPlacement(const Placement& p) const {
  return checkBooking(p, true);
}

Result<void> ClusterState::checkBooking(const Placement& p, bool memoryFit) const {
  const std::string who = "placement of " + p.replicaId;
  if (p.replicaId.empty()) return fail(Error::invalid("placement has an empty replicaId"));
  if (replicaIndex_.contains(p.replicaId)) {
    return fail(Error::exists("replica " + p.replicaId + " is already placed"));
  }
  if (p.node < 0 || static_cast<std::size_t>(p.node) >= nodes_.size() || node(p.node).removed) {
    return fail(Error::notFound(who + ": node does not exist"));
  }
  const NodeRecord& n = node(p.node);
  if (p.cpuMilli < 0 || p.hostMemoryMib < 0) {
    return fail(Error::invalid(who + ": negative CPU or host memory"));
  }
  if (p.cpuMilli > n.freeCpuMilli() || p.hostMemoryMib > n.freeHostMemoryMib()) {
    return fail(Error::exhausted(who + ": node " + n.spec.name + " lacks CPU or host memory"));
  }
  if (p.gpus.size() > static_cast<std::size_t>(kMaxGpusPerReplica)) {
    return fail(Error::invalid(who + ": too many GPUs"));
  }
  for (std::size_t i = 0; i < p.gpus.size(); ++i) {
    const GpuAssignment& a = p.gpus[i];
    if (std::find(n.gpuIds.begin(), n.gpuIds.end(), a.gpu) == n.gpuIds.end()) {
      return fail(Error::invalid(who + ": GPU is not on node " + n.spec.name));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (p.gpus[j].gpu == a.gpu) return fail(Error::invalid(who + ": GPU listed twice"));
    }
    const GpuRecord& g = gpu(a.gpu);
    const std::string where = who + " on " + gpuName(n, g);
    if (a.reservedMib < 0 || a.estimateMib < 0 || a.computeMilli < 0 || a.bandwidthGBps < 0) {
      return fail(Error::invalid(where + ": negative amount"));
    }
    if (!g.healthy()) return fail(Error::precondition(where + ": GPU is unhealthy"));
    if (g.exclusive) return fail(Error::exhausted(where + ": GPU is held exclusively"));
    if (p.mode == model::SharingMode::kExclusive && !g.replicas.empty()) {
      return fail(Error::exhausted(where + ": exclusive placement on a shared GPU"));
    }
    if (g.spec.timeSlicingReplicas > 0 &&
        static_cast<int>(g.replicas.size()) >= g.spec.timeSlicingReplicas) {
      return fail(Error::exhausted(where + ": time-slicing replica limit reached"));
    }
    if (g.bookedComputeMilli + a.computeMilli > g.spec.computeMilli) {
      return fail(Error::exhausted(where + ": compute over-committed"));
    }
    if (g.spec.memoryBandwidthGBps > 0 &&
        g.bookedBandwidthGBps + a.bandwidthGBps > g.spec.memoryBandwidthGBps + 1e-9) {
      return fail(Error::exhausted(where + ": memory bandwidth over-committed"));
    }
    if (g.spec.migEnabled != (p.mode == model::SharingMode::kMig)) {
      return fail(Error::invalid(where + ": MIG placements go exactly on MIG-enabled GPUs"));
    }
    if (g.spec.migEnabled) {
      const model::GpuType& type = catalog_->at(g.typeIndex);
      if (a.migProfile < 0 || static_cast<std::size_t>(a.migProfile) >= type.migProfiles.size()) {
        return fail(Error::invalid(where + ": no valid MIG profile"));
      }
      const bool freeInstance =
          std::any_of(g.migInstances.begin(), g.migInstances.end(), [&](const MigInstance& m) {
            return m.profile == a.migProfile && m.start == a.migStart && m.occupant < 0;
          });
      if (!freeInstance &&
          (!options_.migCreation || !migCreatable(type, g, a.migProfile, a.migStart))) {
        return fail(Error::exhausted(where + ": MIG slice " +
                                     type.migProfiles[static_cast<std::size_t>(a.migProfile)].name +
                                     "@" + std::to_string(a.migStart) + " is not available"));
      }
      const model::MigProfile& prof = type.migProfiles[static_cast<std::size_t>(a.migProfile)];
      if (a.reservedMib > prof.memoryMib) {
        return fail(Error::exhausted(where + ": more memory than the MIG slice has"));
      }
      // A slice owns a fixed share of the SMs; a booking beyond it cannot be real.
      const int slices = std::max(1, model::migComputeSlices(type));
      if (a.computeMilli > prof.computeSlices * g.spec.computeMilli / slices) {
        return fail(Error::invalid(where + ": books more compute than the MIG slice " + prof.name +
                                   " has"));
      }
    } else if (memoryFit && a.reservedMib > g.freeMemoryMib()) {
      return fail(Error::exhausted(where + ": needs " + std::to_string(a.reservedMib) + " MiB, " +
                                   std::to_string(g.freeMemoryMib()) + " MiB free"));
    }
  }
  return {};
}

Result<void> ClusterState::place(const ReplicaPlaced& ev) {
  auto resolved = resolve(ev.placement);
  if (!resolved) return fail(resolved.error());
  const Placement& p = *resolved;
  TESSERA_RETURN_IF_ERROR(checkBooking(p, true));
  const ReplicaId rid = book(p, ev.atMs);
  recharge(rid);
  // recharge reindexes only GPUs whose charge moved; an exclusive hold or a MIG instance
  // changes what is placeable even when nothing is charged (a 0 MiB reservation).
  for (const GpuAssignment& a : p.gpus) reindex(a.gpu);
  return {};
}

Result<void> ClusterState::restoreReplica(const ReplicaRestored& ev) {
  auto resolved = resolve(ev.placement);
  if (!resolved) return fail(resolved.error());
  const Placement& p = *resolved;
  if (!ev.attributedMib.empty() && ev.attributedMib.size() != p.gpus.size()) {
    return fail(Error::invalid("restoring " + p.replicaId + ": " +
                               std::to_string(ev.attributedMib.size()) + " usage figures for " +
                               std::to_string(p.gpus.size()) + " GPUs"));
  }
  TESSERA_RETURN_IF_ERROR(checkBooking(p, false));
  const ReplicaId rid = book(p, ev.placedAtMs);
  ReplicaRecord& rec = replicas_[static_cast<std::size_t>(rid)];
  if (!ev.reservationActive || ev.placedAtMs + options_.reservationTtlMs <= ev.atMs) {
    expiries_.erase({ev.placedAtMs + options_.reservationTtlMs, rid});
    rec.reservationActive = false;
    --activeReservations_;
  }
  if (ev.loaded) rec.phase = ReplicaPhase::kLoaded;
  if (!ev.attributedMib.empty()) rec.attributedMib = ev.attributedMib;
  recharge(rid);
  for (const GpuAssignment& a : p.gpus) reindex(a.gpu);
  return {};
}

ReplicaId ClusterState::book(const Placement& p, Millis placedAtMs) {
  // A removed replica's slot is reused: months of place/remove cycles keep the table as large
  // as the most replicas ever placed at once, not as the number ever placed.
  ReplicaId rid = static_cast<ReplicaId>(replicas_.size());
  if (!freeReplicaSlots_.empty()) {
    rid = freeReplicaSlots_.back();
    freeReplicaSlots_.pop_back();
  }
  ReplicaRecord rec;
  rec.placement = p;
  rec.placedAtMs = placedAtMs;
  rec.lastActiveMs = rec.placedAtMs;
  rec.chargeMib.assign(p.gpus.size(), 0);
  rec.attributedMib.assign(p.gpus.size(), -1);
  auto intern = [this](const std::string& name) {
    return nameIds_.emplace(name, static_cast<std::int32_t>(nameIds_.size())).first->second;
  };
  rec.modelId = intern(p.modelName);
  rec.deploymentId = intern(p.deployment);
  if (static_cast<std::size_t>(rid) == replicas_.size()) {
    replicas_.push_back(std::move(rec));
  } else {
    replicas_[static_cast<std::size_t>(rid)] = std::move(rec);
  }
  replicaIndex_.emplace(p.replicaId, rid);
  NodeRecord& n = nodes_[static_cast<std::size_t>(p.node)];
  n.bookedCpuMilli += p.cpuMilli;
  n.bookedHostMemoryMib += p.hostMemoryMib;
  n.replicas.push_back(rid);
  touch(p.node);
  for (const GpuAssignment& a : p.gpus) {
    GpuRecord& g = gpus_[static_cast<std::size_t>(a.gpu)];
    g.bookedComputeMilli += a.computeMilli;
    g.bookedBandwidthGBps += a.bandwidthGBps;
    g.replicas.push_back(rid);
    if (p.mode == model::SharingMode::kExclusive) {
      g.exclusive = true;
      g.foreignMib = 0;  // the card is the replica's whole: it is charged all of it
    }
    if (g.spec.migEnabled) {
      auto it =
          std::find_if(g.migInstances.begin(), g.migInstances.end(), [&](const MigInstance& m) {
            return m.profile == a.migProfile && m.start == a.migStart && m.occupant < 0;
          });
      if (it == g.migInstances.end()) {
        const auto& prof =
            catalog_->at(g.typeIndex).migProfiles[static_cast<std::size_t>(a.migProfile)];
        g.migSlotsUsed |= slotMask(a.migStart, prof.slotCount);
        g.migInstances.push_back({a.migProfile, a.migStart, rid, true});
      } else {
        it->occupant = rid;
      }
    }
  }
  expiries_.insert({placedAtMs + options_.reservationTtlMs, rid});
  ++activeReservations_;
  return rid;
}

Result<void> ClusterState::loaded(const std::string& replicaId) {
  auto rid = findReplica(replicaId);
  if (!rid) return fail(Error::notFound("replica " + replicaId + " is not placed"));
  replicas_[static_cast<std::size_t>(*rid)].phase = ReplicaPhase::kLoaded;
  recharge(*rid);
  return {};
}

Result<void> ClusterState::unload(const std::string& replicaId) {
  auto rid = findReplica(replicaId);
  if (!rid) return fail(Error::notFound("replica " + replicaId + " is not placed"));
  releaseReplica(*rid);
  return {};
}

Result<void> ClusterState::activity(const ReplicaActivity& ev) {
  auto rid = findReplica(ev.replicaId);
  if (!rid) return fail(Error::notFound("replica " + ev.replicaId + " is not placed"));
  ReplicaRecord& rec = replicas_[static_cast<std::size_t>(*rid)];
  rec.lastActiveMs = std::max(rec.lastActiveMs, ev.atMs);
  touch(rec.placement.node);
  return {};
}

void ClusterState::expireReservations(Millis now) {
  while (!expiries_.empty() && expiries_.begin()->first <= now) {
    const ReplicaId rid = expiries_.begin()->second;
    expiries_.erase(expiries_.begin());
    ReplicaRecord& rec = replicas_[static_cast<std::size_t>(rid)];
    rec.reservationActive = false;
    --activeReservations_;
    recharge(rid);
  }
}

void ClusterState::recharge(ReplicaId rid) {
  ReplicaRecord& rec = replicas_[static_cast<std::size_t>(rid)];
  const bool mig = rec.placement.mode == model::SharingMode::kMig;
  const bool exclusive = rec.placement.mode == model::SharingMode::kExclusive;
  // The reservation settles once the replica is loaded and telemetry names it on every GPU.
  if (rec.reservationActive && rec.phase == ReplicaPhase::kLoaded &&
      std::all_of(rec.attributedMib.begin(), rec.attributedMib.end(),
                  [](std::int64_t a) { return a >= 0; })) {
    rec.reservationActive = false;
    --activeReservations_;
    expiries_.erase({rec.placedAtMs + options_.reservationTtlMs, rid});
  }
  for (std::size_t slot = 0; slot < rec.placement.gpus.size(); ++slot) {
    const GpuAssignment& a = rec.placement.gpus[slot];
    const std::int64_t seen = rec.attributedMib[slot];
    std::int64_t charge;
    if (mig) {
      charge = a.reservedMib;  // a MIG slice is carved out whole, whatever the replica uses
    } else if (exclusive) {
      // An exclusive card is held whole, whatever the replica uses or booked: nothing else may
      // go there, so none of it is free.
      charge = std::max(a.reservedMib, gpus_[static_cast<std::size_t>(a.gpu)].spec.memoryMib);
    } else if (rec.reservationActive) {
      charge = std::max(a.reservedMib, seen);
    } else if (seen >= 0) {
      charge = seen;
    } else {
      charge = a.estimateMib;
    }
    setCharge(rid, slot, charge);
  }
}

void ClusterState::setCharge(ReplicaId rid, std::size_t slot, std::int64_t charge) {
  ReplicaRecord& rec = replicas_[static_cast<std::size_t>(rid)];
  const GpuId g = rec.placement.gpus[slot].gpu;
  const std::int64_t delta = charge - rec.chargeMib[slot];
  if (delta == 0) return;
  rec.chargeMib[slot] = charge;
  gpus_[static_cast<std::size_t>(g)].chargedMib += delta;
  reindex(g);
}

void ClusterState::releaseReplica(ReplicaId rid) {
  ReplicaRecord& rec = replicas_[static_cast<std::size_t>(rid)];
  if (rec.reservationActive) {
    rec.reservationActive = false;
    --activeReservations_;
    expiries_.erase({rec.placedAtMs + options_.reservationTtlMs, rid});
  }
  for (std::size_t slot = 0; slot < rec.placement.gpus.size(); ++slot) {
    setCharge(rid, slot, 0);
    const GpuAssignment& a = rec.placement.gpus[slot];
    GpuRecord& g = gpus_[static_cast<std::size_t>(a.gpu)];
    g.bookedComputeMilli -= a.computeMilli;
    g.bookedBandwidthGBps -= a.bandwidthGBps;
    if (g.bookedBandwidthGBps < 1e-9) g.bookedBandwidthGBps = 0;
    std::erase(g.replicas, rid);
    if (rec.placement.mode == model::SharingMode::kExclusive) g.exclusive = false;
    if (g.spec.migEnabled) {
      const auto& type = catalog_->at(g.typeIndex);
      for (auto it = g.migInstances.begin(); it != g.migInstances.end(); ++it) {
        if (it->occupant != rid) continue;
        if (it->dynamic) {
          // Tessera made this instance for the replica; give the slices back.
          g.migSlotsUsed &= ~slotMask(
              it->start, type.migProfiles[static_cast<std::size_t>(it->profile)].slotCount);
          g.migInstances.erase(it);
        } else {
          it->occupant = -1;
        }
        break;
      }
    }
    reindex(a.gpu);
  }
  NodeRecord& n = nodes_[static_cast<std::size_t>(rec.placement.node)];
  n.bookedCpuMilli -= rec.placement.cpuMilli;
  n.bookedHostMemoryMib -= rec.placement.hostMemoryMib;
  std::erase(n.replicas, rid);
  touch(rec.placement.node);
  rec.removed = true;
  replicaIndex_.erase(rec.placement.replicaId);
  freeReplicaSlots_.push_back(rid);
}

void ClusterState::touch(NodeId node) {
  static std::atomic<std::uint64_t> counter{0};
  generation_ = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  nodes_[static_cast<std::size_t>(node)].generation = generation_;
}

void ClusterState::reindex(GpuId g) {
  const auto gi = static_cast<std::size_t>(g);
  const GpuRecord& rec = gpus_[gi];
  touch(rec.node);
  const bool live = !nodes_[static_cast<std::size_t>(rec.node)].removed;
  const std::int64_t key = (live && rec.healthy()) ? placeableMemoryMib(g) : -1;
  indexedKey_[gi] = key;
  if (!live) return;
  // Node summaries over its (few) GPUs.
  std::int64_t maxKey = -1;
  std::int32_t maxCompute = -1;
  for (GpuId other : nodes_[static_cast<std::size_t>(rec.node)].gpuIds) {
    const auto oi = static_cast<std::size_t>(other);
    if (indexedKey_[oi] < 0) continue;
    maxKey = std::max(maxKey, indexedKey_[oi]);
    const GpuRecord& o = gpus_[oi];
    maxCompute =
        std::max(maxCompute, o.spec.migEnabled ? o.spec.computeMilli : o.freeComputeMilli());
  }
  nodeMaxKey_[static_cast<std::size_t>(rec.node)] = maxKey;
  nodeMaxCompute_[static_cast<std::size_t>(rec.node)] = maxCompute;
}

}  // namespace tessera::sched
