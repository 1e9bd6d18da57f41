#pragma once
// A Kubernetes v1.Pod (standard lowercase JSON, as kube-scheduler embeds it in extender
// calls) read as a Tessera placement request. docs/kubernetes.md documents the contract:
//
//   container resources (requests, or limits where a request is absent, summed over the
//   pod's containers):
//     nvidia.com/gpu: N         N whole GPUs, exclusive (the card's whole memory)
//     tessera.io/gpus: N        N GPUs (tensor-parallel degree) shared with other replicas
//     tessera.io/gpu-memory: M  MiB per GPU (the estimate; the safety factor is applied)
//     tessera.io/gpu-compute: C thousandths of a GPU's compute per GPU (1000 = a whole GPU)
//     cpu, memory               host CPU and memory per replica
//   annotations:
//     tessera.io/model          a model whose profile the control plane knows (weights, KV
//                               cache, overhead, priority); explicit resources override it
//     tessera.io/deployment     replicas of one deployment repel each other (default: the
//                               owner reference's name, else the pod's name)
//     tessera.io/priority       integer, higher wins (default: spec.priority when the pod
//                               names a priorityClassName, else the model profile's)
//     tessera.io/gpu-types      comma-separated acceptable GPU types (catalogue names)
//     tessera.io/sharing        comma-separated: exclusive, shared, mig
//     tessera.io/mig-profile    smallest acceptable MIG profile, e.g. 1g.10gb
//   spec.nodeSelector and spec.tolerations carry over.
//
// The replica id is "<namespace>/<name>". A pod with none of the GPU resources and no model
// annotation is not Tessera's to place (`managed` is false).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "model/workload.h"

namespace tessera::k8s {

inline constexpr std::string_view kResourceWholeGpu = "nvidia.com/gpu";
inline constexpr std::string_view kResourceGpus = "tessera.io/gpus";
inline constexpr std::string_view kResourceGpuMemory = "tessera.io/gpu-memory";
inline constexpr std::string_view kResourceGpuCompute = "tessera.io/gpu-compute";
inline constexpr std::string_view kAnnotationModel = "tessera.io/model";
inline constexpr std::string_view kAnnotationDeployment = "tessera.io/deployment";
inline constexpr std::string_view kAnnotationPriority = "tessera.io/priority";
inline constexpr std::string_view kAnnotationGpuTypes = "tessera.io/gpu-types";
inline constexpr std::string_view kAnnotationSharing = "tessera.io/sharing";
inline constexpr std::string_view kAnnotationMigProfile = "tessera.io/mig-profile";

// Known model profiles by name (the control plane's registry); nullopt = unknown.
using ModelLookup = std::function<std::optional<model::ModelProfile>(std::string_view name)>;

struct PodRequest {
  std::string name;
  std::string ns;
  std::string uid;
  bool managed = false;  // asks for GPUs through Tessera
  model::PlacementRequest request;
};

// Errors name the JSON path, e.g. `Pod.spec.containers[1].resources.requests["tessera.io/
// gpu-memory"]: quantity "x": expected a number`.
Result<PodRequest> readPod(const nlohmann::json& pod, const ModelLookup& models);

}  // namespace tessera::k8s
