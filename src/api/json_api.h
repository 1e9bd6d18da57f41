#pragma once
// The JSON codec in front of the control plane's typed operations: decodes an API body into the
// typed request (api/requests.h) the plane takes. The HTTP routes decode first, with no lock
// held, then call the plane through the dispatcher (api/dispatcher.h), then send what it
// answered; so a malformed body is answered 400 without taking the writer lock.
//
// Bodies use the same keys as the YAML files (docs/configuration.md): a node is a `nodes[]`
// entry, a model a `models[]` entry, a replica request a `requests[]` entry, each decoded from
// its JSON value by the files' own decoders (config/items.h). The other bodies (heartbeats,
// deployments, signals, allocations) are read field by field (api/json_fields.h). Errors name
// the field relative to the body, as sent ("gpus[1].type: unknown GPU type ...", "body: ..."
// for all of it).
//
// The plane answers with JSON views of the objects it changed (the same views as the GET
// routes), built under its state lock, which the codec sends as they are, or with a typed
// result (an acknowledgement, a removal), which it encodes once the locks are let go.
//
// Also here, for the tests, the demo, the benchmarks and the fuzzers that drive a plane without
// the HTTP server: each operation on a JSON body, decoded and then called as the route does
// (including its answer when the body is malformed and what the path names does not exist: the
// 404 the plane would have given).

#include <expected>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/control_plane.h"
#include "api/requests.h"
#include "common/result.h"
#include "model/gpu_catalog.h"

namespace tessera::api::json_api {

// ---- decoders: need no lock (the catalogue is immutable)
Result<RegisterNode> decodeRegisterNode(const nlohmann::json& body,
                                        const model::GpuCatalog& catalog);
Result<Heartbeat> decodeHeartbeat(const nlohmann::json& body);
Result<PutModel> decodePutModel(const nlohmann::json& body);
// A model named by name is left for the plane to resolve (PlaceReplicas::registeredModel).
Result<PlaceReplicas> decodePlaceReplicas(const nlohmann::json& body,
                                          const model::GpuCatalog& catalog);
Result<PutDeployment> decodePutDeployment(const nlohmann::json& body);
Result<ReportReplicaSignals> decodeReplicaSignals(const nlohmann::json& body);
Result<ReportDeploymentSignals> decodeDeploymentSignals(const nlohmann::json& body);
Result<ConfirmAllocation> decodeConfirmAllocation(const nlohmann::json& body);

// ---- encoders: the API's answer for each result
inline const nlohmann::json& encode(const nlohmann::json& view) {
  return view;
}
nlohmann::json encode(const HeartbeatAccepted& accepted);
nlohmann::json encode(const SignalsAccepted& accepted);
nlohmann::json encode(const NodeDraining& draining);
nlohmann::json encode(const Removed& removed);
nlohmann::json encode(const AllocationConfirmed& confirmed);

// ---- a plane's operations on JSON bodies (no dispatcher: the caller owns the plane)
Result<nlohmann::json> registerNode(ControlPlane& plane, const nlohmann::json& body);
Result<nlohmann::json> heartbeat(ControlPlane& plane, std::string_view node,
                                 const nlohmann::json& body);
Result<nlohmann::json> putModel(ControlPlane& plane, const nlohmann::json& body);
std::expected<nlohmann::json, DetailedError> placeReplicas(ControlPlane& plane,
                                                           const nlohmann::json& body);
Result<nlohmann::json> explain(ControlPlane& plane, const nlohmann::json& body);
Result<nlohmann::json> putDeployment(ControlPlane& plane, const nlohmann::json& body);
Result<nlohmann::json> replicaSignals(ControlPlane& plane, std::string_view id,
                                      const nlohmann::json& body);
Result<nlohmann::json> deploymentSignals(ControlPlane& plane, std::string_view name,
                                         const nlohmann::json& body);
Result<nlohmann::json> confirmAllocation(ControlPlane& plane, std::string_view node,
                                         const nlohmann::json& body);

}  // namespace tessera::api::json_api
