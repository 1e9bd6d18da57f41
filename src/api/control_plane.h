#pragma once
// The control plane's state and operations, behind the HTTP API (api/http_server.h): the
// cluster books (sched::ClusterState), the placement engine, model profiles, the Kubernetes
// extender, a bounded event history and the metrics.
//
// Every mutating operation takes a typed request (api/requests.h), decoded from the API's JSON
// body by the codec (api/json_api.h) before any lock is taken; the plane checks what depends
// on its books (what a path names exists, a heartbeat's GPUs are the node's, a model named by
// name is registered) with the API's error texts, naming the field relative to the body. An
// operation that answers with an object answers with its JSON view, the same view as the reads
// (listNodes, getNode, ...), built from the books while the caller holds the state lock:
// docs/api.md is written in them, and a typed copy of the books would add a step and say
// nothing more. The others (heartbeats, signals, drains, removals, allocations) return typed
// results (api/requests.h), which the codec encodes. A refused operation changes nothing.
//
// Threading: not thread-safe; api::Dispatcher (api/dispatcher.h) owns access from several
// threads. Every mutating operation follows one write order: assume (apply the change to the
// books), persist (commit it to the store, the only I/O, through the store-I/O hook, which lets
// the dispatcher release its state lock meanwhile), then confirm, or forget (undo the change)
// when the store refused, so a refused operation leaves memory and store as they were.

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/metrics.h"
#include "api/requests.h"
#include "common/clock.h"
#include "common/result.h"
#include "config/loaders.h"
#include "k8s/extender.h"
#include "model/gpu_catalog.h"
#include "scale/drain.h"
#include "scale/reconcile.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/profile.h"
#include "store/event_sink.h"
#include "store/state_store.h"
#include "store/write_set.h"

namespace tessera::api {

struct ControlPlaneConfig {
  sched::Profile profile = sched::defaultProfile();
  // Event retention, in memory (GET /api/v1/events) and in the store: at most eventHistory
  // events, none older than eventMaxAgeMs before the newest.
  std::size_t eventHistory = 4096;
  Millis eventMaxAgeMs = 7LL * 24 * 3600 * 1000;
  // Unix time in milliseconds for event times; empty: the system clock. (The books' Clock may
  // be monotonic; the soak benchmark passes its simulated calendar.)
  std::function<Millis()> eventClockMs;
  // A new replica's expected load time when its agent has not said: engine start-up plus
  // its per-GPU weights at this bandwidth (the autoscaler counts loading replicas as
  // capacity arriving then).
  double loadBandwidthMiBps = 2000;
  Millis engineStartMs = 10'000;
  // Engine signals older than this count as missing (HPA semantics).
  Millis signalTtlMs = 60'000;
  // How long a pod bound through the extender keeps pods of the same size but another GPU
  // share off its node while its device plugin has not confirmed it (docs/device-plugin.md).
  Millis allocationGuardTtlMs = 30'000;
};

// An error answered with a JSON body beyond the message (e.g. why a replica does not fit).
struct DetailedError {
  Error error;
  nlohmann::json detail;
};

class ControlPlane {
 public:
  // With a store, every change is committed to it (durably) before it is answered, and the
  // state is first restored from it: nodes, models and replicas exactly as they were booked
  // (placed when they were, so a lapsed reservation stays lapsed; not refused for memory,
  // see sched::ReplicaRestored, a GPU left over-committed is a GpuOverCommitted event), and
  // the recent events `events` kept. Events go to `events` after the documents they describe
  // were committed, best effort: a sink that cannot store one does not fail the operation
  // (tessera_event_sink_errors_total counts it; the event stays in memory and reaches the log
  // callback). Without `events` the history is in memory only, numbered from 1. Both are
  // borrowed.
  static Result<std::unique_ptr<ControlPlane>> create(const model::GpuCatalog& catalog,
                                                      const Clock& clock,
                                                      ControlPlaneConfig config = {},
                                                      store::StateStore* store = nullptr,
                                                      store::EventSink* events = nullptr);

  // Seeds the books from a cluster file (nodes, model profiles, replicas already running);
  // for `tessera serve --cluster`. Errors name the file.
  Result<void> loadCluster(const config::ClusterFile& file, const std::string& source);

