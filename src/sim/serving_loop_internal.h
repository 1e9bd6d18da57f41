#pragma once
// The serving loop's parts (sim/serving_loop.h), internal to serving_loop.cc (the cluster and
// the loop) and serving_deployment.cc (one deployment's requests, replicas, router and
// controller). Nothing outside those two files includes this.

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "scale/drain.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/profile.h"
#include "sim/serving_loop.h"
#include "sim/serving_replica.h"
#include "sim/serving_stats.h"

namespace tessera::sim::loop::internal {

inline constexpr Micros kUsPerSecond = 1'000'000;

enum class Phase : std::uint8_t { kLoading, kReady, kDraining, kGone };

struct Replica {
  Replica(std::string replicaId, const ReplicaPerf& perf, double gpuShare,
          std::int64_t prefixCacheBlocks)
      : id(std::move(replicaId)),
        share(gpuShare),
        engine(perf, prefixCacheBlocks, kMooncakeBlockTokens) {}
  std::string id;
  double share = 1;  // the GPU share it holds
  Phase phase = Phase::kLoading;
  Micros placedUs = 0;
  Micros readyUs = 0;
  Micros freedUs = -1;
  sched::NodeId node = -1;
  sched::GpuId gpu = -1;
  ReplicaEngine engine;
  std::optional<scale::ReplicaLifecycle> retiring;  // chosen for scale-down
  Micros nextLifecycleUs = -1;                      // the lifecycle event scheduled
  Micros scrapedAtUs = 0;  // the last scrape, for GPU utilisation over the scrape interval
  Micros scrapedBusyUs = 0;
  Micros sampledComputeUs = 0;  // at the last fleet sample
  std::int64_t prefilled = 0;   // prompts that got their first token here
  // Compute time and prefilled prompts at each scrape within the signal window, as a
  // Prometheus rate over the window reads the counters (oldest first).
  struct Counters {
    Micros atUs;
    Micros computeUs;
    std::int64_t prefilled;
  };
  std::deque<Counters> counters;
};

enum class EventType : std::uint8_t {
  kArrival,
  kIterationEnd,
  kReady,
  kLifecycle,  // a retiring replica's drain lifecycle may move on
  kSync,
  kSample,
  kFleetSample,
};

struct Event {
  Micros atUs = 0;
  std::uint64_t seq = 0;  // insertion order breaks ties: the run is deterministic
  EventType type = EventType::kArrival;
  int deployment = 0;
  int index = 0;
  bool operator>(const Event& o) const { return atUs != o.atUs ? atUs > o.atUs : seq > o.seq; }
};

struct RequestState {
  Micros arrivalUs = 0;
  std::int32_t inputTokens = 0;
  std::int32_t outputTokens = 1;
  Micros sloUs = 0;
  Micros admittedUs = -1;
  Micros firstTokenUs = -1;
  Micros doneUs = -1;
  bool counted = true;  // false: a warm-up request
  bool rejected = false;
  bool cutOff = false;
};

class DeploymentRun;

// What deployments share: the nodes, the placement engine, the caches and the event queue.
class Cluster {
 public:
  Cluster(const model::GpuCatalog& catalog, const ClusterOptions& o)
      : o_(o), state(catalog, clock, engineOptions()) {}

  static sched::EngineOptions engineOptions() {
    sched::EngineOptions e = sched::defaultProfile().options;
    // The engine pre-allocates exactly gpuMemoryUtilization x card: no margin on top.
    e.memorySafetyFactor = 1.0;
    return e;
  }
  Result<void> setUp();
  void push(Micros at, EventType type, int deployment, int index = 0) {
    events.push({at, seq_++, type, deployment, index});
  }
  void setClock(Micros now) { clock.set(now / 1000); }

