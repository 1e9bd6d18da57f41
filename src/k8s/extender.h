#pragma once
// The kube-scheduler extender: filter, prioritize, preempt and bind over the placement
// engine, speaking the wire format of k8s.io/kube-scheduler/extender/v1 exactly.
//
// Wire format. The extender types have no JSON tags, so their keys are the Go field names
// (`Pod`, `Nodes`, `NodeNames`, `FailedNodes`, `FailedAndUnresolvableNodes`, `Error`, `Host`,
// `Score`, `NodeNameToVictims`, `NodeNameToMetaVictims`, `Pods`, `UID`, `NumPDBViolations`,
// `PodName`, `PodNamespace`, `PodUID`, `Node`) and kube-scheduler decodes them
// case-insensitively; this decoder does too. The embedded v1.Pod and v1.NodeList are
// ordinary Kubernetes JSON. With `nodeCacheCapable: true` the scheduler sends `NodeNames`
// only and the answer must name a subset of them; otherwise it sends `Nodes` (a NodeList)
// and gets back the passing Node objects unchanged.
//
// Semantics:
//  - filter: every candidate node on which the pod has a placement passes. A node that
//    fails gets a reason built from the engine's rejections; it goes to
//    FailedAndUnresolvableNodes when evicting pods cannot help (wrong GPU type, taint,
//    selector, topology, a GPU smaller than the request, a node Tessera does not know) and
//    to FailedNodes when it is a matter of free capacity.
//  - prioritize: every candidate node, feasible ones scored 1..10 by the engine's best
//    option there (linear between the worst and best feasible node; 10 when all tie),
//    infeasible ones 0. kube-scheduler's own plugins still weigh in.
//  - preempt: keeps the nodes where the pod's GPU request fits once the victims the
//    scheduler proposes are gone (victims are mapped to Tessera replicas by namespace/name,
//    or by UID for meta victims); answers with NodeNameToMetaVictims.
//  - bind: kube-scheduler's cache discipline. It assumes (books the pod on the chosen node in
//    memory; the engine picks the GPUs there), persists (the BookingStore writes the booking,
//    in a cluster onto the pod itself), then hands the binding to the Binder (which POSTs the
//    v1.Binding: the commit point). When persisting fails the booking is forgotten and no
//    Binding is posted; when the Binding fails the booking is forgotten in memory and in the
//    store. The booked GPUs are what the node's device plugin gives the container.
//  - Pods that ask for no GPU through Tessera (see pod.h) pass filter unchanged and score 0.
//  - The device plugin hand-off (docs/device-plugin.md): kubelet's Allocate names device IDs,
//    not the pod, so the node's plugin matches containers to bookings by GPU count, oldest
//    first. Two pods bound to one node with the same GPU count and resource but a different
//    booking shape (per-GPU card type, memory, compute, sharing mode, MIG profile) could be
//    swapped then. bind therefore refuses (a retryable `Error`: kube-scheduler retries the pod
//    with backoff) to bind a pod next to such an unconfirmed booking; the guard ends when
//    the plugin confirms the allocation (allocationConfirmed) or after a TTL.
//
// Errors: a malformed argument (not an object, wrong types, a bad quantity) returns an
// Error naming the JSON path; the HTTP layer answers 400 and nothing changes. A pod the
// engine refuses as a request (e.g. more GPUs than any node has) is answered with the
// `Error` field, which fails the pod in kube-scheduler.
//
// Threading: not thread-safe; the server calls it from its event loop.

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/pod.h"
#include "sched/engine.h"