  // ---- nodes
  Result<nlohmann::json> registerNode(RegisterNode request);  // 201; 409 if it exists
  Result<HeartbeatAccepted> heartbeat(std::string_view node, Heartbeat request);
  Result<nlohmann::json> setCordoned(std::string_view node, bool cordoned);
  // Cordons the node and drains every replica on it (drain, flush, free); deployments
  // replace them elsewhere at their next sync period.
  Result<NodeDraining> drainNode(std::string_view node);
  Result<Removed> removeNode(std::string_view node, bool force);
  nlohmann::json listNodes() const;
  Result<nlohmann::json> getNode(std::string_view node) const;

  // ---- models
  Result<nlohmann::json> putModel(PutModel request);
  nlohmann::json listModels() const;
  Result<nlohmann::json> getModel(std::string_view name) const;
  // Forgets a model profile; 409 while a deployment names it or a replica of it is placed.
  Result<Removed> deleteModel(std::string_view name);
  std::optional<model::ModelProfile> findModel(std::string_view name) const;

  // ---- replicas
  // Places every request (a requests[] entry expands to `count`). All or nothing: when one
  // does not fit, none is booked and the error's detail explains.
  std::expected<nlohmann::json, DetailedError> placeReplicas(PlaceReplicas request);
  Result<nlohmann::json> replicaLoaded(std::string_view id);
  Result<Removed> removeReplica(std::string_view id);
  nlohmann::json listReplicas() const;
  Result<nlohmann::json> getReplica(std::string_view id) const;
  // Why a request would or would not fit now, with every rejection; books nothing.
  Result<nlohmann::json> explain(PlaceReplicas request);

  // ---- kube-scheduler extender (bind books, so it is persisted here)
  // With `outside` (the dispatcher's writeAround), the booking's store write and the Binding
  // POST run with its locks released; without, through the store-I/O hook. The booking is
  // assumed in the books meanwhile.
  Result<nlohmann::json> extenderBind(const nlohmann::json& args,
                                      const k8s::OutsideLock& outside = {});
  // DRA mode (docs/dra.md): books a ModelDeployment pod before it is created, and takes such a
  // booking back when its claim or pod could not be created (k8s::Extender::bookForClaim).
  // `podExists`: a pod already in the API server whose claim the claim webhook pins
  // (k8s/claim_admission.h); its booking is written onto it now.
  Result<nlohmann::json> bookClaim(const nlohmann::json& pod, const k8s::OutsideLock& outside = {},
                                   bool podExists = false);
  void forgetClaim(const std::string& replicaId, const std::string& why);
  // The replica ids of pods booked through the extender, the controller or the claim webhook.
  std::vector<std::string> bookedPods() const { return {pods_.begin(), pods_.end()}; }
  // The binder the extender's bind posts v1.Bindings through (serve sets the Kubernetes
  // API client's; without one, bind books the pod and posts nothing).
  void setBinder(k8s::Binder binder) { extender_->setBinder(std::move(binder)); }

  // ---- device plugin hand-off (docs/device-plugin.md)
  // The pods bound to this node through the extender, confirmed or not:
  // {node, allocations: [{replica, resource, mode, placedAtMs, confirmed, devices, gpus}]}.
  Result<nlohmann::json> nodeAllocations(std::string_view node) const;
  // The node's device plugin gave a pod's container its GPUs: {replica, devices, gpus}.
  // Marks the allocation confirmed (persisted with the replica) and ends the extender's
  // guard. When `gpus` differ from the booked ones, the plugin handed the booking of a twin
  // (same shape, booked on exactly those GPUs, unconfirmed, or confirmed with exactly these
  // `devices`: kubelet's PodResources showed this pod holds them) to this pod: the two
  // bookings swap GPUs (and devices) so that the books name the GPUs each pod really has;
  // with no such twin it is refused (409). 404: unknown node or replica; 409: the replica is on
  // another node or was not bound through the extender.
  Result<AllocationConfirmed> confirmAllocation(std::string_view node,
                                                const ConfirmAllocation& request);