  // A model's weights on one node: replicas of it alive there, and until when its host memory
  // keeps them after the last one left.
  struct ModelOnNode {
    int live = 0;
    Micros hostCachedUntil = -1;
  };
  ModelOnNode& modelOn(sched::NodeId node, const std::string& model) {
    return models_[static_cast<std::size_t>(node)][model];
  }
  bool hostHolds(sched::NodeId node, const std::string& model, Micros now) const {
    const auto& m = models_[static_cast<std::size_t>(node)];
    const auto it = m.find(model);
    return it != m.end() && (it->second.live > 0 || it->second.hostCachedUntil >= now);
  }
  // The download of a remote load fills the node's disk cache (the node agent reports it).
  Result<void> cacheOnDisk(sched::NodeId node, const std::string& model) {
    model::NodeSpec& spec = nodeSpecs_[static_cast<std::size_t>(node)];
    if (std::find(spec.cachedModels.begin(), spec.cachedModels.end(), model) !=
        spec.cachedModels.end()) {
      return {};
    }
    spec.cachedModels.push_back(model);
    sched::NodePatched patch;
    patch.name = spec.name;
    patch.cachedModels = spec.cachedModels;
    if (auto ok = state.apply(patch); !ok) return fail(ok.error());
    return {};
  }

  const ClusterOptions& o_;
  ManualClock clock;
  sched::ClusterState state;
  std::unique_ptr<sched::PlacementEngine> engine;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::vector<std::pair<int, int>> toKick;  // (deployment, replica)
  // Replicas on each GPU, as (deployment, replica): time-slicing and fleet samples.
  std::unordered_map<sched::GpuId, std::vector<std::pair<int, int>>> onGpu;
  std::unordered_map<std::string, std::pair<int, int>> owner;  // replica id → (deployment, replica)
  std::vector<DeploymentRun*> runs;
  std::vector<FleetSample> samples;
  int evictions = 0;
  int lowestPriority = 0;        // of every deployment
  double releasedComputeUs = 0;  // compute of replicas freed since the last fleet sample
  std::map<std::string, double> gpuUsByType;
  int peakGpusInUse = 0;

  // A replica took or left a GPU: cards in use, and their time within the measured window.
  void gpuTaken(sched::GpuId gpu, int deployment, int replica, Micros now) {
    auto& tenants = onGpu[gpu];
    tenants.emplace_back(deployment, replica);
    if (tenants.size() == 1) {
      busySince_[gpu] = now;
      ++inUse_;
      if (now >= o_.measuredFromUs) peakGpusInUse = std::max(peakGpusInUse, inUse_);
    }
  }
  void gpuLeft(sched::GpuId gpu, int deployment, int replica, Micros now) {
    auto& tenants = onGpu[gpu];
    std::erase(tenants, std::make_pair(deployment, replica));
    if (tenants.empty()) {
      chargeGpu(gpu, now);
      --inUse_;
    }
  }
  void chargeGpu(sched::GpuId gpu, Micros until) {
    const Micros from = std::max(busySince_[gpu], o_.measuredFromUs);
    if (until > from) {
      gpuUsByType[state.gpu(gpu).spec.type] += static_cast<double>(until - from);
    }
  }
  // At the horizon: the cards still in use.
  void chargeOpenGpus(Micros horizon) {
    for (const auto& [gpu, tenants] : onGpu) {
      if (!tenants.empty()) chargeGpu(gpu, horizon);
    }
  }
  // The cards in use when measuring starts count towards the peak.
  void measuringStarts() { peakGpusInUse = std::max(peakGpusInUse, inUse_); }

 private:
  std::unordered_map<sched::GpuId, Micros> busySince_;
  int inUse_ = 0;
  std::uint64_t seq_ = 0;
  std::vector<model::NodeSpec> nodeSpecs_;
  std::vector<std::unordered_map<std::string, ModelOnNode>> models_;  // per node
};

class DeploymentRun {
 public:
  DeploymentRun(Cluster& cluster, int index, DeploymentSetup setup)
      : c_(cluster),
        index_(index),
        s_(std::move(setup)),
        o_(s_.options),
        trace_(*s_.trace),
        controller_(*s_.controller),
        probe_(s_.replicaPerf) {}

