#pragma once
// The mutating admission webhook for pods outside ModelDeployments (docs/dra.md, "Pods of
// your own"): a pod asks for a Tessera GPU through a ResourceClaimTemplate of the class
// gpu.tessera.io; kube-controller-manager creates the pod's claim from it; this webhook
// sees that claim's CREATE, has the engine place the pod and book it, and rewrites the
// claim's request into the pin the ModelDeployment controller writes for its replicas (a
// CEL selector on the chosen GPU's uuid, capacity.requests carrying the booked share), so
// kube-scheduler's allocator can only confirm the engine's choice.
//
// Which claims: CREATE of a resource.k8s.io ResourceClaim that kube-controller-manager made
// for a pod (annotation resource.kubernetes.io/pod-claim-name, a controlling ownerReference
// to a v1 Pod) and that has a request `exactly` of Tessera's device class. Everything else is
// allowed unmodified and silently.
//
// What a claim may ask (readClaimAsk): one request of the class, allocationMode ExactCount
// with a count of 1..16 GPUs, capacity.requests `memory` (the estimate per GPU, the engine
// adds its safety factor, as for tessera.io/gpu-memory) and `compute` (thousandths of a card);
// without `memory` each GPU is taken whole. The pod's annotations (tessera.io/model,
// priority, gpu-types, sharing, mig-profile, deployment), nodeSelector and tolerations count
// as for the extender (k8s/pod.h).
//
// Answers (an admission.k8s.io/v1 AdmissionReview with the request's uid):
//  - pinned: allowed, a base64 JSONPatch that replaces the request by one pinned request per
//    GPU (one GPU keeps the request's name; N GPUs are named <request>-0..N-1), labels the
//    claim tessera.io/pinned=admission and annotates it with the node and the replica (the
//    pod, "<namespace>/<name>", the booking's id);
//  - the engine cannot place the pod, or the claim or pod asks in a way Tessera cannot pin:
//    allowed unmodified, with a warning (at most 256 bytes, what the API server passes on
//    whole) and a Warning event TesseraClaimNotPinned on the pod carrying the reason (at most
//    1024 bytes); kube-scheduler then allocates the claim by its first fit;
//  - the pod cannot be read, or the booking could not be stored: allowed false with the
//    reason; the API server refuses the claim and kube-controller-manager creates it again
//    with backoff;
//  - a dry run books nothing: allowed unmodified with a warning.
// A second review of the same pod answers the booking it already has (the same patch); a
// claim that already carries the pin (label tessera.io/pinned=admission) is allowed as it is.
//
// Errors (the review itself is malformed): Error::invalid naming the field, which the HTTP
// layer answers with 400.
//
// Threading: review() may run on several threads at once; the booking callback serialises
// itself (the server's lock).

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "k8s/kube_client.h"

namespace tessera::k8s {

inline constexpr std::string_view kAdmissionPath = "/admission/resourceclaims";
// Set by kube-controller-manager on a claim made from a pod's template.
inline constexpr std::string_view kAnnotationPodClaimName = "resource.kubernetes.io/pod-claim-name";
// On a claim this webhook pinned (the controller watches these to free the booking).
inline constexpr std::string_view kLabelPinned = "tessera.io/pinned";
inline constexpr std::string_view kPinnedByAdmission = "admission";

// The parts of an AdmissionReview request the webhook reads.
struct AdmissionRequest {
  std::string uid;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  std::string group, kind;
  std::string ns;
  bool dryRun = false;
  nlohmann::json object;  // request.object (null for DELETE)
};
// Errors name the field ("request.uid: missing").
Result<AdmissionRequest> readAdmissionReview(const nlohmann::json& review);

// The answer to `uid`: allowed (with an optional JSONPatch, sent base64) or refused with a
// message; warnings go back to the client that made the object.
nlohmann::json admissionAnswer(const std::string& uid, bool allowed,
                               const nlohmann::json& patch = nullptr,
                               const std::vector<std::string>& warnings = {},
                               const std::string& refusal = "");

// What a claim asks of Tessera's class.
struct ClaimAsk {
  std::size_t index = 0;  // in spec.devices.requests
  std::string requestName;
  int gpus = 1;
  std::optional<std::int64_t> memoryMib;  // per GPU; none: whole cards
  std::optional<std::int64_t> computeMilli;
  nlohmann::json tolerations;  // the request's, kept on the pinned requests
};
// nullopt: no request of Tessera's class. An error names the field Tessera cannot pin
// ("spec.devices.requests[0].exactly.allocationMode: All ...").
Result<std::optional<ClaimAsk>> readClaimAsk(const nlohmann::json& claim);

// The pod as the engine reads it (k8s/pod.h): its own annotations, selectors and
// tolerations, with the claim's ask as tessera.io/* resources on its first container.
nlohmann::json podAsking(nlohmann::json pod, const ClaimAsk& ask);

// The JSONPatch (RFC 6902) that turns `claim` into the pin of `choice` (the answer of
// Extender::bookForClaim: replica, node, mode, gpus).
nlohmann::json pinPatch(const nlohmann::json& claim, const ClaimAsk& ask,
                        const nlohmann::json& choice);

class ClaimAdmission {
 public:
  // Books the pod (as read by k8s/pod.h) on the engine's choice, persisting it onto the pod;
  // answers the choice (Extender::bookForClaim) or the engine's refusal.
  using Book = std::function<Result<nlohmann::json>(const nlohmann::json& pod)>;

  struct Stats {
    int pinned = 0;
    int notPinned = 0;  // allowed unmodified with a reason
    int refused = 0;    // allowed false: retried by the API server's client
    int events = 0;
  };

  // `client` is borrowed (reads the pod, posts events).
  explicit ClaimAdmission(KubeClient& client) : client_(client) {}

  Result<nlohmann::json> review(const nlohmann::json& body, const Book& book);
  Stats stats() const;

 private:
  void event(const std::string& ns, const std::string& pod, const std::string& uid,
             const std::string& message);

  KubeClient& client_;
  std::atomic<int> pinned_{0}, notPinned_{0}, refused_{0}, events_{0};
};

}  // namespace tessera::k8s