  // ---- deployments: replicas kept at what the autoscaler decides
  // {name, model, version, minReplicas, maxReplicas, priority, sloTtftMs, placedBy,
  //  autoscaling: {recommender, args: {name: number}, warmReplicas, syncPeriodSeconds,
  //                scaleUpStabilizationSeconds, scaleDownStabilizationSeconds,
  //                scaleDownPolicies: [{type, value, periodSeconds}]}}
  // Creates (201) or updates (200) it; minReplicas are placed at once, and what does not fit
  // waits as pending with its reason. With placedBy "kubernetes" (the ModelDeployment
  // controller's) the plane places and drains nothing itself: the autoscaler's count is what
  // the controller runs as pods, and the pods the extender binds with this deployment's name
  // (tessera.io/deployment) are its replicas; the ones not bound yet count as pending.
  Result<nlohmann::json> putDeployment(PutDeployment request);
  Result<Removed> deleteDeployment(std::string_view name);  // drains every replica
  nlohmann::json listDeployments() const;
  Result<nlohmann::json> getDeployment(std::string_view name) const;
  bool hasDeployment(std::string_view name) const { return deployments_.contains(name); }
  // Engine signals of one replica, as a scraper or the node agent reads them:
  // {waiting, running, kvCacheUsage, gpuUtilization, maxConcurrency, expectedReadyMs}.
  Result<SignalsAccepted> replicaSignals(std::string_view id, const ReportReplicaSignals& request);
  // Deployment-wide signals from the router: {arrivalRatePerSec, meanServiceMs, ttftP99Ms,
  // meanPrefillMs, bufferedRequests}.
  Result<SignalsAccepted> deploymentSignals(std::string_view name,
                                            const ReportDeploymentSignals& request);

  // ---- events, metrics, upkeep
  nlohmann::json events(std::int64_t after, std::size_t limit) const;
  std::string metricsText() const;
  // Lapses expired reservations, runs each deployment's autoscaler when its sync period is
  // due, places or drains replicas accordingly and moves drains along. The server calls it
  // every second.
  void tick();

  // Called with every event as it is recorded ({seq, timeMs, type, subject, message}); the
  // server logs them.
  void setEventSink(std::function<void(const nlohmann::json&)> sink) { sink_ = std::move(sink); }
  // Runs every store I/O of this plane (commits, compaction, a booking's write when no
  // OutsideLock is given); empty: in place. api::Dispatcher sets it to release its state lock
  // around the I/O when the caller is its writer.
  void setStoreIo(k8s::OutsideLock io) { storeIo_ = std::move(io); }

  // The 404 an operation on this object answers before it looks at its request (the codec
  // answers it too for a body that does not decode), or nullopt when it exists.
  std::optional<Error> unknownNode(std::string_view node) const;
  std::optional<Error> unknownReplica(std::string_view id) const;
  std::optional<Error> unknownDeployment(std::string_view name) const;
  // Immutable: the codec reads it with no lock held.
  const model::GpuCatalog& catalog() const { return catalog_; }

  k8s::Extender& extender() { return *extender_; }
  const sched::ClusterState& state() const { return state_; }

  // Instruments the HTTP layer feeds.
  CounterFamily httpRequests{"tessera_http_requests_total",
                             "HTTP requests answered, by route and status code."};
  HistogramFamily extenderLatency{"tessera_extender_request_duration_seconds",
                                  "Time to answer a kube-scheduler extender call, by verb.",
                                  latencyBuckets()};
  CounterFamily claimAdmissions{
      "tessera_claim_admissions_total",
      "Claim webhook reviews answered, by outcome: pinned, not_pinned (allowed as they were, "
      "with a warning), refused (made again by kube-controller-manager), passed (not "
      "Tessera's)."};

