#include "k8s/controller.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>

#include "k8s/claim_admission.h"
#include "k8s/dra_claims.h"
#include "k8s/internal/controller_objects.h"
#include "k8s/pod.h"

namespace tessera::k8s {
namespace {

using controller_internal::annotationOf;
using controller_internal::controllerPodPath;
using controller_internal::finished;
using controller_internal::nowRfc3339;
using controller_internal::rvNumber;
using controller_internal::terminating;
using nlohmann::json;

std::string labelOf(const json& object, std::string_view key) {
  const auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  const auto l = m->find("labels");
  if (l == m->end() || !l->is_object()) return "";
  const auto v = l->find(std::string(key));
  return v != l->end() && v->is_string() ? v->get<std::string>() : "";
}

// The pod condition of `type`, or null.
const json* podCondition(const json& pod, std::string_view type) {
  const auto s = pod.find("status");
  if (s == pod.end() || !s->is_object()) return nullptr;
  const auto c = s->find("conditions");
  if (c == s->end() || !c->is_array()) return nullptr;
  for (const json& cond : *c) {
    if (cond.is_object() && cond.value("type", "") == type) return &cond;
  }
  return nullptr;
}

bool podReady(const json& pod) {
  const json* c = podCondition(pod, "Ready");
  return c != nullptr && c->value("status", "") == "True";
}

bool podScheduled(const json& pod) {
  const auto s = pod.find("spec");
  return s != pod.end() && s->is_object() && s->contains("nodeName") &&
         (*s)["nodeName"].is_string() && !(*s)["nodeName"].get<std::string>().empty();
}

// kube-scheduler's message when it marked the pod unschedulable.
std::optional<std::string> unschedulable(const json& pod) {
  const auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return std::nullopt;
  for (const json& c : status->value("conditions", json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
        c.value("reason", "") == "Unschedulable") {
      return c.value("message", std::string("no message"));
    }
  }
  return std::nullopt;
}

std::string mdPath(const std::string& ns, const std::string& name) {
  return "/apis/tessera.io/v1alpha1/namespaces/" + ns + "/modeldeployments/" + name;
}

}  // namespace

// ---- the controller ------------------------------------------------------------------------

Controller::Controller(KubeClient& client, Fleet& fleet, ControllerOptions options)
    : client_(client), fleet_(fleet), options_(std::move(options)) {
  auto informerOptions = [this](std::string path) {
    InformerOptions o;
    o.path = std::move(path);
    o.pageSize = options_.pageSize;
    o.watchTimeoutSeconds = options_.watchTimeoutSeconds;
    o.backoffInitialMs = options_.backoffInitialMs;
    o.backoffMaxMs = options_.backoffMaxMs;
    o.onHealth = options_.onApiHealth;
    return o;
  };
  mds_ = std::make_unique<Informer>(client_, informerOptions(std::string(kModelDeploymentsPath)),
                                    [this](Informer::Change, const json& md, const json*) {
                                      {
                                        std::lock_guard lock(mu_);
                                        dirty_.insert(objectKey(md));
                                      }
                                      wake_.notify_all();
                                    });
  InformerOptions podOptions = informerOptions("/api/v1/pods");
  podOptions.fieldSelector = "spec.schedulerName=" + options_.schedulerName;
  pods_ = std::make_unique<Informer>(
      client_, podOptions,
      [this](Informer::Change change, const json& pod, const json*) { onPod(change, pod); });
  nodes_ =
      std::make_unique<Informer>(client_, informerOptions("/api/v1/nodes"),
                                 [this](Informer::Change change, const json& node, const json*) {
                                   onNode(node, change == Informer::Change::kDeleted);
                                 });
  if (options_.gpuMode == GpuMode::kDra) {
    InformerOptions claimOptions = informerOptions("/apis/resource.k8s.io/v1/resourceclaims");
    claimOptions.labelSelector = std::string(kLabelPinned) + "=" + std::string(kPinnedByAdmission);
    pinnedClaims_ = std::make_unique<Informer>(
        client_, claimOptions, [this](Informer::Change change, const json& claim, const json*) {
          onPinnedClaim(change, claim);
        });
  }
}

Controller::~Controller() {
  stop();
}

void Controller::start() {
  if (worker_.joinable()) return;
  mds_->start();
  pods_->start();
  nodes_->start();
  if (pinnedClaims_) pinnedClaims_->start();
  worker_ = std::thread([this] { run(); });
}

void Controller::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
  mds_->stop();
  pods_->stop();
  nodes_->stop();
  if (pinnedClaims_) pinnedClaims_->stop();
}

