#include "config/seed.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sched/engine.h"
#include "sched/mig_choice.h"

namespace tessera::config {
namespace {

using sched::ClusterState;
using sched::GpuId;

Error withContext(const Error& error, const std::string& context) {
  return Error{error.code, context + ": " + error.message};
}

// Books the replica on exactly its GPUs as the engine would book a decision there
// (sched::placementFor), trying the model's sharing modes in the engine's order.
Result<void> placeOn(ClusterState& state, const model::PlacementRequest& request,
                     const sched::Needs& needs, sched::NodeId node, const std::vector<GpuId>& gpus,
                     bool mig) {
  sched::Option option;
  option.node = node;
  option.gpuCount = static_cast<std::int8_t>(gpus.size());
  std::copy(gpus.begin(), gpus.end(), option.gpus.begin());
  std::vector<model::SharingMode> modes;
  if (mig) {
    // The same slice the engine would pick, so that a replayed cluster matches a planned one.
    const auto choice = sched::chooseMigSlice(state, gpus.front(), request, needs);
    if (!choice) {
      return fail(
          Error::exhausted(fmt::format("GPU {} has no free or creatable MIG slice of {} MiB",
                                       state.gpu(gpus.front()).spec.id, needs.memoryMib)));
    }
    option.migProfile = choice->profileIndex;
    option.migStart = choice->start;
    option.migCreates = choice->creates;
    modes.push_back(model::SharingMode::kMig);
  } else {
    for (auto mode : {model::SharingMode::kShared, model::SharingMode::kExclusive}) {
      if (model::allows(request.model.sharing, mode)) modes.push_back(mode);
    }
    if (modes.empty()) {
      return fail(Error::invalid("model " + request.model.name +
                                 " runs only on MIG slices but its GPUs are not MIG-enabled"));
    }
  }
  Error last = Error::internal("no sharing mode tried");
  for (model::SharingMode mode : modes) {
    option.mode = mode;
    // Booked now on the state's own clock (sched::ClusterState says why it keeps one).
    auto applied = state.apply(sched::replicaPlaced(
        state, sched::placementFor(state, request, needs, option), state.clock().nowMs()));
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

  if (migCount != 0 && (gpus.size() != 1 || migCount != 1)) {
    return fail(Error::invalid("a replica on MIG-enabled GPUs must use exactly one GPU"));
  }
  if (migCount != 0 && !model::allows(profile.sharing, model::SharingMode::kMig)) {
    return fail(Error::invalid("GPU " + replica.gpus.front() + " is MIG-enabled but model " +
                               profile.name + " does not allow MIG slices"));
  }
  if (request.model.name.empty()) request.model.name = replica.model;
  return placeOn(state, request, needs, *node, gpus, migCount != 0);
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

}  // namespace tessera::config
