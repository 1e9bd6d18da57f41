#include "api/kube_fleet.h"

#include "api/json_api.h"

namespace tessera::api {

using nlohmann::json;

// The bodies are decoded before the write runs, as the API's are.
Result<void> PlaneFleet::putModel(const json& profile) {
  auto request = json_api::decodePutModel(profile);
  if (!request) return fail(request.error());
  Result<void> out;
  run_([&](ControlPlane& plane) {
    if (auto r = plane.putModel(std::move(*request)); !r) out = fail(r.error());
  });
  return out;
}

Result<void> PlaneFleet::putDeployment(const json& body) {
  auto request = json_api::decodePutDeployment(body);
  if (!request) return fail(request.error());
  Result<void> out;
  run_([&](ControlPlane& plane) {
    if (auto r = plane.putDeployment(std::move(*request)); !r) out = fail(r.error());
  });
  return out;
}

Result<void> PlaneFleet::deleteDeployment(const std::string& name) {
  Result<void> out;
  run_([&](ControlPlane& plane) {
    if (!plane.hasDeployment(name)) return;
    if (auto r = plane.deleteDeployment(name); !r) out = fail(r.error());
  });
  return out;
}

std::optional<k8s::Fleet::Deployment> PlaneFleet::deployment(const std::string& name) {
  std::optional<Deployment> out;
  run_([&](ControlPlane& plane) {
    auto d = plane.getDeployment(name);
    if (!d) return;
    const json& s = (*d)["status"];
    out = Deployment{s.value("desired", 0), s.value("warm", 0), s.value("pendingReason", "")};
  });
  return out;
}

// These three are level-triggered: the controller calls them on every reconcile of what it
// sees in the cluster, so a call the plane refuses (its store is down) is made again on the
// next pass, and the plane's own metrics and events report the store's failure.
void PlaneFleet::replicaReady(const std::string& replicaId) {
  run_([&](ControlPlane& plane) {
    const auto r = plane.getReplica(replicaId);
    if (r && (*r).value("phase", "") != "loaded") (void)plane.replicaLoaded(replicaId);
  });
}

void PlaneFleet::replicaGone(const std::string& replicaId) {
  run_([&](ControlPlane& plane) {
    if (plane.getReplica(replicaId)) (void)plane.removeReplica(replicaId);
  });
}

Result<json> PlaneFleet::bookPod(const json& pod) {
  Result<json> out = fail(Error::internal("not run"));
  run_([&](ControlPlane& plane) { out = plane.bookClaim(pod); });
  return out;
}

void PlaneFleet::forgetPod(const std::string& replicaId, const std::string& why) {
  run_([&](ControlPlane& plane) { plane.forgetClaim(replicaId, why); });
}

std::vector<std::string> PlaneFleet::bookedPods() {
  std::vector<std::string> out;
  run_([&](ControlPlane& plane) { out = plane.bookedPods(); });
  return out;
}

void PlaneFleet::setNodeCordoned(const std::string& node, bool cordoned) {
  run_([&](ControlPlane& plane) {
    const auto n = plane.getNode(node);
    if (n && (*n).value("cordoned", !cordoned) != cordoned) (void)plane.setCordoned(node, cordoned);
  });
}

std::vector<std::string> PlaneFleet::kubernetesDeployments() {
  std::vector<std::string> out;
  run_([&](ControlPlane& plane) {
    const json all = plane.listDeployments();  // the loop must not borrow a temporary
    for (const json& d : all["deployments"]) {
      if (d.value("placedBy", "") == "kubernetes") out.push_back(d["name"]);
    }
  });
  return out;
}

std::vector<std::string> PlaneFleet::replicasOf(const std::string& deployment) {
  std::vector<std::string> out;
  run_([&](ControlPlane& plane) {
    auto d = plane.getDeployment(deployment);
    if (!d) return;
    for (const json& r : (*d)["replicas"]) out.push_back(r["replica"]);
  });
  return out;
}

}  // namespace tessera::api