 private:
  ControlPlane(const model::GpuCatalog& catalog, const Clock& clock, ControlPlaneConfig config,
               sched::PluginSet plugins, store::StateStore* store, store::EventSink* events);
  Result<void> restore();
  // The extender's BookingStore: a pod's booking is stored before its Binding is posted (the
  // write runs outside the dispatcher's locks), and removed again when the Binding failed.
  k8s::BookingWrite prepareBooking(const std::string& id, const std::string& resource,
                                   bool podExists);
  void forgetBooking(const std::string& id, const std::string& why);
  Millis eventTimeMs() const;
  static Error storeRefused(const Error& e);
  // Persists `batch` (when there is a store and the batch has documents; the store I/O runs
  // through storeIo_), then appends the event to the event sink (best effort: sinkFailed())
  // and adds it to the history. On error nothing was written and no event recorded, and the
  // caller forgets what it assumed.
  Result<void> commit(store::WriteSet batch, std::string type, std::string subject,
                      std::string message);
  struct EventText {
    std::string type, subject, message;
  };
  // As above, with several events in the one batch (in this order).
  Result<void> commit(store::WriteSet batch, std::vector<EventText> events);
  void storeIo(const std::function<void()>& io) const { storeIo_ ? storeIo_(io) : io(); }
  // Seqs for `count` events, reserved before the I/O (which may run with the dispatcher's lock
  // released): what an event gets when the sink fails, and the least the sink may give it.
  std::int64_t reserveSeqs(std::size_t count);
  // Gives back reserved seqs no event took, when nothing was reserved after them.
  void unreserveSeqs(std::int64_t first, std::size_t count);
  // The event's text as the sink stores it.
  static std::string eventJson(const std::string& type, const std::string& subject,
                               const std::string& message);
  // Counts an append the sink refused (the event is kept in memory and logged).
  void sinkFailed(const Error& e);
  // Compacts the sink to what memory keeps, every 1024 stored events.
  void compactEvents();
  k8s::OutsideLock storeIo_;
  void remember(std::int64_t seq, Millis timeMs, std::string type, std::string subject,
                std::string message);
  std::int64_t rankOf(std::string_view node) const;
  Result<model::NodeSpec> parseNode(const nlohmann::json& body) const;  // a stored node
  nlohmann::json nodeJson(sched::NodeId id) const;
  nlohmann::json replicaJson(sched::ReplicaId id) const;

  struct Deployment {
    std::string name, model, version;
    int minReplicas = 1;
    int maxReplicas = 10;
    int priority = 0;
    std::optional<double> sloTtftMs;
    scale::AutoscalerConfig config;
    DeploymentSpec spec;  // as given: what the store keeps
    std::unique_ptr<scale::Autoscaler> autoscaler;
    bool placedByKubernetes = false;  // placedBy: kubernetes (pods are the replicas)
    int desired = 0;
    int warm = 0;
    int nextIndex = 0;
    int pending = 0;
    std::string pendingReason;  // the engine's summary
    std::string pendingFilter;  // the filter that refused most: a bounded metric label
    Millis lastEvalMs = std::numeric_limits<Millis>::min() / 2;
    std::string lastReason;
    // Router-side signals.
    std::optional<double> arrivalRatePerSec, meanServiceMs, ttftP99Ms, meanPrefillMs, prefillP99Ms,
        bufferedRequests;
    Millis signalsAtMs = -1;
  };
  // The deployment `spec` describes, its model registered.
  Result<std::unique_ptr<Deployment>> makeDeployment(DeploymentSpec spec) const;
  Result<std::unique_ptr<Deployment>> parseDeployment(const nlohmann::json& body) const;  // stored
  // Takes over the deployment's placed replicas (numbering); returns how many serve.
  int adopt(Deployment& d) const;
  void reconcile(Deployment& d, Millis now);
  // The share rule for a deployment's new replicas (tessera's recommender, an SLO, a model
  // that may share a card), or nullopt: the model profile's compute.
  std::optional<scale::ShareRule> shareRuleOf(const Deployment& d) const;
  // `shareMilli`: book this much compute per new replica, on a shared GPU (the share rule of
  // scale/reconcile.h); nullopt: the model profile's figure.
  Result<void> addReplicas(Deployment& d, int count, Millis now,
                           std::optional<std::int32_t> shareMilli = std::nullopt);
  void advanceDrains(Millis now);
  scale::DeploymentSignals signalsOf(const Deployment& d, Millis now) const;
  nlohmann::json deploymentJson(const Deployment& d) const;
  Result<void> restoreDeployments(const std::vector<store::Document>& docs);

