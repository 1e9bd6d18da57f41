#pragma once
// What the control plane's operations take: typed requests, decoded from the API's JSON bodies
// by the codec (api/json_api.h) before the dispatcher takes any lock, so that a malformed body
// is answered without waiting for (or holding up) a writer. And what the operations that do not
// answer with an object's view return: typed results, which the codec encodes after the locks
// are let go (bottom of this file).
//
// A request holds what its body said, checked for shape and range as far as that needs nothing
// but the body (and the immutable GPU catalogue). What depends on the books is checked by the
// plane under its locks: the node, replica or deployment a path names exists, a heartbeat's GPU
// ids are the node's and its memory figures within the card's, a model named by name is
// registered. Those errors keep the texts the API has always answered.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "model/inventory.h"
#include "model/workload.h"
#include "scale/autoscaler.h"

namespace tessera::api {

// POST /api/v1/nodes: a `nodes[]` entry, its GPU types resolved against the catalogue.
struct RegisterNode {
  model::NodeSpec spec;
};

// One GPU of a heartbeat. `id`, `usedMib` and `replicaUsedMib` are checked against the node's
// GPUs by the plane (the card's memory bounds them).
struct GpuReport {
  std::string id;
  std::int64_t usedMib = 0;
  std::optional<std::int32_t> utilizationMilli;
  std::optional<bool> healthy;
  // By replica id, in key order; nullopt: not a whole number (the plane's error names the
  // card's memory, which the body alone does not know).
  std::vector<std::pair<std::string, std::optional<std::int64_t>>> replicaUsedMib;
};

// POST /api/v1/nodes/{node}/heartbeat: a patch of what the agent reports.
struct Heartbeat {
  std::vector<GpuReport> gpus;
  std::optional<std::vector<std::string>> cachedModels;
  std::optional<bool> healthy;
  // The device pool report, checked and rebuilt field by field (api/device_pool_report.h): live
  // state the plane shows as it was reported.
  std::optional<nlohmann::json> devicePool;
};

// POST /api/v1/models: a `models[]` entry.
struct PutModel {
  model::ModelProfile profile;
};

// POST /api/v1/replicas (and POST /api/v1/explain, which books nothing): a `requests[]` entry,
// `count` expanded.
struct PlaceReplicas {
  std::vector<model::PlacementRequest> requests;
  // Set when the body named a registered model rather than writing its profile inline: the
  // plane puts that model's profile into every request (until then it holds the name only).
  std::optional<std::string> registeredModel;
};

// POST /api/v1/deployments: the deployment as given (absent fields stay absent: the store keeps
// what was given, and a default that depends on the books, the model's priority, is taken
// again when it is read back).
struct DeploymentSpec {
  struct Autoscaling {
    std::optional<std::string> recommender;
    std::optional<std::vector<std::pair<std::string, double>>> args;
    std::optional<int> warmReplicas, syncPeriodSeconds, scaleUpStabilizationSeconds,
        scaleDownStabilizationSeconds;
    // HPA's behavior.scaleDown.policies (selectPolicy Max); unset: the recommender's own
    // (tessera: Percent 50 per 60 s), else Kubernetes' default.
    std::optional<std::vector<scale::ScalingPolicy>> scaleDownPolicies;
  };
  std::string name, model;
  std::optional<std::string> version;
  bool placedByKubernetes = false;  // placedBy: "kubernetes"
  bool placedByGiven = false;       // placedBy was written (kept in the stored document)
  std::optional<int> minReplicas, maxReplicas, priority;
  std::optional<double> sloTtftMs;
  std::optional<Autoscaling> autoscaling;

  int effectiveMinReplicas() const { return minReplicas.value_or(1); }
  int effectiveMaxReplicas() const {
    return maxReplicas.value_or(std::max(effectiveMinReplicas(), 10));
  }
  // The autoscaler's configuration: replica bounds, the autoscaling section over the defaults,
  // and the SLO as tessera's recommender's sloTtftMs unless an argument gives it.
  scale::AutoscalerConfig autoscalerConfig() const;
};

struct PutDeployment {
  DeploymentSpec spec;
};

// POST /api/v1/replicas/{id}/signals: engine signals, each optional.
struct ReportReplicaSignals {
  std::optional<double> waiting, running, kvCacheUsage, gpuUtilization, computeActive,
      prefillsPerSec, expectedReadyMs;
  std::optional<int> maxConcurrency;
};

// POST /api/v1/deployments/{name}/signals: the router's signals, each optional.
struct ReportDeploymentSignals {
  std::optional<double> arrivalRatePerSec, meanServiceMs, ttftP99Ms, meanPrefillMs, prefillP99Ms,
      bufferedRequests;
};

// POST /api/v1/nodes/{node}/allocations: the device plugin gave a pod's container its GPUs.
struct ConfirmAllocation {
  std::string replica;
  std::vector<std::string> devices, gpus;
};

// ---- results (the others answer with the object's JSON view, as the reads do)

// A heartbeat taken: the node, and how many GPUs reported.
struct HeartbeatAccepted {
  std::string node;
  std::size_t gpus = 0;
};

// Signals taken for a replica or a deployment.
struct SignalsAccepted {
  std::string kind;  // "replica" or "deployment"
  std::string name;
};

// A node being drained: cordoned, and the replicas on it now draining.
struct NodeDraining {
  std::string node;
  std::vector<std::string> draining;
};

// A node, model, replica or deployment removed.
struct Removed {
  std::string kind;  // "node", "model", "replica" or "deployment"
  std::string name;
  bool deleted = false;  // said "deleted" (models, deployments), else "removed"
  std::optional<int> draining = std::nullopt;  // a deployment's replicas left draining
};

// A device plugin's allocation confirmed; `swappedWith` names the twin whose GPUs it took.
struct AllocationConfirmed {
  std::string replica, node;
  std::vector<std::string> devices, gpus;
  std::optional<std::string> swappedWith = std::nullopt;
};

}  // namespace tessera::api
