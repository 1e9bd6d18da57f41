// ControlPlane: the device plugin hand-off (docs/device-plugin.md): the GPUs chosen for a pod,
// as the node's plugin reads them, and the plugin's confirmation of what it allocated.

#include <algorithm>
#include <set>

#include "api/codec.h"
#include "api/control_plane.h"
#include "api/json_fields.h"
#include "sched/state_json.h"

namespace tessera::api {

using nlohmann::json;

// ---- device plugin hand-off ----------------------------------------------------------------

json ControlPlane::replicaDoc(const sched::Placement& placement, bool loaded) const {
  json doc = replicaDocument(state_, placement, loaded);
  if (const auto rid = state_.findReplica(placement.replicaId)) {
    doc["placedAtUnixMs"] = state_.replica(*rid).placedAtMs + unixOffsetMs_;
  }
  if (pods_.contains(placement.replicaId)) {
    // A pod bound through the extender: in the API server its booking lives on the pod.
    const std::string& id = placement.replicaId;
    const std::size_t slash = id.find('/');
    doc["pod"] = {{"namespace", id.substr(0, slash)}, {"name", id.substr(slash + 1)}};
  }
  if (const auto a = podAllocations_.find(placement.replicaId); a != podAllocations_.end()) {
    doc["allocation"] = {{"resource", a->second.resource},
                         {"confirmed", a->second.confirmed},
                         {"devices", a->second.devices}};
  }
  return doc;
}

Result<json> ControlPlane::nodeAllocations(std::string_view node) const {
  const auto nodeId = state_.findNode(node);
  if (!nodeId || state_.node(*nodeId).removed) {
    return fail(Error::notFound("node " + std::string(node) + " is not registered"));
  }
  json out = json::array();
  for (sched::ReplicaId r : state_.node(*nodeId).replicas) {
    const sched::ReplicaRecord& rec = state_.replica(r);
    const auto a = podAllocations_.find(rec.placement.replicaId);
    if (a == podAllocations_.end()) continue;  // not a pod: no device plugin involved
    const json p = sched::placementJson(state_, rec.placement);
    out.push_back({{"replica", rec.placement.replicaId},
                   {"resource", a->second.resource},
                   {"mode", p["mode"]},
                   {"placedAtMs", rec.placedAtMs},
                   {"confirmed", a->second.confirmed},
                   {"devices", a->second.devices},
                   {"gpus", p["gpus"]}});
  }
  return json{{"node", std::string(node)}, {"allocations", std::move(out)}};
}

Result<AllocationConfirmed> ControlPlane::confirmAllocation(std::string_view node,
                                                            const ConfirmAllocation& request) {
  const auto nodeId = state_.findNode(node);
  if (!nodeId || state_.node(*nodeId).removed) {
    return fail(Error::notFound("node " + std::string(node) + " is not registered"));
  }
  const std::vector<std::string>& devices = request.devices;
  const std::vector<std::string>& gpus = request.gpus;
  const std::string id = request.replica;
  const auto rid = state_.findReplica(id);
  if (!rid) return fail(Error::notFound("replica " + id + " is not placed"));
  const auto alloc = podAllocations_.find(id);
  if (alloc == podAllocations_.end()) {
    return fail(Error::precondition("replica " + id +
                                    " was not bound through the extender: no device plugin "
                                    "allocation to confirm"));
  }
  if (state_.replica(*rid).placement.node != *nodeId) {
    return fail(Error::precondition("replica " + id + " is booked on node " +
                                    state_.node(state_.replica(*rid).placement.node).spec.name +
                                    ", not " + std::string(node)));
  }
  auto gpuIdsOf = [this](const sched::Placement& p) {
    std::vector<std::string> out;
    for (const sched::GpuAssignment& a : p.gpus) out.push_back(state_.gpu(a.gpu).spec.id);
    return out;
  };
  const sched::Placement mine = state_.replica(*rid).placement;
  std::string swappedWith;
  if (!gpus.empty() && gpus != gpuIdsOf(mine)) {
    // The plugin gave this pod a twin's booking: find the twin and swap their GPUs.
    auto sameShape = [this](const sched::Placement& a, const sched::Placement& b) {
      if (a.mode != b.mode || a.gpus.size() != b.gpus.size()) return false;
      for (std::size_t i = 0; i < a.gpus.size(); ++i) {
        const auto& x = a.gpus[i];
        const auto& y = b.gpus[i];
        if (x.reservedMib != y.reservedMib || x.computeMilli != y.computeMilli ||
            x.migProfile != y.migProfile ||
            state_.gpu(x.gpu).typeIndex != state_.gpu(y.gpu).typeIndex) {
          return false;
        }
      }
      return true;
    };
    // The twin is unconfirmed (the plugin hands out a booking's own GPUs, and a plugin that
    // reports another mapping does so at Allocate), or confirmed with exactly these devices:
    // kubelet's PodResources showed later that this pod, not the twin, holds them.
    auto sortedIds = [](std::vector<std::string> v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    std::optional<sched::Placement> twin;
    for (sched::ReplicaId r : state_.node(*nodeId).replicas) {
      const sched::Placement& p = state_.replica(r).placement;
      const auto a = podAllocations_.find(p.replicaId);
      if (p.replicaId == id || a == podAllocations_.end() ||
          a->second.resource != alloc->second.resource) {
        continue;
      }
      if (a->second.confirmed &&
          (devices.empty() || sortedIds(a->second.devices) != sortedIds(devices))) {
        continue;
      }
      if (gpuIdsOf(p) == gpus && sameShape(p, mine)) {
        twin = p;
        break;
      }
    }
    if (!twin) {
      std::string booked;
      for (const std::string& g : gpuIdsOf(mine)) booked += (booked.empty() ? "" : ",") + g;
      return fail(Error::precondition(
          "replica " + id + " is booked on GPUs " + booked +
          "; the device plugin reports other GPUs, and no unconfirmed booking of the same "
          "shape holds them"));
    }
    sched::Placement a = mine, b = *twin;
    for (std::size_t i = 0; i < a.gpus.size(); ++i) {
      std::swap(a.gpus[i].gpu, b.gpus[i].gpu);
      std::swap(a.gpus[i].migStart, b.gpus[i].migStart);
    }
    // Snapshots of both records: a rollback puts them back as they were, loaded included.
    const sched::ReplicaRecord mineBefore = state_.replica(*state_.findReplica(mine.replicaId));
    const sched::ReplicaRecord twinBefore = state_.replica(*state_.findReplica(twin->replicaId));
    undo(sched::ReplicaUnloaded{mine.replicaId}, "allocation-swap");
    undo(sched::ReplicaUnloaded{twin->replicaId}, "allocation-swap");
    const Millis now = clock_.nowMs();
    auto placedA = state_.apply(sched::replicaPlaced(state_, a, now));
    auto placedB = placedA ? state_.apply(sched::replicaPlaced(state_, b, now)) : placedA;
    if (!placedA || !placedB) {
      if (placedA) undo(sched::ReplicaUnloaded{a.replicaId}, "allocation-swap-rollback");
      restore(mineBefore, "allocation-swap-rollback");
      restore(twinBefore, "allocation-swap-rollback");
      return fail(
          Error::internal("swapping the GPUs of " + id + " and " + twin->replicaId +
                          " failed: " + (placedA ? placedB.error() : placedA.error()).message));
    }
    swappedWith = twin->replicaId;
  }
  PodAllocation updated = alloc->second;
  updated.confirmed = true;
  updated.devices = devices;
  const PodAllocation before = alloc->second;
  std::optional<PodAllocation> twinBefore;
  if (!swappedWith.empty()) {
    PodAllocation& t = podAllocations_.find(swappedWith)->second;
    if (t.confirmed) {
      // The twin runs on the devices this replica was confirmed with.
      twinBefore = t;
      t.devices = before.devices;
      t.confirmed = before.confirmed;
    }
  }
  alloc->second = updated;
  store::WriteSet batch;
  const sched::ReplicaRecord& rec = state_.replica(*state_.findReplica(id));
  batch.put("replica", id,
            replicaDoc(rec.placement, rec.phase == sched::ReplicaPhase::kLoaded).dump());
  if (!swappedWith.empty()) {
    const sched::ReplicaRecord& t = state_.replica(*state_.findReplica(swappedWith));
    batch.put("replica", swappedWith,
              replicaDoc(t.placement, t.phase == sched::ReplicaPhase::kLoaded).dump());
  }
  std::string gpuText;
  for (const std::string& g : gpuIdsOf(rec.placement)) gpuText += (gpuText.empty() ? "" : ",") + g;
  if (auto saved = commit(std::move(batch), "AllocationConfirmed", id,
                          "on " + std::string(node) + " GPUs " + gpuText +
                              (swappedWith.empty() ? "" : " (swapped with " + swappedWith + ")"));
      !saved) {
    alloc->second = before;
    if (twinBefore) podAllocations_.find(swappedWith)->second = *twinBefore;
    if (!swappedWith.empty()) {
      // Put the books back as they were stored.
      sched::ReplicaRecord twin = state_.replica(*state_.findReplica(swappedWith));
      sched::ReplicaRecord now = state_.replica(*state_.findReplica(id));
      undo(sched::ReplicaUnloaded{id}, "allocation-confirm-rollback");
      undo(sched::ReplicaUnloaded{swappedWith}, "allocation-confirm-rollback");
      for (std::size_t i = 0; i < now.placement.gpus.size(); ++i) {
        std::swap(now.placement.gpus[i].gpu, twin.placement.gpus[i].gpu);
        std::swap(now.placement.gpus[i].migStart, twin.placement.gpus[i].migStart);
      }
      restore(now, "allocation-confirm-rollback");
      restore(twin, "allocation-confirm-rollback");
    }
    return fail(saved.error());
  }
  extender_->allocationConfirmed(id);
  AllocationConfirmed out{.replica = id,
                          .node = std::string(node),
                          .devices = updated.devices,
                          .gpus = gpuIdsOf(rec.placement)};
  if (!swappedWith.empty()) out.swappedWith = swappedWith;
  return out;
}

}  // namespace tessera::api
