#pragma once
// The serving simulation (docs/serving-simulator.md): a request trace replayed in virtual time
// against one deployment of a model on a GPU fleet, with a policy deciding the replica count.
//
// The fleet is a sched::ClusterState fed by events, and every new replica is placed by the
// real placement engine (sched::PlacementEngine, default profile): ReplicaPlaced when it is
// asked for, ReplicaLoaded when its weights are in (cold start: engine start-up plus weights
// read from the node's host-memory cache, its local disk, or the remote store), ReplicaUnloaded
// when scale-down has retired it through scale::ReplicaLifecycle (drain: no new requests;
// flush: in-flight ones finish, within a limit; free: the engine exits; gone: GPU free). A router
// sends each request to the ready replica with the fewest outstanding requests (a buffer holds
// requests while none is ready); each replica is a ReplicaEngine (continuous batching).
//
// Every request of the trace is counted: those without a first token at the horizon (the last
// arrival + tailSeconds) and those that could never run (context beyond the model's or the
// KV cache's) are SLO misses.
//
// Threading: a run owns its state; runs of different policies may go on different threads
// (the trace and the catalogue are only read).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "scale/drain.h"
#include "scale/reconcile.h"
#include "sim/serving_model.h"
#include "sim/serving_policy.h"
#include "sim/serving_trace.h"