  model::GpuCatalog catalog_;
  const Clock& clock_;
  ControlPlaneConfig config_;
  store::StateStore* store_;
  sched::ClusterState state_;
  sched::PlacementEngine engine_;
  std::unique_ptr<k8s::Extender> extender_;
  std::map<std::string, model::NodeSpec, std::less<>> nodeSpecs_;  // as registered
  std::map<std::string, model::ModelProfile, std::less<>> models_;
  std::map<std::string, std::unique_ptr<Deployment>, std::less<>> deployments_;
  // Per replica: the last engine signals and, while it drains, its lifecycle.
  struct ReplicaRuntime {
    scale::ReplicaSignals signals;
    Millis signalsAtMs = -1;
    std::optional<Millis> expectedReadyMs;  // from the agent
    std::unique_ptr<scale::ReplicaLifecycle> drain;
  };
  std::map<std::string, ReplicaRuntime, std::less<>> runtime_;
  // Pods bound through the extender, by replica id: what their device plugin reported.
  struct PodAllocation {
    std::string resource;  // the extended resource the pod asked for
    bool confirmed = false;
    std::vector<std::string> devices;  // kubelet's device IDs, once confirmed
  };
  std::map<std::string, PodAllocation, std::less<>> podAllocations_;
  // Replicas that are pods bound through the extender ("namespace/name").
  std::set<std::string, std::less<>> pods_;
  // The replica's store document, with its pod allocation when it has one and, once it is in
  // the books, when it was placed.
  nlohmann::json replicaDoc(const sched::Placement& placement, bool loaded) const;
  // Unix time minus the books' clock, taken once: stored placement times convert with it, so
  // that the replicas of one run keep their exact order and spacing.
  Millis unixOffsetMs_ = 0;

  struct EventRecord {
    std::int64_t seq = 0;
    Millis timeMs = 0;
    std::string type, subject, message;
  };
  std::deque<EventRecord> events_;
  std::function<void(const nlohmann::json&)> sink_;
  std::int64_t nextSeq_ = 1;  // the next seq to reserve
  std::int64_t lastSeq_ = 0;  // the highest seq recorded (GET /events' lastSeq)
  store::EventSink* eventLog_;
  std::size_t appendedSinceCompaction_ = 0;
  CounterFamily eventSinkErrors_{
      "tessera_event_sink_errors_total",
      "Events the event sink could not store (they stay in memory and reach the log)."};

  CounterFamily placements_{"tessera_placements_total",
                            "Placement decisions taken through the API, by result."};
  HistogramFamily decisionLatency_{"tessera_scheduling_duration_seconds",
                                   "Time the placement engine took per decision.",
                                   latencyBuckets()};
  // For the dashboards and alerts in deploy/ (docs/operations.md): when each node's agent last
  // reported (registration, heartbeat or the server's restore), reservations that lapsed
  // without telemetry confirming them, and how long replicas took from placement to loaded.
  std::map<std::string, Millis, std::less<>> lastHeartbeatMs_;
  // Each node's last reported device pool (heartbeat "devicePool"): live state, not stored.
  std::map<std::string, nlohmann::json, std::less<>> devicePools_;
  CounterFamily reservationsExpired_{
      "tessera_reservations_expired_total",
      "Reservations that lapsed (TTL) before telemetry showed their replica's memory, by "
      "whether their GPUs reported at all (telemetry=none) or not this replica "
      "(telemetry=unattributed)."};
  // Events the control plane applies to undo its own step (a rollback, a replica it just
  // placed): the books guarantee them, so a refusal means they drifted. undo() never drops
  // the answer: it counts the refusal here and reports it as an InternalError event.
  CounterFamily internalErrors_{"tessera_internal_errors_total",
                                "Bookkeeping steps the books refused although the control "
                                "plane's own state guaranteed them, by where (0 when healthy)."};
  void undo(const sched::Event& event, std::string_view where);
  // Puts back a replica as a snapshot of its record had it: placed, and loaded if it was.
  void restore(const sched::ReplicaRecord& snapshot, std::string_view where);
  // Records an event that changes no document (to the event sink, best effort: one it cannot
  // store is counted and stays in memory and the log), never silently dropped.
  void note(std::string type, std::string subject, std::string message);
  void alert(std::string type, std::string subject, std::string message);
  HistogramFamily loadDuration_{"tessera_replica_load_duration_seconds",
                                "Time from a replica's placement to its agent reporting it loaded.",
                                {1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800}};
};

}  // namespace tessera::api