bool Controller::synced() const {
  return mds_->hasSynced() && pods_->hasSynced() && nodes_->hasSynced() &&
         (!pinnedClaims_ || pinnedClaims_->hasSynced());
}

void Controller::resync() {
  {
    std::lock_guard lock(mu_);
    resyncNow_ = true;
  }
  wake_.notify_all();
}

Controller::Stats Controller::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Controller::onPod(Informer::Change change, const json& pod) {
  const std::string key = objectKey(pod);
  const std::string owner = labelOf(pod, kLabelModelDeployment);
  const std::string ns = metadataText(pod, "namespace");
  {
    std::lock_guard lock(mu_);
    if (const auto it = overlay_.find(key); it != overlay_.end()) {
      if (change == Informer::Change::kDeleted || rvNumber(pod) >= it->second.rv) {
        overlay_.erase(it);
      }
    }
    if (change == Informer::Change::kDeleted) {
      if (deletedRv_.size() >= 4096) deletedRv_.erase(deletedRv_.begin());  // names are random
      deletedRv_[key] = rvNumber(pod);
    } else if (change == Informer::Change::kAdded) {
      deletedRv_.erase(key);  // the name is in use again
    }
    if (change == Informer::Change::kDeleted || terminating(pod) || finished(pod)) {
      podNotes_.emplace_back(PodNote::kGone, key);
    } else {
      if (change == Informer::Change::kAdded) podNotes_.emplace_back(PodNote::kAdded, key);
      if (podReady(pod)) podNotes_.emplace_back(PodNote::kReady, key);
      if (options_.gpuMode == GpuMode::kDra) {
        if (auto why = unschedulable(pod); why && hasTesseraClaim(pod)) {
          podNotes_.emplace_back(PodNote::kUnschedulable, key);
          unschedulableWhy_[key] = *why;
        }
      }
    }
    if (!owner.empty()) dirty_.insert(ns + "/" + owner);
  }
  wake_.notify_all();
}

void Controller::onNode(const json& node, bool deleted) {
  {
    std::lock_guard lock(mu_);
    dirtyNodes_.insert(metadataText(node, "name") + (deleted ? "\n" : ""));
  }
  wake_.notify_all();
}

void Controller::run() {
  auto nextResync = std::chrono::steady_clock::now();
  for (;;) {
    std::set<std::string> keys, nodes;
    std::vector<std::pair<PodNote, std::string>> notes;
    bool collect = false;
    {
      std::unique_lock lock(mu_);
      wake_.wait_until(
          lock,
          std::min(nextResync, std::chrono::steady_clock::now() + std::chrono::milliseconds(100)),
          [this] {
            return stopping_ || resyncNow_ || !dirty_.empty() || !podNotes_.empty() ||
                   !dirtyNodes_.empty();
          });
      if (stopping_) return;
      if (!synced()) {  // act on complete copies only; the work waits
        wake_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stopping_; });
        continue;
      }
      if (resyncNow_ || std::chrono::steady_clock::now() >= nextResync) {
        resyncNow_ = false;
        nextResync =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.resyncMs);
        for (const json& md : mds_->list()) dirty_.insert(objectKey(md));
        for (const auto& [key, k] : known_) dirty_.insert(key);
        collect = true;
      }
      keys.swap(dirty_);
      nodes.swap(dirtyNodes_);
      notes.swap(podNotes_);
    }
    // Pods: bookings follow them.
    for (const auto& [note, id] : notes) {
      if (note == PodNote::kAdded) {  // a new pod (possibly under an old name)
        goneSent_.erase(id);
        readySent_.erase(id);
      } else if (note == PodNote::kUnschedulable) {
        reportUnsatisfiedClaim(id);
      } else if (note == PodNote::kPinnedClaimGone) {
        // A pod made again under the same name has a new claim naming it: that one holds the
        // booking now.
        if (!pinnedClaimOf(id)) {
          fleet_.replicaGone(id);
          std::lock_guard lock(mu_);
          ++stats_.pinnedClaimsGone;
        }
      } else if (note == PodNote::kReady) {
        if (!goneSent_.contains(id) && readySent_.insert(id).second) fleet_.replicaReady(id);
      } else {
        if (goneSent_.insert(id).second) {
          fleet_.replicaGone(id);
          // GPU mode dra: the pod's claim goes with it (the booking is freed above).
          if (options_.gpuMode == GpuMode::kDra) deleteClaimOf(id);
        }
        readySent_.erase(id);
        if (!pods_->get(id)) {  // deleted for good: forget it
          goneSent_.erase(id);
          unsatisfiedReported_.erase(id);
        }
      }
    }
    // Nodes: Kubernetes cordons and deletions become Tessera cordons.
    for (std::string name : nodes) {
      const bool deleted = !name.empty() && name.back() == '\n';
      if (deleted) name.pop_back();
      const auto node = nodes_->get(name);
      bool cordoned = true;
      if (!deleted && node) {
        const json spec = node->value("spec", json::object());
        cordoned = spec.value("unschedulable", false);
      }
      const auto last = nodeCordoned_.find(name);
      const bool changed = last == nodeCordoned_.end() ? cordoned : last->second != cordoned;
      nodeCordoned_[name] = cordoned;
      if (deleted || !node) nodeCordoned_.erase(name);
      if (changed) fleet_.setNodeCordoned(name, cordoned);
    }
    for (const std::string& key : keys) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        ++stats_.reconciles;
      }
      reconcile(key);
    }
    if (collect) {
      collectGarbage();
      if (pinnedClaims_) collectPodBookings();
    }
  }
}