  Result<void> start();
  Result<void> handle(const Event& e);
  bool ownsEventAt(Micros at) const { return at <= horizonUs_; }
  void kick(int replica, Micros now);
  bool replicaAlive(int replica) const {
    return replicas_[static_cast<std::size_t>(replica)].phase != Phase::kGone;
  }
  // The count of serving replicas over time, up to `now` (before anything changes it).
  void account(Micros now);
  ServingPolicyResult finish();
  // Evicted by a higher-priority deployment: gone at once, its requests back to the router.
  Result<void> evict(int replica, Micros now);
  // A replica's contribution to a fleet sample: memory used and held (MiB), compute since the
  // last sample (GPU-microseconds).
  struct Usage {
    double usedMib = 0, heldMib = 0, computeUs = 0;
  };
  Usage sample(int replica, Micros now);
  int priority() const { return s_.priority; }
  Micros horizonUs() const { return horizonUs_; }

 private:
  void push(Micros at, EventType type, int index = 0) { c_.push(at, type, index_, index); }
  void route(int request);
  // The router (o_.routerQueueDepth): whether a replica takes requests now, the one a request
  // goes to (-1: none has room), and sending it there.
  bool hasRoom(const Replica& r) const;
  int pickReplica(int request) const;
  ReplicaJob jobOf(int request) const;
  void send(int request, int replica);
  void dispatchBuffered();
  // Replicas start their next iteration once every event of the instant is in (requests that
  // arrive together are admitted together).
  void kickLater(int replica) { c_.toKick.emplace_back(index_, replica); }
  Result<void> onIterationEnd(int replica, Micros now);
  Result<void> onReady(int replica, Micros now);
  Result<void> advanceRetiring(int replica, Micros now);
  Result<void> onSync(Micros now);
  void onSample(Micros now);
  Result<void> release(int replica, Micros now);
  Result<bool> addReplica(Micros now, bool warm, double share);
  // When nothing fits: a higher-priority deployment evicts lower-priority replicas on one node
  // (sched::planEviction) and places there.
  Result<std::optional<sched::Decision>> placeByEviction(const model::PlacementRequest& req,
                                                         Micros now);
  Result<void> startDrain(int replica, Micros now);
  Result<void> apply(const scale::Decision& d, const scale::DeploymentSignals& s, Micros now);
  // A replica's performance on `share` of a GPU (replicaPerf on the run's own share).
  Result<const ReplicaPerf*> perfOn(double share);
  scale::DeploymentSignals signals(Micros now);
  CacheTier tierFor(sched::NodeId node, Micros now) const;
  int serving() const { return counts_[0] + counts_[1]; }
  void setPhase(Replica& r, Phase p);
  double slowdownOf(const Replica& r) const;

  bool measuring(Micros now) const { return now >= s_.measuredFromUs; }

  Cluster& c_;
  int index_;
  DeploymentSetup s_;
  const ServingOptions& o_;
  const ServingTrace& trace_;
  ServingController& controller_;
  ReplicaEngine probe_;  // whether a request can ever run on a replica

  std::map<std::int32_t, ReplicaPerf> sharePerfs_;  // by thousandths of a GPU
  std::vector<RequestState> requests_;
  std::deque<Replica> replicas_;  // never relocated: engines keep iterators into themselves
  std::array<int, 3> counts_{};   // loading, ready, draining
  std::deque<int> buffer_;        // requests waiting for a ready replica
  std::vector<int> scratchA_, scratchB_;

  Window arrivals_, contexts_, serviceMs_, ttftMs_, tpotMs_, prefillMs_;
  int arrivalsSinceSample_ = 0;
  int lastDesired_ = 0;
  std::string lastShareReason_;  // the share rule's, when the last sync placed replicas
  ServingPolicyResult out_;
  Micros horizonUs_ = 0;
  double servingReplicaUs_ = 0;  // integral of loading + ready over time
  Micros lastCountUs_ = 0;
  int holding_ = 0;  // replicas holding a GPU
};

// Records the fleet's cards in use, memory and compute (`record` false: only reads the
// counters, when the measured window starts).
void fleetSample(Cluster& c, Micros now, int periodSeconds, bool record);

}  // namespace tessera::sim::loop::internal
