#include "existing_replicas.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sched/mig_choice.h"

namespace tessera::cli {
namespace {

using sched::ClusterState;
using sched::GpuAssignment;
using sched::GpuId;
using sched::Placement;

Error withContext(const Error& error, const std::string& context) {
  return Error{error.code, context + ": " + error.message};
}

Result<void> placeOnMig(ClusterState& state, Placement base, GpuId gpu,
                        const model::PlacementRequest& request, const sched::Needs& needs) {
  // The same slice the engine would pick, so that a replayed cluster matches a planned one.
  const auto choice = sched::chooseMigSlice(state, gpu, request, needs);
  const sched::GpuRecord& g = state.gpu(gpu);
  if (!choice) {
    return fail(Error::exhausted(fmt::format("GPU {} has no free or creatable MIG slice of {} MiB",
                                             g.spec.id, needs.memoryMib)));
  }
  const model::GpuType& type = state.catalog().at(g.typeIndex);
  const model::MigProfile& profile =
      type.migProfiles[static_cast<std::size_t>(choice->profileIndex)];
  int slices = 1;
  for (const model::MigProfile& p : type.migProfiles) slices = std::max(slices, p.computeSlices);
  GpuAssignment a;
  a.gpu = gpu;
  a.estimateMib = needs.estimateMib;
  a.reservedMib = profile.memoryMib;  // a MIG slice is reserved whole
  a.computeMilli = profile.computeSlices * g.spec.computeMilli / slices;
  a.bandwidthGBps = 0;  // partitioned in hardware
  a.migProfile = choice->profileIndex;
  a.migStart = choice->start;
  base.mode = model::SharingMode::kMig;
  base.gpus = {a};
  return state.apply(sched::ReplicaPlaced{std::move(base)});
}

Result<void> placeWhole(ClusterState& state, const Placement& base, const std::vector<GpuId>& gpus,
                        const sched::Needs& needs, const model::ModelProfile& profile) {
  std::vector<model::SharingMode> modes;
  if (model::allows(profile.sharing, model::SharingMode::kShared)) {
    modes.push_back(model::SharingMode::kShared);
  }
  if (model::allows(profile.sharing, model::SharingMode::kExclusive)) {
    modes.push_back(model::SharingMode::kExclusive);
  }
  if (modes.empty()) {
    return fail(Error::invalid("model " + profile.name +
                               " runs only on MIG slices but its GPUs are not MIG-enabled"));
  }
  Error last = Error::internal("no sharing mode tried");
  for (model::SharingMode mode : modes) {
    Placement p = base;
    p.mode = mode;
    for (GpuId gpu : gpus) {
      const sched::GpuRecord& g = state.gpu(gpu);
      GpuAssignment a;
      a.gpu = gpu;
      a.estimateMib = needs.estimateMib;
      a.bandwidthGBps = needs.bandwidthGBps;
      if (mode == model::SharingMode::kExclusive) {
        // An exclusive replica holds the whole card: all its free memory and SMs.
        a.reservedMib = std::max(needs.memoryMib, g.freeMemoryMib());
        a.computeMilli = g.freeComputeMilli();
      } else {
        a.reservedMib = needs.memoryMib;
        a.computeMilli = needs.computeMilli;
      }
      p.gpus.push_back(a);
    }
    auto applied = state.apply(sched::ReplicaPlaced{std::move(p)});
    if (applied) return {};
    last = applied.error();
  }
  return fail(std::move(last));
}

}  // namespace

Result<void> placeExistingReplica(ClusterState& state, const config::ExistingReplica& replica) {
  const model::ModelProfile& profile = replica.profile;
  const auto node = state.findNode(replica.node);
  if (!node) return fail(Error::invalid("node '" + replica.node + "' is not in the cluster"));
  if (static_cast<int>(replica.gpus.size()) != profile.gpusPerReplica) {
    return fail(
        Error::invalid(fmt::format("lists {} GPUs but model {} has gpusPerReplica {}",
                                   replica.gpus.size(), profile.name, profile.gpusPerReplica)));
  }
  std::vector<GpuId> gpus;
  for (const std::string& id : replica.gpus) {
    const auto gpu = state.findGpu(replica.node, id);
    if (!gpu) return fail(Error::invalid("GPU '" + id + "' is not on node " + replica.node));
    gpus.push_back(*gpu);
  }
  const auto migCount = std::count_if(gpus.begin(), gpus.end(),
                                      [&](GpuId g) { return state.gpu(g).spec.migEnabled; });

  model::PlacementRequest request;
  request.replicaId = replica.replicaId;
  request.model = profile;
  request.deployment = replica.deployment;
  const sched::Needs needs = sched::deriveNeeds(request, state.options());

  Placement base;
  base.replicaId = replica.replicaId;
  // As the engine does: a replica without a deployment belongs to its model's.
  base.deployment = replica.deployment.empty() ? profile.name : replica.deployment;
  base.modelName = profile.name.empty() ? replica.model : profile.name;
  base.priority = profile.priority;
  base.node = *node;
  base.cpuMilli = needs.cpuMilli;
  base.hostMemoryMib = needs.hostMemoryMib;

  if (migCount == 0) return placeWhole(state, base, gpus, needs, profile);
  if (gpus.size() != 1 || migCount != 1) {
    return fail(Error::invalid("a replica on MIG-enabled GPUs must use exactly one GPU"));
  }
  if (!model::allows(profile.sharing, model::SharingMode::kMig)) {
    return fail(Error::invalid("GPU " + replica.gpus.front() + " is MIG-enabled but model " +
                               profile.name + " does not allow MIG slices"));
  }
  return placeOnMig(state, std::move(base), gpus.front(), request, needs);
}

Result<void> seedClusterState(ClusterState& state, const config::ClusterFile& cluster,
                              const std::string& sourceName) {
  for (const model::NodeSpec& node : cluster.nodes) {
    auto added = state.apply(sched::NodeAdded{node});
    if (!added) return fail(withContext(added.error(), sourceName + ": node " + node.name));
  }
  for (const config::ExistingReplica& replica : cluster.replicas) {
    const std::string context = sourceName + ": replica " + replica.replicaId;
    auto placed = placeExistingReplica(state, replica);
    if (!placed) return fail(withContext(placed.error(), context));
    if (replica.loaded) {
      auto loaded = state.apply(sched::ReplicaLoaded{replica.replicaId});
      if (!loaded) return fail(withContext(loaded.error(), context));
    }
    if (replica.lastActiveSeconds > 0) {
      auto active =
          state.apply(sched::ReplicaActivity{replica.replicaId, replica.lastActiveSeconds * 1000});
      if (!active) return fail(withContext(active.error(), context));
    }
  }
  return {};
}

}  // namespace tessera::cli