void Controller::collectGarbage() {
  std::set<std::string> wanted;
  for (const json& md : mds_->list()) {
    if (auto spec = readModelDeployment(md, options_.schedulerName))
      wanted.insert(spec->tesseraName);
  }
  for (const std::string& name : fleet_.kubernetesDeployments()) {
    if (!wanted.contains(name)) {
      // "<namespace>.<name>": namespaces have no dots. A shortened name cannot be looked up.
      const auto dot = name.find('.');
      if (dot == std::string::npos) continue;
      auto res = client_.request("GET", mdPath(name.substr(0, dot), name.substr(dot + 1)));
      if (res && res->status == 404) {
        (void)fleet_.deleteDeployment(name);
        known_.erase(name.substr(0, dot) + "/" + name.substr(dot + 1));
      }
      continue;
    }
    for (const std::string& id : fleet_.replicasOf(name)) {
      if (pods_->get(id) || goneSent_.contains(id)) continue;
      {
        std::lock_guard lock(mu_);
        if (overlay_.contains(id)) continue;
      }
      const auto slash = id.find('/');
      if (slash == std::string::npos) continue;
      auto res =
          client_.request("GET", controllerPodPath(id.substr(0, slash), id.substr(slash + 1)));
      if (res && res->status == 404) {
        fleet_.replicaGone(id);
        if (options_.gpuMode == GpuMode::kDra) deleteClaimOf(id);
      }
    }
  }
}

std::vector<json> Controller::podsOf(const std::string& ns, const std::string& name) {
  std::map<std::string, json> pods;
  for (const json& pod : pods_->list()) {
    if (metadataText(pod, "namespace") == ns &&
        labelOf(pod, kLabelModelDeployment) == labelValue(name)) {
      pods[objectKey(pod)] = pod;
    }
  }
  // Our writes the watch has not shown yet.
  std::lock_guard lock(mu_);
  for (const auto& [key, o] : overlay_) {
    if (!o.pod) {
      pods.erase(key);
    } else if (metadataText(*o.pod, "namespace") == ns &&
               labelOf(*o.pod, kLabelModelDeployment) == labelValue(name)) {
      pods[key] = *o.pod;
    }
  }
  std::vector<json> out;
  for (auto& [k, v] : pods) out.push_back(std::move(v));
  return out;
}

std::string Controller::newPodName(const std::string& base) {
  static const char* alphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::uint64_t n =
      std::hash<std::string>{}(base + std::to_string(++nameCounter_)) ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::string name = base.substr(0, 57) + "-";
  for (int i = 0; i < 5; ++i) {
    name += alphabet[n % 27];
    n /= 27;
  }
  return name;
}

