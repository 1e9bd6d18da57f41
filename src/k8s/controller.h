#pragma once
// The ModelDeployment controller: keeps a cluster's pods where Tessera's deployments want
// them (docs/kubernetes.md, "The ModelDeployment controller").
//
// It watches three collections through informers (k8s/informer.h):
//  - ModelDeployments (tessera.io/v1alpha1, all namespaces),
//  - pods that Tessera schedules (fieldSelector spec.schedulerName=tessera-scheduler),
//  - nodes.
// and reconciles each ModelDeployment on one worker thread:
//  1. its spec becomes a Tessera model profile (spec.model written inline) and a Tessera
//     deployment named "<namespace>.<name>" with `placedBy: kubernetes`: the control plane's
//     autoscaler decides the count, and the pods, bound through the extender, are the
//     replicas (the plane places none of its own);
//  2. pods are created or deleted until the cluster runs the autoscaler's count (desired +
//     warm): pods with schedulerName tessera-scheduler, the tessera.io/* resources and
//     annotations the extender reads, the version as label and annotation, and an owner
//     reference to the ModelDeployment (deleting it deletes them);
//  3. a version change rolls out as the spec says: HotSwitch keeps the pods and rewrites
//     their tessera.io/version annotation (the node agent switches the weights in place);
//     Canary runs canaryReplicas(count, canaryWeight) pods on the new version and the rest
//     on status.currentVersion, until the weight is 100;
//  4. the status subresource gets replicas, readyReplicas, currentVersion,
//     observedGeneration and the conditions Available, Progressing and Degraded, written
//     with the object's resourceVersion (a 409 Conflict re-reads and retries, bounded).
// In GPU mode dra (ControllerOptions::gpuMode) step 2 books each new replica with the
// engine first (Fleet::bookPod), writes the ResourceClaim "<pod>-gpu" that pins the chosen
// GPUs and shares (owned by the ModelDeployment), then creates the pod with that claim, node
// affinity for the chosen node and no tessera.io/* resources; a failed step undoes the ones
// before it. A pod that goes takes its claim with it. A pod kube-scheduler marks
// Unschedulable (its allocator disagreed with the engine) gets one Warning event
// TesseraClaimUnsatisfied naming the engine's choice and kube-scheduler's message.
// Also in GPU mode dra, a fourth informer follows the claims the claim webhook pinned for pods
// of their own (label tessera.io/pinned=admission, k8s/claim_admission.h): when one goes
// (kube-controller-manager deletes it with its pod, or once the pod finished) the pod's
// booking is freed, unless another pinned claim still names the same pod. At every resync a
// booked pod that neither informer shows is looked up, and its booking freed on a 404 or a
// finished pod (what a takeover would otherwise leave behind).
// Besides: a pod that is deleted or finished frees its replica booking, a pod that turns
// Ready marks its replica loaded, and a node that is cordoned (spec.unschedulable) or
// deleted is cordoned in Tessera (uncordoned when Kubernetes uncordons it). At every resync
// it also deletes placedBy-kubernetes deployments whose ModelDeployment no longer exists and
// frees bookings of their pods that no longer exist (both confirmed by a 404), which is what
// a restart of the controller would otherwise leave behind.
//
// The controller acts only once all three informers have listed; every ModelDeployment is
// reconciled again every `resyncMs` (the autoscaler's count changes without an event).
//
// Threading: start() starts the informers and the worker; stop() ends them. Fleet methods
// are called from the worker thread only.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "k8s/informer.h"
#include "k8s/kube_client.h"

