// The ModelDeployment controller's GPU mode dra (controller.h, docs/dra.md): a replica booked
// before its pod exists, the claim that pins the engine's choice and the pod that names it;
// the claim taken away with its pod; a Warning event when kube-scheduler disagrees with the
// pin; and the bookings of pods whose claims the claim webhook pinned, freed when the claim
// goes.
#include <set>

#include "k8s/claim_admission.h"
#include "k8s/controller.h"
#include "k8s/dra_claims.h"
#include "k8s/internal/controller_objects.h"

namespace tessera::k8s {
namespace {

using controller_internal::annotationOf;
using controller_internal::controllerPodPath;
using controller_internal::finished;
using controller_internal::podWarningEvent;
using controller_internal::rvNumber;
using controller_internal::terminating;
using nlohmann::json;

std::string claimPath(const std::string& ns, const std::string& name = "") {
  return "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims" +
         (name.empty() ? "" : "/" + name);
}

// The claim of a replica's pod in GPU mode dra.
std::string claimNameOf(const std::string& podName) {
  return podName + "-gpu";
}

// The pod without the tessera.io/* extended resources (no device plugin advertises them in
// GPU mode dra: the claim carries the GPUs).
json withoutTesseraResources(json pod) {
  for (json& c : pod["spec"]["containers"]) {
    if (!c.contains("resources")) continue;
    for (const char* part : {"requests", "limits"}) {
      if (!c["resources"].contains(part)) continue;
      json& r = c["resources"][part];
      for (auto it = r.begin(); it != r.end();) {
        it = it.key().starts_with("tessera.io/") ? r.erase(it) : std::next(it);
      }
      if (r.empty()) c["resources"].erase(part);
    }
  }
  return pod;
}

// The pod a claim the webhook pinned holds a booking for: its replica annotation, when that
// names the pod that controls the claim (the owner kube-controller-manager set). A claim that
// names another pod, whoever wrote it, is not followed, so it can neither free nor keep that
// pod's booking.
std::string pinnedReplicaOf(const json& claim) {
  const std::string replica = annotationOf(claim, "tessera.io/replica");
  const std::string ns = metadataText(claim, "namespace");
  const json meta = claim.value("metadata", json::object());
  for (const json& o : meta.value("ownerReferences", json::array())) {
    if (o.is_object() && o.value("kind", "") == "Pod" && o.value("controller", false) &&
        replica == ns + "/" + o.value("name", "")) {
      return replica;
    }
  }
  return "";
}

}  // namespace

void Controller::onPinnedClaim(Informer::Change change, const json& claim) {
  if (change != Informer::Change::kDeleted) return;
  const std::string replica = pinnedReplicaOf(claim);
  if (replica.empty()) return;
  {
    std::lock_guard lock(mu_);
    podNotes_.emplace_back(PodNote::kPinnedClaimGone, replica);
  }
  wake_.notify_all();
}

bool Controller::pinnedClaimOf(const std::string& replicaId) const {
  if (!pinnedClaims_) return false;
  for (const json& claim : pinnedClaims_->list()) {
    if (pinnedReplicaOf(claim) == replicaId) return true;
  }
  return false;
}

void Controller::collectPodBookings() {
  std::set<std::string> pinned;
  for (const json& claim : pinnedClaims_->list()) {
    pinned.insert(pinnedReplicaOf(claim));
  }
  for (const std::string& id : fleet_.bookedPods()) {
    if (pinned.contains(id) || pods_->get(id)) continue;
    {
      std::lock_guard lock(mu_);
      if (overlay_.contains(id)) continue;
    }
    const std::size_t slash = id.find('/');
    if (slash == std::string::npos) continue;
    auto res = client_.request("GET", controllerPodPath(id.substr(0, slash), id.substr(slash + 1)));
    if (!res) continue;
    bool gone = res->status == 404;
    if (res->status == 200) {
      const json pod = json::parse(res->body, nullptr, false);
      gone = pod.is_object() && (finished(pod) || terminating(pod));
    }
    if (!gone) continue;
    fleet_.replicaGone(id);
    std::lock_guard lock(mu_);
    ++stats_.bookingsCollected;
  }
}

Result<void> Controller::createDraPod(const ModelDeploymentSpec& spec, json pod) {
  const std::string name = metadataText(pod, "name");
  const std::string replica = spec.ns + "/" + name;
  // 1. The engine's choice, booked (and persisted) before anything in the cluster names it.
  auto choice = fleet_.bookPod(pod);
  if (!choice) {
    return fail(Error{choice.error().code, "booking a replica of " + spec.ns + "/" + spec.name +
                                               ": " + choice.error().message});
  }
  ClaimChoice c;
  c.ns = spec.ns;
  c.name = claimNameOf(name);
  c.node = (*choice)["node"].get<std::string>();
  c.replica = replica;
  c.gpus = pinnedGpus(*choice);
  json claim = resourceClaim(c);
  // Owned by the ModelDeployment, as its pods are: deleting it deletes them all.
  claim["metadata"]["ownerReferences"] = pod["metadata"]["ownerReferences"];
  claim["metadata"]["labels"][std::string(kLabelModelDeployment)] =
      pod["metadata"]["labels"][std::string(kLabelModelDeployment)];
  // 2. The claim.
  auto made = client_.request("POST", claimPath(spec.ns), claim.dump());
  if (!made || (made->status != 201 && made->status != 200)) {
    const std::string why = made ? describeFailure(*made) : made.error().message;
    fleet_.forgetPod(replica, "its ResourceClaim could not be created: " + why);
    return fail(
        Error::precondition("creating ResourceClaim " + spec.ns + "/" + c.name + ": " + why));
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.claimsCreated;
  }
  // 3. The pod, pinned to the node and the claim; kube-scheduler's allocator confirms. Where
  // the state lives in the API server, the pod carries its booking from the start.
  if (const auto b = choice->find("booking"); b != choice->end() && b->is_string()) {
    pod["metadata"]["annotations"]["tessera.io/booking"] = *b;
    pod["metadata"]["labels"]["tessera.io/booked"] = "true";
  }
  const json pinned = withoutTesseraResources(pinPod(std::move(pod), c.name, c.node));
  auto res = client_.request("POST", controllerPodPath(spec.ns), pinned.dump());
  if (!res || (res->status != 201 && res->status != 200)) {
    const std::string why = res ? describeFailure(*res) : res.error().message;
    (void)client_.request("DELETE", claimPath(spec.ns, c.name));
    fleet_.forgetPod(replica, "its pod could not be created: " + why);
    return fail(Error::precondition("creating a pod of " + spec.ns + "/" + spec.name + ": " + why));
  }
  const json created = json::parse(res->body, nullptr, false);
  if (created.is_object()) remember(objectKey(created), Overlay{rvNumber(created), created});
  std::lock_guard lock(mu_);
  ++stats_.podsCreated;
  return {};
}

void Controller::deleteClaimOf(const std::string& podKey) {
  const std::size_t slash = podKey.find('/');
  if (slash == std::string::npos) return;
  const std::string ns = podKey.substr(0, slash);
  const std::string name = claimNameOf(podKey.substr(slash + 1));
  // Only the claim this controller made for the pod: another claim that happens to have the
  // name (a user's own, say) stays. The DELETE holds the version read, so a claim replaced in
  // between is not taken either.
  auto got = client_.request("GET", claimPath(ns, name));
  if (!got || got->status != 200) return;
  const json claim = json::parse(got->body, nullptr, false);
  if (!claim.is_object()) return;
  const json meta = claim.value("metadata", json::object());
  const json labels = meta.value("labels", json::object());
  if (meta.value("annotations", json::object()).value("tessera.io/replica", "") != podKey ||
      !labels.is_object() || !labels.contains(std::string(kLabelModelDeployment))) {
    return;
  }
  const json options = {
      {"apiVersion", "v1"},
      {"kind", "DeleteOptions"},
      {"preconditions",
       {{"uid", meta.value("uid", "")}, {"resourceVersion", meta.value("resourceVersion", "")}}}};
  // A claim still reserved for a terminating pod stays (its finalizer) until the pod is gone.
  auto res = client_.request("DELETE", claimPath(ns, name), options.dump());
  if (res && (res->status == 200 || res->status == 202)) {
    std::lock_guard lock(mu_);
    ++stats_.claimsDeleted;
  }
}

void Controller::reportUnsatisfiedClaim(const std::string& podKey) {
  if (!unsatisfiedReported_.insert(podKey).second) return;
  const std::size_t slash = podKey.find('/');
  if (slash == std::string::npos) return;
  const std::string ns = podKey.substr(0, slash), name = podKey.substr(slash + 1);
  std::string why;
  {
    std::lock_guard lock(mu_);
    why = unschedulableWhy_[podKey];
    unschedulableWhy_.erase(podKey);
  }
  // What the claim pins: the engine's choice.
  std::string choice = "its claim " + ns + "/" + claimNameOf(name);
  if (auto got = client_.request("GET", claimPath(ns, claimNameOf(name)));
      got && got->status == 200) {
    const json claim = json::parse(got->body, nullptr, false);
    if (claim.is_object()) {
      const json meta = claim.value("metadata", json::object());
      choice += " (Tessera chose node " +
                meta.value("annotations", json::object()).value("tessera.io/node", "?");
      const json requests = claim.value("spec", json::object())
                                .value("devices", json::object())
                                .value("requests", json::array());
      for (const json& r : requests) {
        const json ex = r.value("exactly", json::object());
        const json sel = ex.value("selectors", json::array());
        if (!sel.empty() && sel[0].is_object()) {
          choice += "; " + sel[0].value("cel", json::object()).value("expression", "");
        }
        const json caps = ex.value("capacity", json::object()).value("requests", json::object());
        for (const auto& [k, v] : caps.items()) {
          choice += ", " + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
        }
      }
      choice += ")";
    }
  }
  const auto current = pods_->get(podKey);
  const std::string uid = current ? metadataText(*current, "uid") : "";
  const json event = podWarningEvent(
      ns, name, uid, "TesseraClaimUnsatisfied",
      "kube-scheduler could not allocate " + choice + ": " + why +
          ". Tessera's books and the cluster's ResourceSlices disagree (another driver "
          "publishing these GPUs, a device taint, or a stale slice).",
      "tessera-controller");
  auto res = client_.request("POST", "/api/v1/namespaces/" + ns + "/events", event.dump());
  if (res && (res->status == 201 || res->status == 200)) {
    std::lock_guard lock(mu_);
    ++stats_.unsatisfiedClaimEvents;
  } else {
    unsatisfiedReported_.erase(podKey);  // try again at the pod's next update
  }
}

}  // namespace tessera::k8s