void Controller::remember(const std::string& key, Overlay write) {
  // The watch may have shown this write (or a later change) already: then the informer's
  // copy is current. The informer updates its copy before calling onPod, which takes mu_, so
  // checking under mu_ cannot miss the erasing event.
  std::lock_guard lock(mu_);
  const auto seen = pods_->get(key);
  if (write.pod ? (seen && rvNumber(*seen) >= write.rv) : !seen) return;
  // Not seen because the watch showed it made and already deleted: nothing to remember.
  if (const auto gone = deletedRv_.find(key);
      write.pod && !seen && gone != deletedRv_.end() && gone->second >= write.rv) {
    return;
  }
  overlay_[key] = std::move(write);
}

Result<void> Controller::createPod(const ModelDeploymentSpec& spec, const std::string& version) {
  const json pod = podFor(spec, version, newPodName(spec.name));
  if (options_.gpuMode == GpuMode::kDra) return createDraPod(spec, pod);
  auto res = client_.request("POST", controllerPodPath(spec.ns), pod.dump());
  if (!res) return fail(res.error());
  if (res->status != 201 && res->status != 200) {
    return fail(Error::precondition("creating a pod of " + spec.ns + "/" + spec.name + ": " +
                                    describeFailure(*res)));
  }
  const json made = json::parse(res->body, nullptr, false);
  if (!made.is_object()) return {};
  remember(objectKey(made), Overlay{rvNumber(made), made});
  std::lock_guard lock(mu_);
  ++stats_.podsCreated;
  return {};
}

Result<void> Controller::deletePod(const json& pod) {
  const std::string ns = metadataText(pod, "namespace"), name = metadataText(pod, "name");
  auto res = client_.request("DELETE", controllerPodPath(ns, name));
  if (!res) return fail(res.error());
  if (res->status != 200 && res->status != 202 && res->status != 404) {
    return fail(
        Error::precondition("deleting pod " + ns + "/" + name + ": " + describeFailure(*res)));
  }
  const json gone = json::parse(res->body, nullptr, false);
  remember(ns + "/" + name, Overlay{gone.is_object() ? rvNumber(gone) : 0, std::nullopt});
  std::lock_guard lock(mu_);
  ++stats_.podsDeleted;
  return {};
}

Result<void> Controller::switchPod(const json& pod, const std::string& version) {
  json next = pod;
  next["metadata"]["annotations"][std::string(kAnnotationVersion)] = version;
  next["metadata"]["labels"][std::string(kLabelVersion)] = labelValue(version);
  const std::string ns = metadataText(pod, "namespace"), name = metadataText(pod, "name");
  auto res = client_.request("PUT", controllerPodPath(ns, name), next.dump());
  if (!res) return fail(res.error());
  if (res->status != 200) {
    return fail(Error::precondition("switching pod " + ns + "/" + name + " to " + version + ": " +
                                    describeFailure(*res)));
  }
  const json made = json::parse(res->body, nullptr, false);
  if (made.is_object()) remember(ns + "/" + name, Overlay{rvNumber(made), made});
  std::lock_guard lock(mu_);
  ++stats_.podsSwitched;
  return {};
}

// Deletions here are best effort by design: the controller is level-triggered, so whatever a
// failed delete leaves (a Tessera deployment, a pod) is seen and deleted again on the next
// reconcile, and Kubernetes' garbage collector removes owned pods in any case.
void Controller::removeDeployment(const std::string& key) {
  const auto slash = key.find('/');
  const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  if (const auto k = known_.find(key); k != known_.end()) {
    (void)fleet_.deleteDeployment(k->second.tesseraName);
    known_.erase(k);
  }
  // The owner references let Kubernetes' garbage collector do this too; the controller does
  // not wait for it.
  for (const json& pod : podsOf(ns, name)) {
    if (!terminating(pod)) (void)deletePod(pod);
  }
}

