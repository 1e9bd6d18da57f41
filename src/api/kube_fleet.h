#pragma once
// The ModelDeployment controller's (k8s/controller.h) view of the control plane: each call
// runs through `run`, which `tessera serve` points at HttpServer::withPlane: the dispatcher's
// write path (api/dispatcher.h), behind its leadership gate and on its writer lock, as the HTTP
// handlers' mutating calls and the upkeep tick.
//
//  - putModel / putDeployment / deleteDeployment: the API's own operations (errors name the
//    field, as the API's do);
//  - deployment: the autoscaler's count (status.desired, status.warm) and why replicas wait;
//  - replicaReady: a pod turned Ready, its booking is marked loaded (once);
//  - replicaGone: a pod was deleted or finished, its booking is freed;
//  - setNodeCordoned: Kubernetes cordoned, uncordoned or deleted a node Tessera knows;
//  - bookPod / forgetPod: GPU mode dra, a replica's pod booked before it is created (its
//    ResourceClaim pins the choice), and taken back when creating it failed;
//  - bookedPods: every pod with a booking, for the clean-up of GPU mode dra;
//  - kubernetesDeployments / replicasOf: the placedBy-kubernetes deployments and their
//    bookings, for the controller's clean-up after a restart.
// Replicas or nodes Tessera does not know are ignored: not every pod or node is Tessera's.

#include <functional>
#include <string>

#include "api/control_plane.h"
#include "k8s/controller.h"

namespace tessera::api {

class PlaneFleet : public k8s::Fleet {
 public:
  using Runner = std::function<void(const std::function<void(ControlPlane&)>&)>;
  explicit PlaneFleet(Runner run) : run_(std::move(run)) {}

  Result<void> putModel(const nlohmann::json& profile) override;
  Result<void> putDeployment(const nlohmann::json& body) override;
  Result<void> deleteDeployment(const std::string& name) override;
  std::optional<Deployment> deployment(const std::string& name) override;
  void replicaReady(const std::string& replicaId) override;
  void replicaGone(const std::string& replicaId) override;
  void setNodeCordoned(const std::string& node, bool cordoned) override;
  std::vector<std::string> kubernetesDeployments() override;
  std::vector<std::string> replicasOf(const std::string& deployment) override;
  Result<nlohmann::json> bookPod(const nlohmann::json& pod) override;
  void forgetPod(const std::string& replicaId, const std::string& why) override;
  std::vector<std::string> bookedPods() override;

 private:
  Runner run_;
};

}  // namespace tessera::api