namespace tessera::k8s {

inline constexpr std::string_view kModelDeploymentsPath =
    "/apis/tessera.io/v1alpha1/modeldeployments";
inline constexpr std::string_view kLabelModelDeployment = "tessera.io/modeldeployment";
inline constexpr std::string_view kLabelVersion = "tessera.io/version";
inline constexpr std::string_view kAnnotationVersion = "tessera.io/version";

// What the controller asks of Tessera's control plane (serve: api::ControlPlane, under the
// server's lock; tests: a fake).
class Fleet {
 public:
  struct Deployment {
    int desired = 0;  // the autoscaler's count
    int warm = 0;     // warm replicas on top
    std::string pendingReason;
  };
  virtual ~Fleet() = default;
  virtual Result<void> putModel(const nlohmann::json& profile) = 0;
  virtual Result<void> putDeployment(const nlohmann::json& body) = 0;
  virtual Result<void> deleteDeployment(const std::string& name) = 0;
  virtual std::optional<Deployment> deployment(const std::string& name) = 0;
  // Replica ids are "<namespace>/<pod>", as the extender books pods.
  virtual void replicaReady(const std::string& replicaId) = 0;
  virtual void replicaGone(const std::string& replicaId) = 0;
  virtual void setNodeCordoned(const std::string& node, bool cordoned) = 0;
  // The deployments with placedBy kubernetes, and the replica ids booked for one of them:
  // what the controller checks against the cluster after a restart.
  virtual std::vector<std::string> kubernetesDeployments() = 0;
  virtual std::vector<std::string> replicasOf(const std::string& deployment) = 0;
  // GPU mode dra: books the pod of one replica before it exists (Extender::bookForClaim),
  // answering the choice its ResourceClaim pins; and takes such a booking back when the claim
  // or the pod could not be created.
  virtual Result<nlohmann::json> bookPod(const nlohmann::json& pod) {
    (void)pod;
    return fail(Error::precondition("this control plane does not book pods for DRA claims"));
  }
  virtual void forgetPod(const std::string& replicaId, const std::string& why) {
    (void)replicaId;
    (void)why;
  }
  // Every replica id booked for a pod ("<namespace>/<pod>"): the extender's binds, the
  // controller's and the claim webhook's bookings.
  virtual std::vector<std::string> bookedPods() { return {}; }
};

// A label value made from any text: at most 63 of [A-Za-z0-9-_.] (others become '_'),
// starting and ending alphanumeric.
std::string labelValue(const std::string& s);

// How many of `total` replicas run the new version at `weight` percent: rounded half up, at
// least 1 when the weight is above 0, all at 100.
int canaryReplicas(int total, int weight);

// A ModelDeployment's spec, read and checked.
struct ModelDeploymentSpec {
  std::string ns, name, uid;
  std::int64_t generation = 0;
  std::string tesseraName;                     // "<namespace>.<name>" (shortened when long)
  std::string modelName;                       // the Tessera model profile
  std::optional<nlohmann::json> modelProfile;  // written inline: registered by the controller
  std::string version;
  bool canary = false;  // rollout.strategy Canary (else HotSwitch)
  int canaryWeight = 0;
  int minReplicas = 1;
  nlohmann::json deployment;  // the Tessera deployment body (PUT /api/v1/deployments)
  nlohmann::json pod;         // the pod every replica is made from (no name, no version yet)
};

// Errors name the field ("spec.rollout.canaryWeight: expected a whole number from 0 to 100").
Result<ModelDeploymentSpec> readModelDeployment(
    const nlohmann::json& object, const std::string& schedulerName = "tessera-scheduler");

// The pod of one replica of `spec` at `version`, named `name`.
nlohmann::json podFor(const ModelDeploymentSpec& spec, const std::string& version,
                      const std::string& name);

// How a ModelDeployment's replicas get their GPUs (docs/dra.md, "GPU modes").
enum class GpuMode {
  // Pods ask for tessera.io/* extended resources; kube-scheduler binds them through the
  // extender, the node's device plugin hands over the booked GPUs.
  kDevicePlugin,
  // The controller books each replica with the engine before its pod exists, writes a
  // ResourceClaim "<pod>-gpu" pinning the chosen GPUs and shares (k8s/dra_claims.h), and
  // creates the pod with that claim and node affinity and without tessera.io/* resources:
  // kube-scheduler's DRA allocator confirms the choice, the node's DRA driver prepares it.
  kDra,
};

struct ControllerOptions {
  GpuMode gpuMode = GpuMode::kDevicePlugin;
  int resyncMs = 5000;
  int statusRetries = 5;
  int pageSize = 500;
  int watchTimeoutSeconds = 300;
  int backoffInitialMs = 200;
  int backoffMaxMs = 30'000;
  std::string schedulerName = "tessera-scheduler";
  // Told when one of the collections the controller watches stops answering, and when it
  // answers again (InformerOptions::onHealth; once per change, not per retry).
  std::function<void(bool answering, const std::string& what)> onApiHealth;
};

class Controller {
 public:
  struct Stats {
    int reconciles = 0;
    int podsCreated = 0;
    int podsDeleted = 0;
    int podsSwitched = 0;  // hot switches (version annotation rewritten)
    int statusWrites = 0;
    int statusConflicts = 0;
    int claimsCreated = 0;  // GPU mode dra
    int claimsDeleted = 0;
    int unsatisfiedClaimEvents = 0;
    int pinnedClaimsGone = 0;   // claims the webhook pinned, seen deleted
    int bookingsCollected = 0;  // bookings of pods found gone at a resync (GPU mode dra)
  };