namespace tessera::k8s {

// Posts a v1.Binding for the pod (namespace, name, uid) to the node.
using Binder = std::function<Result<void>(const std::string& ns, const std::string& name,
                                          const std::string& uid, const std::string& node)>;

// Reads a pod from the API server (namespace, name): for a bind whose filter this replica did
// not see (it became the leader in between, or forgot the pod).
using PodSource =
    std::function<Result<nlohmann::json>(const std::string& ns, const std::string& name)>;

// The member of `obj` whose key equals `key` ignoring ASCII case; nullptr if none.
const nlohmann::json* fieldIgnoringCase(const nlohmann::json& obj, std::string_view key);

// The write that makes one booking durable: `write` runs outside the caller's lock (store
// I/O only), `settle` under it again, told whether the write succeeded.
struct BookingWrite {
  std::function<Result<void>()> write;
  std::function<void(bool stored)> settle;
  // Where the store keeps a pod's booking on the pod itself and the pod does not exist yet (a
  // DRA claim booking, Extender::bookForClaim): the document the pod must carry when it is
  // created (annotation tessera.io/booking, label tessera.io/booked=true); `write` then
  // writes nothing, the pod's creation is the write.
  std::string onPod;
};
// Makes a booking durable before its Binding is posted (prepare, under the caller's lock:
// returns the write), and takes it back when the Binding failed or the booking was removed
// while the Binding was in flight (forget, under the lock, with why).
// `resource` is the extended resource that carries the pod's GPUs to its container ("" when
// no device plugin is involved); `podExists` is false for a pod booked before it is created.
struct BookingStore {
  std::function<BookingWrite(const std::string& replicaId, const std::string& resource,
                             bool podExists)>
      prepare;
  std::function<void(const std::string& replicaId, const std::string& why)> forget;
};
// Runs `io` with the caller's lock released and takes it again (bind's store write, Binding
// POST and pod read); empty: runs it in place.
using OutsideLock = std::function<void(const std::function<void()>& io)>;

class Extender {
 public:
  Extender(sched::ClusterState& state, sched::PlacementEngine& engine, ModelLookup models,
           Binder binder = nullptr);

  Result<nlohmann::json> filter(const nlohmann::json& args);
  Result<nlohmann::json> prioritize(const nlohmann::json& args);
  Result<nlohmann::json> preempt(const nlohmann::json& args);
  // With `outside`, the network and disk I/O runs with the caller's lock released: the
  // booking is assumed (in the books, guarding its node) before it and settled after.
  Result<nlohmann::json> bind(const nlohmann::json& args, const OutsideLock& outside = {});
  // DRA mode (docs/dra.md): books a pod that is about to be created, before anything names a
  // node. The engine places it on any node (as filter and bind would together), the booking
  // is persisted through the BookingStore (outside the lock), and the answer is the choice
  // the ModelDeployment controller writes into the pod's ResourceClaim:
  //   {replica, node, mode, gpus: [{id, uuid, cardMemoryMib, reservedMib, computeMilli,
  //                                 migProfile, migStart}], booking?}
  // `booking`, when present, is the document the pod must carry at creation (the store keeps
  // bookings on pods: BookingWrite::onPod); the caller's pod creation is then the write.
  // A retry for a replica already booked answers its booking. Errors: a pod that asks for no
  // GPU through Tessera (invalid), nothing fits (exhausted, with the engine's reason), the
  // write failed (nothing stays booked). `podExists`: the pod is already in the API server
  // (the claim webhook, k8s/claim_admission.h), so the store writes the booking onto it now.
  Result<nlohmann::json> bookForClaim(const nlohmann::json& pod, const OutsideLock& outside = {},
                                      bool podExists = false);
  // Takes back a booking made by bookForClaim whose claim or pod could not be created.
  void forgetClaimBooking(const std::string& replicaId, const std::string& why);

  // Who posts the v1.Binding from now on (nullptr: bind books but posts nothing).
  void setBinder(Binder binder) { binder_ = std::move(binder); }
  const Binder& binder() const { return binder_; }
  // Where bind reads a pod it did not filter (nullptr: such a bind only posts the Binding).
  void setPodSource(PodSource source) { podSource_ = std::move(source); }
  // Where bind persists its bookings (empty hooks: memory only).
  void setBookingStore(BookingStore store) { bookings_ = std::move(store); }

