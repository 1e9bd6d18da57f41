// ClusterState's names and lookups: events name nodes, GPUs and replicas, and the books keep
// dense ids (cluster_state.h, "Events"); the conversions both ways and the read-only queries
// the filters and scores ask.

#include <algorithm>
#include <string>

#include "sched/cluster_state.h"
#include "sched/cluster_state_internal.h"

namespace tessera::sched {

ReplicaPlaced replicaPlaced(const ClusterState& state, const Placement& p, Millis atMs) {
  return ReplicaPlaced{state.named(p), atMs};
}

// ---- names and ids ------------------------------------------------------------------------

NamedPlacement ClusterState::named(const Placement& p) const {
  NamedPlacement out;
  out.replicaId = p.replicaId;
  out.deployment = p.deployment;
  out.modelName = p.modelName;
  out.priority = p.priority;
  out.mode = p.mode;
  const bool nodeKnown =
      p.node >= 0 && static_cast<std::size_t>(p.node) < nodes_.size() && !node(p.node).removed;
  if (nodeKnown) out.node = node(p.node).spec.name;
  out.gpus.reserve(p.gpus.size());
  for (const GpuAssignment& a : p.gpus) {
    NamedGpuAssignment n;
    // A GPU of another node keeps no name: its id might name a different GPU on p's node.
    if (nodeKnown && a.gpu >= 0 && static_cast<std::size_t>(a.gpu) < gpus_.size() &&
        gpu(a.gpu).node == p.node) {
      n.gpuId = gpu(a.gpu).spec.id;
    }
    n.estimateMib = a.estimateMib;
    n.reservedMib = a.reservedMib;
    n.computeMilli = a.computeMilli;
    n.bandwidthGBps = a.bandwidthGBps;
    n.migProfile = a.migProfile;
    n.migStart = a.migStart;
    out.gpus.push_back(std::move(n));
  }
  out.cpuMilli = p.cpuMilli;
  out.hostMemoryMib = p.hostMemoryMib;
  return out;
}

Result<Placement> ClusterState::resolve(const NamedPlacement& p) const {
  const std::string who = "placement of " + p.replicaId;
  const auto nid = findNode(p.node);
  if (!nid) return fail(Error::notFound(who + ": node '" + p.node + "' does not exist"));
  Placement out;
  out.replicaId = p.replicaId;
  out.deployment = p.deployment;
  out.modelName = p.modelName;
  out.priority = p.priority;
  out.mode = p.mode;
  out.node = *nid;
  out.gpus.reserve(p.gpus.size());
  for (const NamedGpuAssignment& n : p.gpus) {
    const auto gid = findGpu(p.node, n.gpuId);
    if (!gid) {
      return fail(Error::invalid(who + ": GPU '" + n.gpuId + "' is not on node " + p.node));
    }
    out.gpus.push_back({*gid, n.estimateMib, n.reservedMib, n.computeMilli, n.bandwidthGBps,
                        n.migProfile, n.migStart});
  }
  out.cpuMilli = p.cpuMilli;
  out.hostMemoryMib = p.hostMemoryMib;
  return out;
}

// ---- lookups ------------------------------------------------------------------------------

std::optional<NodeId> ClusterState::findNode(std::string_view name) const {
  auto it = nodeIndex_.find(std::string(name));
  if (it == nodeIndex_.end()) return std::nullopt;
  return it->second;
}

std::optional<GpuId> ClusterState::findGpu(std::string_view nodeName,
                                           std::string_view gpuId) const {
  auto n = findNode(nodeName);
  if (!n) return std::nullopt;
  for (GpuId g : node(*n).gpuIds) {
    if (gpu(g).spec.id == gpuId) return g;
  }
  return std::nullopt;
}

std::optional<ReplicaId> ClusterState::findReplica(std::string_view replicaId) const {
  auto it = replicaIndex_.find(std::string(replicaId));
  if (it == replicaIndex_.end()) return std::nullopt;
  return it->second;
}

std::optional<Millis> ClusterState::nextReservationExpiryMs() const {
  if (expiries_.empty()) return std::nullopt;
  return expiries_.begin()->first;
}

std::int32_t ClusterState::nameId(std::string_view name) const {
  auto it = nameIds_.find(std::string(name));
  return it == nameIds_.end() ? -1 : it->second;
}

bool ClusterState::modelResidentOnGpu(GpuId g, std::string_view modelName) const {
  return modelResidentOnGpu(g, nameId(modelName));
}

bool ClusterState::modelResidentOnGpu(GpuId g, std::int32_t modelId) const {
  if (modelId < 0) return false;
  for (ReplicaId r : gpu(g).replicas) {
    if (replica(r).modelId == modelId) return true;
  }
  return false;
}

bool ClusterState::modelResidentOnGpu(GpuId g, std::int32_t modelId,
                                      std::int32_t exceptDeploymentId) const {
  if (modelId < 0) return false;
  for (ReplicaId r : gpu(g).replicas) {
    if (replica(r).modelId == modelId && replica(r).deploymentId != exceptDeploymentId) return true;
  }
  return false;
}

int ClusterState::deploymentReplicasOnGpu(GpuId g, std::int32_t deploymentId) const {
  return countOfDeployment(gpu(g).replicas, deploymentId);
}

bool ClusterState::modelCachedOnNode(NodeId n, std::string_view modelName) const {
  const auto& cached = node(n).spec.cachedModels;
  return std::find(cached.begin(), cached.end(), modelName) != cached.end();
}

int ClusterState::deploymentReplicasOnNode(NodeId n, std::string_view deployment) const {
  return deploymentReplicasOnNode(n, nameId(deployment));
}

int ClusterState::deploymentReplicasOnNode(NodeId n, std::int32_t deploymentId) const {
  return countOfDeployment(node(n).replicas, deploymentId);
}

int ClusterState::countOfDeployment(const std::vector<ReplicaId>& replicas,
                                    std::int32_t deploymentId) const {
  if (deploymentId < 0) return 0;
  int count = 0;
  for (ReplicaId r : replicas) {
    if (replica(r).deploymentId == deploymentId) ++count;
  }
  return count;
}

}  // namespace tessera::sched
