#pragma once
// The control side of Tessera's DRA mode (docs/dra.md): the engine has picked a node, the
// GPUs and the share of each for a replica; this expresses that choice in objects
// kube-scheduler's allocator only has to confirm.
//
//  - resourceClaim(): one request per GPU of the choice, each `exactly` of Tessera's device
//    class with a CEL selector that pins the device by an attribute (CEL cannot see device
//    names): the GPU's uuid, or for a MIG slice its parentUUID, profile and migStart; and
//    `capacity.requests` carrying the share (memory in MiB and compute in thousandths; an
//    exclusive GPU requests the whole card, so no other claim fits beside it).
//  - pinPod(): the pod's node affinity (required: metadata.name of the chosen node), its
//    spec.resourceClaims entry naming the claim, and every container's resources.claims.
//  - deviceClass(): the DeviceClass those claims name (every device of the driver).
//
// Plain functions over JSON values.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::k8s {

// The DRA driver Tessera's node agent runs (src/dra) and the capacity it publishes per GPU.
inline constexpr std::string_view kDraDriverName = "gpu.tessera.io";
inline constexpr std::int64_t kDraComputeMilli = 1000;  // a whole card's `compute`

inline constexpr std::string_view kDeviceClassName = "gpu.tessera.io";
// The pod's name for the claim (spec.resourceClaims[].name, containers' resources.claims).
inline constexpr std::string_view kPodClaimName = "tessera-gpu";

// One GPU of the engine's choice.
struct PinnedGpu {
  std::string uuid;  // the GPU's (a MIG slice's parent)
  std::int64_t cardMemoryMib = 0;
  std::int64_t memoryMib = 0;     // booked on it
  std::int32_t computeMilli = 0;  // booked on it
  bool exclusive = false;         // the whole card
  std::string migProfile;         // a MIG slice: its profile and first memory slice
  int migStart = -1;
};

struct ClaimChoice {
  std::string ns, name;  // the claim's
  std::string node;      // the chosen node
  std::vector<PinnedGpu> gpus;
  std::string replica;  // the engine's replica id, kept as an annotation
};

// The GPUs of an engine choice as Extender::bookForClaim answers it ({mode, gpus: [{uuid,
// cardMemoryMib, reservedMib, computeMilli, migProfile?, migStart?}]}).
std::vector<PinnedGpu> pinnedGpus(const nlohmann::json& choice);
// The CEL selector that pins one GPU.
std::string pinSelector(const PinnedGpu& gpu, std::string_view driver = kDraDriverName);
nlohmann::json resourceClaim(const ClaimChoice& choice);
// `pod` with the claim and the node affinity added (an existing entry of the same name is
// replaced, other affinity terms are kept and the node term is added to each).
nlohmann::json pinPod(nlohmann::json pod, const std::string& claimName, const std::string& node);
nlohmann::json deviceClass();
// Whether the pod names Tessera's claim (spec.resourceClaims[].name kPodClaimName): a pod of
// GPU mode dra, whose claim pins the booked GPU.
bool hasTesseraClaim(const nlohmann::json& pod);
// Whether the pod takes a claim from a ResourceClaimTemplate (spec.resourceClaims[]
// .resourceClaimTemplateName): a booked one got its booking from the claim webhook
// (k8s/claim_admission.h), whose pinned claim holds the GPU before the pod is bound.
bool usesClaimTemplate(const nlohmann::json& pod);

}  // namespace tessera::k8s
