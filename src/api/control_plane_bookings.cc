// ControlPlane: pods booked through the kube-scheduler extender and the claim webhook: the
// booking written to the store before the pod's Binding (or with the pod, in GPU mode dra),
// and forgotten when either fails.

#include <memory>

#include "api/control_plane.h"

namespace tessera::api {

using nlohmann::json;

Result<json> ControlPlane::bookClaim(const json& pod, const k8s::OutsideLock& outside,
                                     bool podExists) {
  // Without the caller's OutsideLock the write still runs outside the state lock (storeIo_).
  return extender_->bookForClaim(pod, outside ? outside : storeIo_, podExists);
}

void ControlPlane::forgetClaim(const std::string& replicaId, const std::string& why) {
  extender_->forgetClaimBooking(replicaId, why);
}

Result<json> ControlPlane::extenderBind(const json& args, const k8s::OutsideLock& outside) {
  // The extender assumes, persists through prepareBooking() and then posts the Binding.
  auto out = extender_->bind(args, outside ? outside : storeIo_);
  if (!out || !(*out)["Error"].get<std::string>().empty()) return out;
  const json* ns = k8s::fieldIgnoringCase(args, "PodNamespace");
  const json* name = k8s::fieldIgnoringCase(args, "PodName");
  const std::string id = (ns != nullptr && ns->is_string() && !ns->get<std::string>().empty()
                              ? ns->get<std::string>()
                              : std::string("default")) +
                         "/" +
                         (name != nullptr && name->is_string() ? name->get<std::string>() : "");
  const auto rid = state_.findReplica(id);
  if (!rid) return out;  // not a pod Tessera books
  note("ReplicaBound", id, "on " + state_.node(state_.replica(*rid).placement.node).spec.name);
  return out;
}

k8s::BookingWrite ControlPlane::prepareBooking(const std::string& id, const std::string& resource,
                                               bool podExists) {
  const auto rid = state_.findReplica(id);
  if (!rid) {
    return {
        [id]() -> Result<void> { return fail(Error::internal("pod " + id + " is not booked")); },
        nullptr, ""};
  }
  const sched::ReplicaRecord& rec = state_.replica(*rid);
  // The pod's container gets its GPUs from the node's device plugin, which confirms it. A
  // fresh bind starts unconfirmed, also where a pod of the same name held a confirmed
  // allocation before (a StatefulSet pod created again). Assumed now, undone in settle when
  // the write fails.
  std::optional<PodAllocation> previous;
  if (const auto a = podAllocations_.find(id); a != podAllocations_.end()) previous = a->second;
  if (!resource.empty()) podAllocations_[id] = PodAllocation{resource, false, {}};
  const bool wasPod = !pods_.insert(id).second;
  const Millis now = eventTimeMs();
  const std::string message = "on " + state_.node(rec.placement.node).spec.name +
                              (podExists ? ", before its Binding" : ", before its pod exists");
  const std::string doc =
      replicaDoc(rec.placement, rec.phase == sched::ReplicaPhase::kLoaded).dump();
  // A store that keeps bookings on the pods cannot write onto a pod that is not there yet: the
  // pod is created carrying the document (GPU mode dra), and its creation is the write.
  const bool onPod = !podExists && store_ != nullptr && store_->bookingsOnPods();
  store::WriteSet batch;
  if (!onPod) batch.put("replica", id, doc);
  // The event goes to the sink once the booking is stored (in the same write, which runs with
  // the dispatcher's locks released); its seq is reserved now.
  const std::int64_t reserved = reserveSeqs(1);
  auto seq = std::make_shared<Result<std::int64_t>>(fail(Error::internal("not appended")));
  auto write = [store = onPod ? nullptr : store_, events = eventLog_, batch = std::move(batch),
                text = eventJson("ReplicaBooked", id, message), now, reserved,
                seq]() -> Result<void> {
    if (store != nullptr) {
      auto done = store::writeAll(*store, batch);  // the store serialises its own calls
      if (!done) return fail(storeRefused(done.error()));
    }
    if (events != nullptr) *seq = events->append("event", text, now, reserved);
    return {};
  };
  auto settle = [this, id, previous, wasPod, now, message, seq, reserved](bool stored) {
    if (stored) {
      if (eventLog_ != nullptr && !*seq) sinkFailed(seq->error());
      if (eventLog_ != nullptr && *seq) ++appendedSinceCompaction_;
      remember(*seq ? **seq : reserved, now, "ReplicaBooked", id, message);
      return;
    }
    unreserveSeqs(reserved, 1);
    if (previous) {
      podAllocations_[id] = *previous;
    } else {
      podAllocations_.erase(id);
    }
    if (!wasPod) pods_.erase(id);
  };
  return {std::move(write), std::move(settle), onPod ? doc : std::string()};
}

void ControlPlane::forgetBooking(const std::string& id, const std::string& why) {
  podAllocations_.erase(id);
  store::WriteSet batch;
  batch.remove("replica", id);
  pods_.erase(id);
  if (auto removed = commit(std::move(batch), "BookingForgotten", id, why); !removed) {
    // The stored booking outlives the pod's failed Binding until the pod is deleted (or, in
    // the API server, until the next leader drops bookings of unbound pods).
    internalErrors_.add({{"where", "forget-booking"}});
    alert("InternalError", id,
          "the booking of a pod that is not bound (" + why +
              ") could not be removed: " + removed.error().message);
  }
}

}  // namespace tessera::api