void Controller::reconcile(const std::string& key) {
  const auto md = mds_->get(key);
  if (!md) return removeDeployment(key);
  if (terminating(*md)) return;  // the garbage collector deletes its pods
  const json oldStatus = md->value("status", json::object());

  json conditions = json::array();
  auto condition = [&](const std::string& type, bool status, const std::string& reason,
                       const std::string& message) {
    std::string since = nowRfc3339();
    if (const auto c = oldStatus.find("conditions"); c != oldStatus.end() && c->is_array()) {
      for (const json& old : *c) {
        if (old.is_object() && old.value("type", "") == type &&
            old.value("status", "") == (status ? "True" : "False")) {
          since = old.value("lastTransitionTime", since);
        }
      }
    }
    conditions.push_back({{"type", type},
                          {"status", status ? "True" : "False"},
                          {"reason", reason},
                          {"message", message},
                          {"lastTransitionTime", since}});
  };
  auto generation = [&] {
    const json meta = md->value("metadata", json::object());
    return meta.value("generation", std::int64_t{0});
  };
  auto refuse = [&](const std::string& reason, const std::string& message) {
    json status = oldStatus;
    status["observedGeneration"] = generation();
    conditions = json::array();
    condition("Available", false, reason, message);
    condition("Progressing", false, reason, message);
    condition("Degraded", true, reason, message);
    status["conditions"] = conditions;
    writeStatus(*md, status);
  };

  auto spec = readModelDeployment(*md, options_.schedulerName);
  if (!spec) return refuse("InvalidSpec", spec.error().message);

  // 1. The fleet: model profile and deployment.
  const json applied{{"model", spec->modelProfile ? *spec->modelProfile : json()},
                     {"deployment", spec->deployment}};
  Known& known = known_[key];
  if (!known.tesseraName.empty() && known.tesseraName != spec->tesseraName) {
    (void)fleet_.deleteDeployment(known.tesseraName);
    known.applied = json();
  }
  known.tesseraName = spec->tesseraName;
  if (known.applied != applied) {
    if (spec->modelProfile) {
      if (auto put = fleet_.putModel(*spec->modelProfile); !put) {
        return refuse("ModelRejected", put.error().message);
      }
    }
    if (auto put = fleet_.putDeployment(spec->deployment); !put) {
      return refuse("DeploymentRejected", put.error().message);
    }
    known.applied = applied;
  }
  const auto dep = fleet_.deployment(spec->tesseraName);
  if (!dep) return refuse("DeploymentMissing", "Tessera has no deployment " + spec->tesseraName);
  const int target = std::max(0, dep->desired + dep->warm);

  // 2. Pods.
  std::vector<json> live;
  for (json& pod : podsOf(spec->ns, spec->name)) {
    if (terminating(pod)) continue;
    if (finished(pod)) {
      (void)deletePod(pod);  // replaced below
      continue;
    }
    live.push_back(std::move(pod));
  }
  const std::string newV = spec->version;
  std::string curV = oldStatus.value("currentVersion", "");
  if (curV.empty() || (!spec->canary && curV != newV && live.empty())) curV = newV;
  const bool rollingCanary = spec->canary && curV != newV;
  std::string rolloutError;
  if (!rollingCanary && curV != newV) {
    // Hot switch: the pods stay, their version annotation changes.
    for (json& pod : live) {
      if (annotationOf(pod, kAnnotationVersion) == newV) continue;
      if (auto done = switchPod(pod, newV); !done) {
        rolloutError = done.error().message;
        continue;
      }
      pod["metadata"]["annotations"][std::string(kAnnotationVersion)] = newV;
    }
  }
  const int wantNew = rollingCanary ? canaryReplicas(target, spec->canaryWeight) : target;
  const int wantOld = target - wantNew;
  std::vector<json> newPods, oldPods, stray;
  for (json& pod : live) {
    const std::string v = annotationOf(pod, kAnnotationVersion);
    if (v == newV) {
      newPods.push_back(std::move(pod));
    } else if (rollingCanary && v == curV) {
      oldPods.push_back(std::move(pod));
    } else if (spec->canary) {
      stray.push_back(std::move(pod));
    }
    // A hot switch that failed leaves the pod as it is until the next pass.
  }
  std::string podError;
  auto converge = [&](std::vector<json>& pods, int want, const std::string& version) {
    int have = static_cast<int>(pods.size());
    for (; have < want; ++have) {
      if (auto made = createPod(*spec, version); !made) {
        podError = made.error().message;
        break;
      }
    }
    if (have <= want) return;
    // Fewest losses first: pods not scheduled yet, then not ready, then the newest.
    std::sort(pods.begin(), pods.end(), [](const json& a, const json& b) {
      if (podScheduled(a) != podScheduled(b)) return !podScheduled(a);
      if (podReady(a) != podReady(b)) return !podReady(a);
      return metadataText(a, "creationTimestamp") != metadataText(b, "creationTimestamp")
                 ? metadataText(a, "creationTimestamp") > metadataText(b, "creationTimestamp")
                 : metadataText(a, "name") > metadataText(b, "name");
    });
    for (int i = 0; i < have - want; ++i) {
      if (auto gone = deletePod(pods[static_cast<std::size_t>(i)]); !gone) {
        podError = gone.error().message;
      }
    }
    pods.resize(static_cast<std::size_t>(std::max(want, 0)));
  };
  for (const json& pod : stray) (void)deletePod(pod);
  converge(newPods, wantNew, newV);
  if (rollingCanary) converge(oldPods, wantOld, curV);

  // 3. Status, from what the cluster shows (pods created just now count as not ready).
  int replicas = 0, ready = 0, readyNew = 0, onNew = 0;
  std::string unschedulable;
  int pendingPods = 0;
  for (const json& pod : podsOf(spec->ns, spec->name)) {
    if (terminating(pod) || finished(pod)) continue;
    ++replicas;
    const bool isNew = annotationOf(pod, kAnnotationVersion) == newV;
    onNew += isNew ? 1 : 0;
    if (podReady(pod)) {
      ++ready;
      readyNew += isNew ? 1 : 0;
    }
    if (const json* c = podCondition(pod, "PodScheduled");
        c != nullptr && c->value("status", "") == "False") {
      ++pendingPods;
      if (unschedulable.empty()) unschedulable = c->value("message", c->value("reason", ""));
    }
  }
  const bool rolledOut =
      (!spec->canary || spec->canaryWeight >= 100 || curV == newV) && onNew == replicas;
  json status = oldStatus;
  status["replicas"] = replicas;
  status["readyReplicas"] = ready;
  status["currentVersion"] = rolledOut ? newV : curV;
  status["observedGeneration"] = generation();
  const int minAvailable = std::min(target, std::max(1, spec->minReplicas));
  condition("Available", ready >= minAvailable,
            ready >= minAvailable ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
            std::to_string(ready) + " of " + std::to_string(target) + " replicas ready");
  if (!rolledOut) {
    condition("Progressing", true, spec->canary ? "Canary" : "HotSwitch",
              std::to_string(onNew) + " of " + std::to_string(replicas) + " replicas on " + newV +
                  (spec->canary ? " (canaryWeight " + std::to_string(spec->canaryWeight) +
                                      "), the rest on " + curV
                                : ""));
  } else if (replicas != target) {
    condition("Progressing", true, "Scaling",
              std::to_string(replicas) + " of " + std::to_string(target) + " replicas");
  } else if (ready < replicas) {
    condition("Progressing", true, "WaitingForReady",
              std::to_string(ready) + " of " + std::to_string(replicas) + " replicas ready");
  } else {
    condition("Progressing", false, "Complete", std::to_string(replicas) + " replicas on " + newV);
  }
  if (pendingPods > 0) {
    condition("Degraded", true, "Unschedulable",
              std::to_string(pendingPods) + " pods cannot be placed: " +
                  (unschedulable.empty() ? dep->pendingReason : unschedulable));
  } else if (!podError.empty() || !rolloutError.empty()) {
    condition("Degraded", true, "PodWriteFailed", podError.empty() ? rolloutError : podError);
  } else {
    condition("Degraded", false, "AsExpected", "");
  }
  status["conditions"] = conditions;
  writeStatus(*md, std::move(status));
}

void Controller::writeStatus(const json& md, json status) {
  json current = md;
  for (int attempt = 0; attempt <= options_.statusRetries; ++attempt) {
    if (current.value("status", json::object()) == status) return;
    json next = current;
    next["status"] = status;
    const std::string ns = metadataText(current, "namespace"), name = metadataText(current, "name");
    auto res = client_.request("PUT", mdPath(ns, name) + "/status", next.dump());
    if (!res) return;  // the next pass tries again
    if (res->status == 200) {
      std::lock_guard lock(mu_);
      ++stats_.statusWrites;
      return;
    }
    if (res->status != 409) return;
    {
      std::lock_guard lock(mu_);
      ++stats_.statusConflicts;
    }
    // Someone else wrote it: read it again and put the same status on the fresh copy.
    auto fresh = client_.request("GET", mdPath(ns, name));
    if (!fresh || fresh->status != 200) return;
    current = json::parse(fresh->body, nullptr, false);
    if (!current.is_object()) return;
  }
}

}  // namespace tessera::k8s