  // Both borrowed; they must outlive the controller.
  Controller(KubeClient& client, Fleet& fleet, ControllerOptions options = {});
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  void start();
  void stop();
  bool synced() const;
  // Reconcile every ModelDeployment now instead of at the next resync.
  void resync();
  Stats stats() const;

 private:
  struct Overlay {  // a write of ours the pod informer has not shown yet
    std::int64_t rv = 0;
    std::optional<nlohmann::json> pod;  // nullopt: deleted
  };
  struct Known {
    std::string tesseraName;
    nlohmann::json applied;  // model profile and deployment body last given to the fleet
  };

  void run();
  void onPod(Informer::Change change, const nlohmann::json& pod);
  void onNode(const nlohmann::json& node, bool deleted);
  void onPinnedClaim(Informer::Change change, const nlohmann::json& claim);
  // Whether a claim the webhook pinned for `replicaId` is still there.
  bool pinnedClaimOf(const std::string& replicaId) const;
  // GPU mode dra: bookings of pods that are gone (a 404) or finished, which no watch showed.
  void collectPodBookings();
  void reconcile(const std::string& key);
  void removeDeployment(const std::string& key);
  // Tessera deployments whose ModelDeployment is gone, and bookings whose pod is gone, from
  // while the controller was not watching (each confirmed by a 404 from the API server).
  void collectGarbage();
  std::vector<nlohmann::json> podsOf(const std::string& ns, const std::string& name);
  void remember(const std::string& key, Overlay write);
  Result<void> createPod(const ModelDeploymentSpec& spec, const std::string& version);
  // GPU mode dra: book, write the claim, create the pod (each undone when a later step fails).
  Result<void> createDraPod(const ModelDeploymentSpec& spec, nlohmann::json pod);
  void deleteClaimOf(const std::string& podKey);
  // GPU mode dra: kube-scheduler could not allocate a pod's claim; a Warning event on the pod
  // says what the engine chose and what kube-scheduler answered (once per pod).
  void reportUnsatisfiedClaim(const std::string& podKey);
  Result<void> deletePod(const nlohmann::json& pod);
  Result<void> switchPod(const nlohmann::json& pod, const std::string& version);
  void writeStatus(const nlohmann::json& md, nlohmann::json status);
  std::string newPodName(const std::string& base);

  KubeClient& client_;
  Fleet& fleet_;
  ControllerOptions options_;
  std::unique_ptr<Informer> mds_, pods_, nodes_;
  std::unique_ptr<Informer> pinnedClaims_;  // GPU mode dra only

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool resyncNow_ = false;
  std::set<std::string> dirty_;  // ModelDeployment keys
  enum class PodNote { kAdded, kReady, kGone, kUnschedulable, kPinnedClaimGone };
  std::vector<std::pair<PodNote, std::string>> podNotes_;  // by replica id, in order
  std::set<std::string> dirtyNodes_;
  std::map<std::string, Overlay> overlay_;  // pod key → our write not seen yet
  // Pod key → the resourceVersion its deletion had, as the watch showed it. A create whose
  // answer comes back after the watch already showed the pod made and deleted must not be
  // remembered as live (it would stand in for the pod forever, and no replacement is made).
  std::map<std::string, std::int64_t> deletedRv_;
  Stats stats_;

  // Worker-only state.
  std::map<std::string, Known> known_;
  std::set<std::string> readySent_, goneSent_;
  std::set<std::string> unsatisfiedReported_;            // pod keys (GPU mode dra)
  std::map<std::string, std::string> unschedulableWhy_;  // pod key -> kube-scheduler's message
  std::map<std::string, bool> nodeCordoned_;             // as last seen in Kubernetes
  std::uint64_t nameCounter_ = 0;
  std::thread worker_;
};

}  // namespace tessera::k8s