namespace tessera::sim {

// Policy names, in the order reports list them.
// "clairvoyant" is a reference (sim/serving_reference.h), run and reported like a policy.
inline constexpr std::array<std::string_view, 7> kServingPolicyNames = {
    "static-peak", "hpa", "weighted", "littles-law", "kpa", "tessera", "clairvoyant"};
bool isServingPolicyName(std::string_view name);

struct ServingFleet {
  int nodes = 4;
  int gpusPerNode = 8;
  std::string gpuType = "H100-80GB";
  std::int64_t cpuMilliPerNode = 192'000;
  std::int64_t hostMemoryMibPerNode = 2 * 1024 * 1024;
  // Every node's disk holds the model's weights at t = 0 (a node cache hit): no replica loads
  // from the remote store.
  bool modelCachedOnDisk = false;
};

// How far the world is from the model (item: robust to a wrong model): the replicas of a run
// prefill and decode at these multiples of the modelled speeds and cold-start at this multiple
// of the modelled time, while every policy is built from the model (its demand estimates, its
// share choice) and must find out from what it measures. The references (clairvoyant, lower
// bound) know the truth.
struct ModelError {
  double prefillSpeed = 1;  // x effective FLOP/s
  double decodeSpeed = 1;   // x effective HBM bandwidth
  double coldStart = 1;     // x engine start-up and weight-load time
};

struct ServingOptions {
  ServingModel model;
  ServingFleet fleet;
  LoadTimes load;
  std::int64_t maxContextTokens = 131072;  // the model's context window (prompt + output)
  // The share rule offers only shares whose KV cache holds this many tokens (vLLM refuses to
  // start when one sequence of max_model_len does not fit its cache); 0: any share the weights
  // fit on. The fleet simulation sets it to each deployment's maxContextTokens.
  std::int64_t minReplicaKvTokens = 0;
  // A request meets the SLO when TTFT <= max(sloTtftMs, sloPrefillFactor x its prompt's
  // unloaded prefill time): prompts too long to prefill within sloTtftMs even alone get a
  // proportional target instead of an impossible one. 0 = the flat SLO.
  // vLLM's automatic prefix caching: a replica skips the prefill of prompt blocks it still
  // holds (traces with block hashes: Mooncake). Off by default.
  bool prefixCache = false;
  double sloTtftMs = 2000;
  double sloPrefillFactor = 2;
  int sampleSeconds = 15;        // timeline resolution
  int signalWindowSeconds = 60;  // arrival rate, service time, TTFT p99 in the signals
  scale::DrainPlan drain;        // 10 s drain, at most 60 s flush, 1 s to free
  int tailSeconds = 120;         // the horizon: last arrival + this
  int hostCacheSeconds = 600;    // a node keeps weights in host memory this long after use
  // The router's flow control, as the Gateway API inference extension's saturation detector
  // does it (its default queue depth): a ready replica takes requests while fewer than
  // routerQueueDepth of its requests wait (one whose KV cache is full stops admitting, so its
  // queue fills); a request that finds no replica with room waits in the router's buffer and
  // goes, in arrival order, to the first replica that has room again. 0: no flow control,
  // every request goes to a replica on arrival and stays there (a backlog sent to the first
  // ready replica is not shared with the ones that come up after it).
  int routerQueueDepth = 0;
  DemandOptions demand;          // static-peak sizing and the warm start
  // Autoscaled policies start with the replicas the trace's first interval needs (replicaDemand
  // at `demand`), within their own min/max, warm: the trace is a window of traffic that a
  // deployment was already serving. false: they start at max(1, minReplicas).
  bool warmStart = true;
  // Before the measured window, the trace's first warmupSeconds (at most a third of the trace)
  // are replayed once as a lead-in (not counted: no requests, GPU-hours, scale events or cold
  // starts), so that signal windows, stabilisation windows and recommender history are in a
  // steady state when measuring starts.
  int warmupSeconds = 300;
  ModelError actual;  // the world against the model (1, 1, 1: the model is right)
  // The SLO attainment the references aim for (clairvoyant, lower bound).
  double sloTarget = 0.99;
  int clairvoyantSyncSeconds = 15;  // the clairvoyant plans one replica count per such slot
  int clairvoyantMaxRuns = 60;      // simulations per GPU share its search may take
  // Experiments: settings changed on an autoscaled policy's configuration (overrideSetting).
  struct PolicySetting {
    std::string policy;
    std::string key;
    double value = 0;
  };
  std::vector<PolicySetting> policySettings;
  // The GPU share each `tessera` replica holds (docs/serving-simulator.md, "GPU shares"):
  // 0 = auto: the share rule of scale/reconcile.h decides each new replica's share from the
  // signals, as the server does (shareRuleFor, chooseReplicaShare for the replicas it starts
  // with); a value in (0, 1] fixes it. Every other policy takes whole GPUs (they have no notion
  // of a share). runServingWith applies a fixed value to its controller; auto is 1 there.
  double replicaShare = 0;
};

// The shares auto chooses from (quarter GPUs, as time-slicing/MPS set-ups commonly split).
inline constexpr std::array<double, 4> kReplicaShares = {0.25, 0.5, 0.75, 1.0};

struct TimelinePoint {
  double timeS = 0;
  double arrivalsPerS = 0;  // over the sample period ending here
  int queue = 0;            // requests waiting (replica queues and the router's buffer)
  int running = 0;          // requests being served
  int loading = 0;
  int ready = 0;
  int draining = 0;
  int desired = 0;  // the policy's last answer
};

// One answer of the policy, as it was applied.
struct DecisionRecord {
  double timeS = 0;
  int serving = 0;  // loading + ready when asked
  int recommended = 0;
  int desired = 0;
  int drained = 0;  // victims started draining
  std::string reason;
};

struct ServingPolicyResult {
  std::string policy;
  int requests = 0;
  int sloMet = 0;
  int served = 0;            // got a first token before the horizon
  int unserved = 0;          // no first token by the horizon (SLO misses)
  int rejected = 0;          // could never run here (SLO misses)
  int cutOff = 0;            // stopped mid-decode by a flush that ran out of time (TTFT counted)
  double sloAttainment = 0;  // sloMet / requests
  double gpuHours = 0;       // GPU share x time from placement to freed (or the horizon)
  double replicaShare = 1;   // the GPU share its replicas held, weighted by their GPU-hours
  double minReplicaShare = 1, maxReplicaShare = 1;  // the smallest and largest of them
  std::int64_t placedComputeMilli = 0;    // what the engine booked on the last replica's GPU
  double ttftP50Ms = 0, ttftP99Ms = 0;    // unserved ones count as horizon - arrival
  double queueP50Ms = 0, queueP99Ms = 0;  // arrival to admission
  int scaleUps = 0, scaleDowns = 0;       // syncs that added / removed replicas
  int scaleEvents() const { return scaleUps + scaleDowns; }
  int coldStarts = 0;                     // replicas placed after t = 0
  std::array<int, 3> coldStartsByTier{};  // host memory, local disk, remote
  // Load time of each cold start, seconds, by tier (the distribution behind coldStartsByTier).
  std::array<std::vector<double>, 3> coldStartSeconds{};
  int placementFailures = 0;              // replicas the engine could not place
  // Replica-seconds the reconciler asked for and the fleet had no room for (checked each sync).
  double pendingReplicaSeconds = 0;
  int evicted = 0;  // replicas a higher-priority deployment evicted (fleet runs)
  int peakReplicas = 0;                   // most replicas holding GPUs at once
  double meanServingReplicas = 0;         // time-average of loading + ready
  double horizonS = 0;
  double wallSeconds = 0;
  std::optional<double> prefixCacheHitRate;  // prompt tokens from the cache / admitted
  std::string detail;  // how the policy was set up, when that varies (the clairvoyant's share)
  // Why the target cannot be reached here (the clairvoyant, when even its search cannot).
  std::optional<std::string> infeasible;
  std::vector<TimelinePoint> timeline;
  std::vector<DecisionRecord> decisions;  // every sync whose answer or count changed
};

// Replicas on `share` of a GPU the fleet holds at most: every GPU times floor(1 / share).
int replicaCapacity(const ServingFleet& fleet, double share);

// The controller of a policy name (static-peak or an autoscaled one; the clairvoyant is a
// search, runServing runs it), for replicas of `perf` on `share` of a GPU.
Result<std::unique_ptr<ServingController>> makeServingController(std::string_view policy,
                                                                 const ServingTrace& trace,
                                                                 const ReplicaPerf& perf,
                                                                 const ServingOptions& options,
                                                                 double share = 1);

// Runs one policy. The catalogue must know options.fleet.gpuType.
Result<ServingPolicyResult> runServing(const ServingTrace& trace, const model::GpuCatalog& catalog,
                                       const ServingOptions& options, std::string_view policy);
// The same with a controller given directly (tests).
Result<ServingPolicyResult> runServingWith(const ServingTrace& trace,
                                           const model::GpuCatalog& catalog,
                                           const ServingOptions& options, std::string policyName,
                                           ServingController& controller);

// The model corrected by a ModelError (what the world does).
ReplicaPerf withError(const ReplicaPerf& perf, const ModelError& error);
LoadTimes withError(const LoadTimes& load, const ModelError& error);

// The GPU share a policy's replicas hold and their performance there.
struct ShareChoice {
  double share = 1;
  ReplicaPerf perf;
};
// `share` of `whole` (>= 1: the whole GPU); fails when the model does not fit on it.
Result<ShareChoice> fixedShare(const ReplicaPerf& whole, const ServingModel& model, double share);
// The share rule (scale::ShareRule, docs/serving-simulator.md "GPU shares") a policy's new
// replicas are placed by: `tessera` with an automatic share (ServingOptions::replicaShare 0),
// with the deployment's SLO and the smallest quarter the model fits on; nullopt for every other
// policy and for a fixed share (whole GPUs, or that share).
std::optional<scale::ShareRule> shareRuleFor(std::string_view policy, const ReplicaPerf& whole,
                                             const ServingOptions& options);
// The share the replicas a run starts with hold: a fixed ServingOptions::replicaShare as it is;
// auto: the share rule on what one whole-GPU replica would have measured, unloaded, over the
// busiest signal window of the lead-in (the first interval without one), for the replicas the
// warm start would place on whole GPUs; whole GPUs for every policy but `tessera`. `leadIn`:
// the trace a run replays (withLeadIn); measuring starts at measuredFromUs.
Result<ShareChoice> chooseReplicaShare(const ServingTrace& leadIn, Micros measuredFromUs,
                                       const ReplicaPerf& whole, const ServingOptions& options,
                                       std::string_view policy);

// Runs `controller` with every replica on `share` of a GPU (1: whole GPUs).
Result<ServingPolicyResult> runServingOnShare(const ServingTrace& trace,
                                              const model::GpuCatalog& catalog,
                                              const ServingOptions& options, double share,
                                              std::string policyName,
                                              ServingController& controller);

// The lead-in (ServingOptions::warmupSeconds): where the measured window starts on a run's
// time line, and the trace a run replays (the lead-in's requests, then the whole trace
// shifted by that much).
Micros leadInUs(const ServingTrace& trace, int warmupSeconds);
ServingTrace withLeadIn(const ServingTrace& trace, int warmupSeconds);

// The replica performance of options.model on options.fleet.gpuType.
Result<ReplicaPerf> servingPerf(const model::GpuCatalog& catalog, const ServingOptions& options);

}  // namespace tessera::sim