  // ---- the device plugin hand-off guard
  // A pod bound and not yet given its GPUs by the node's device plugin.
  struct Unconfirmed {
    std::string replicaId;
    sched::NodeId node = -1;
    std::string resource;  // the extended resource the pod asked for (kResourceGpus, ...)
    int gpus = 0;
    std::string shape;  // resource, mode and per-GPU card type/memory/compute/MIG profile
    Millis boundAtMs = 0;
  };
  // How long a bound pod's booking guards its node without a confirmation (default 30 s).
  void setConfirmTtlMs(Millis ttlMs) { confirmTtlMs_ = ttlMs; }
  Millis confirmTtlMs() const { return confirmTtlMs_; }
  // The device plugin gave the replica's container its GPUs: the guard ends.
  void allocationConfirmed(std::string_view replicaId);
  // The pod bound as `replicaId` while its guard lasts (for the resource it asked for).
  const Unconfirmed* unconfirmed(std::string_view replicaId) const;
  // The extended resource that carries a pod's GPUs to its container: nvidia.com/gpu when a
  // container asks for it, else tessera.io/gpus when one asks for that, else "" (no device
  // plugin is involved: no guard, nothing to confirm).
  static std::string deviceResource(const nlohmann::json& pod);

  // Pods seen by filter or prioritize and not bound yet are remembered (by UID) for bind, up
  // to this many; the oldest are forgotten first.
  static constexpr std::size_t kRememberedPods = 4096;

 private:
  struct Candidates {
    std::vector<std::string> names;
    const nlohmann::json* items = nullptr;  // Nodes.items when sent (not node-cache-capable)
    bool nodeCacheCapable = false;
  };
  Result<Candidates> candidates(const nlohmann::json& args) const;
  // The engine's feasible nodes and scores for the pod on the current state. The last few
  // answers are kept by (state generation, request shape: requestKey without the replica
  // id): kube-scheduler calls prioritize right after filter with the same pod, and pods of
  // one deployment share a shape, so neither scores the cluster again until it changes.
  const std::vector<sched::PlacementEngine::NodeScore>& feasibleScores(const PodRequest& pod);
  // Everything the engine reads from a request (the replica id only when asked).
  static std::string requestKey(const model::PlacementRequest& request, bool withReplicaId);
  Result<PodRequest> pod(const nlohmann::json& args);
  void remember(const PodRequest& pod);

  sched::ClusterState& state_;
  sched::PlacementEngine& engine_;
  ModelLookup models_;
  Binder binder_;
  BookingStore bookings_;
  PodSource podSource_;
  // UID → pod request (for bind), oldest first in order_.
  std::unordered_map<std::string, PodRequest> pods_;
  std::list<std::string> order_;
  struct Scored {
    std::uint64_t generation = 0;
    std::string key;
    std::vector<sched::PlacementEngine::NodeScore> scores;
  };
  static constexpr std::size_t kScoredCache = 16;
  std::deque<Scored> scored_;
  // Per node id: why the node last failed filter, for a request shape (requestKey without
  // the replica id) at a node generation.
  struct NodeReason {
    std::uint64_t nodeGeneration = 0;
    std::string shape;
    bool known = false;  // the engine named a reason
    std::string reason;
    bool resolvable = true;
  };
  std::vector<NodeReason> reasons_;
  // Pod UID → replica id of pods Tessera bound (for preemption's meta victims).
  std::unordered_map<std::string, std::string> boundUids_;
  // Pod UID → deviceResource of pods in pods_.
  std::unordered_map<std::string, std::string> resources_;
  // Bound pods whose allocation the device plugin has not confirmed, oldest first.
  std::vector<Unconfirmed> unconfirmed_;
  Millis confirmTtlMs_ = 30'000;
  std::string bookingShape(const std::string& resource, sched::ReplicaId replica) const;
};

}  // namespace tessera::k8s
