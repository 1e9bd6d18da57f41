#pragma once
// Seeding a ClusterState from a cluster file: nodes first, then the replicas that already
// run there, each charged as a reservation of its profile's memory x the safety factor.

#include "common/result.h"
#include "config/loaders.h"
#include "sched/cluster_state.h"

namespace tessera::config {

// Applies NodeAdded for every node, then ReplicaPlaced (and ReplicaLoaded, ReplicaActivity)
// for every existing replica. Errors name the node or replica and the cluster file.
Result<void> seedClusterState(sched::ClusterState& state, const config::ClusterFile& cluster,
                              const std::string& sourceName);

// Applies ReplicaPlaced for one existing replica on the GPUs the file names, stamped with the
// state's clock (sched::ClusterState::clock), booked the way
// the engine books a new placement: shared (memory estimate x safety factor) when the model
// allows sharing, else exclusive (the whole card); on a MIG-enabled GPU the slice the engine
// would choose (sched::chooseMigSlice).
Result<void> placeExistingReplica(sched::ClusterState& state,
                                  const config::ExistingReplica& replica);

}  // namespace tessera::config
