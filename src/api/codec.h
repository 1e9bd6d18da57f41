#pragma once
// What the control plane keeps in its store, as JSON documents (store/store.h):
//
//   kind "node"     the node as registered, in the cluster file's `nodes[]` keys plus its
//                   effective `rank` (so a restart keeps the tie-break order)
//   kind "model"    a profile in the `models[]` keys
//   kind "deployment"  the deployment as given (api/requests.h DeploymentSpec), in the keys
//                   of POST /api/v1/deployments
//   kind "replica"  {"placement": {...}, "loaded": bool, "placedAtUnixMs": int}: exactly
//                   what was booked, GPUs named by node and GPU id, so a restart books the
//                   same GPUs, and when (Unix time: the books' clock may not survive a boot),
//                   so that its reservation lapses when it would have
//
// The node and model documents are read back through the same loaders as the files
// (config/), so a document the store holds is always one a user could have written.

#include <optional>

#include <nlohmann/json.hpp>

#include "api/requests.h"
#include "common/result.h"
#include "model/inventory.h"
#include "model/workload.h"
#include "sched/cluster_state.h"

namespace tessera::api {

nlohmann::json nodeDocument(const model::NodeSpec& node, std::int64_t rank);
nlohmann::json modelDocument(const model::ModelProfile& model);
// The fields given, in the body's keys (read back by json_api::decodePutDeployment).
nlohmann::json deploymentDocument(const DeploymentSpec& spec);
nlohmann::json replicaDocument(const sched::ClusterState& state, const sched::Placement& p,
                               bool loaded);

struct StoredReplica {
  sched::Placement placement;
  bool loaded = false;
  std::optional<Millis> placedAtUnixMs;  // absent in documents written before it was stored
};
// Resolves node and GPU names against `state`; errors name the field.
Result<StoredReplica> readReplicaDocument(const sched::ClusterState& state,
                                          const nlohmann::json& doc);

}  // namespace tessera::api
