#include "sim/serving_loop.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <queue>
#include <unordered_map>

#include "common/clock.h"
#include "scale/drain.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/plugin.h"
#include "sched/profile.h"
#include "sim/serving_replica.h"
#include "sim/serving_stats.h"

namespace tessera::sim::loop {
namespace {

constexpr Micros kUsPerSecond = 1'000'000;

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
    if (auto ok = state.apply(sched::NodeUpdated{spec}); !ok) return fail(ok.error());
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

Result<void> Cluster::setUp() {
  for (const NodeGroup& g : o_.groups) {
    const model::GpuType* type = state.catalog().find(g.gpuType);
    if (type == nullptr) return fail(Error::invalid("unknown GPU type '" + g.gpuType + "'"));
    for (int n = 0; n < g.nodes; ++n) {
      model::NodeSpec node;
      node.name = g.namePrefix + "-" + std::to_string(n);
      node.cpuMilli = g.cpuMilliPerNode;
      node.hostMemoryMib = g.hostMemoryMibPerNode;
      node.cachedModels = g.cachedModels;
      for (int i = 0; i < g.gpusPerNode; ++i) {
        model::GpuSpec gpu;
        gpu.id = std::to_string(i);
        gpu.type = type->name;
        gpu.nvlinkGroup = type->nvlinkGBps ? 0 : -1;  // an L40S box has no NVLink
        gpu.numaNode = i * 2 / std::max(1, g.gpusPerNode);
        node.gpus.push_back(std::move(gpu));
      }
      if (auto ok = state.apply(sched::NodeAdded{node}); !ok) {
        return fail(Error::invalid("node " + node.name + ": " + ok.error().message));
      }
      nodeSpecs_.push_back(std::move(node));
    }
  }
  models_.resize(nodeSpecs_.size());
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  sched::Profile profile = sched::defaultProfile();
  if (!o_.modelAffinity) {
    std::erase_if(profile.scores, [](const auto& s) { return s.name == "ModelAffinity"; });
  }
  auto plugins = sched::buildPlugins(profile, registry);
  if (!plugins) return fail(plugins.error());
  engine = std::make_unique<sched::PlacementEngine>(std::move(*plugins), engineOptions());
  return {};
}

bool fitsModel(const ServingOptions& o, const ReplicaEngine& probe, const ReplicaJob& job) {
  return static_cast<std::int64_t>(job.inputTokens) + job.outputTokens <= o.maxContextTokens &&
         probe.fits(job);
}

// One deployment: its requests, replicas, router and controller.
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

Result<void> DeploymentRun::start() {
  requests_.reserve(trace_.requests.size());
  const double sloFloorUs = o_.sloTtftMs * 1000;
  for (const ServingRequest& r : trace_.requests) {
    RequestState s;
    s.counted = requests_.size() >= s_.firstCounted;
    s.arrivalUs = r.arrivalUs;
    s.inputTokens = r.inputTokens;
    s.outputTokens = std::max(1, r.outputTokens);
    const double prefillUs = s_.perf.prefillSeconds(r.inputTokens) * 1e6;
    s.sloUs = static_cast<Micros>(std::max(sloFloorUs, o_.sloPrefillFactor * prefillUs));
    requests_.push_back(s);
  }
  horizonUs_ =
      s_.horizonUs > 0 ? s_.horizonUs : trace_.spanUs() + Micros{o_.tailSeconds} * kUsPerSecond;
  out_.policy = s_.name;
  lastDesired_ = std::clamp(controller_.initialReplicas(), 0, s_.replicaLimit);
  for (int i = 0; i < lastDesired_; ++i) {
    auto ok = addReplica(0, /*warm=*/true, s_.share);
    if (!ok) return fail(ok.error());
    if (!*ok) break;
  }
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    push(requests_[i].arrivalUs, EventType::kArrival, static_cast<int>(i));
  }
  push(s_.measuredFromUs, EventType::kSample);
  push(controller_.syncPeriodMs() * 1000, EventType::kSync);
  return {};
}

void DeploymentRun::setPhase(Replica& r, Phase p) {
  if (r.phase != Phase::kGone) --counts_[static_cast<int>(r.phase)];
  r.phase = p;
  if (p != Phase::kGone) ++counts_[static_cast<int>(p)];
}

CacheTier DeploymentRun::tierFor(sched::NodeId node, Micros now) const {
  if (!s_.nodeCache) return CacheTier::kRemote;
  if (c_.hostHolds(node, o_.model.name, now)) return CacheTier::kHostMemory;
  if (c_.state.modelCachedOnNode(node, o_.model.name)) return CacheTier::kLocalDisk;
  return CacheTier::kRemote;
}

Result<const ReplicaPerf*> DeploymentRun::perfOn(double share) {
  if (std::abs(share - s_.share) < 1e-9) return &s_.replicaPerf;
  const auto milli = static_cast<std::int32_t>(std::lround(share * 1000));
  auto it = sharePerfs_.find(milli);
  if (it == sharePerfs_.end()) {
    // perf is the run's whole GPU as the world runs it (the model error applied).
    auto p =
        milli >= 1000 ? Result<ReplicaPerf>(s_.perf) : sharePerf(s_.perf, o_.model, milli / 1000.0);
    if (!p) return fail(p.error());
    it = sharePerfs_.emplace(milli, *p).first;
  }
  return &it->second;
}

Result<std::optional<sched::Decision>> DeploymentRun::placeByEviction(
    const model::PlacementRequest& req, Micros now) {
  // Only strictly lower priorities are victims: none below this deployment, nothing to plan.
  if (s_.priority <= c_.lowestPriority) return std::optional<sched::Decision>();
  const sched::EvictionPlan plan = sched::planEviction(*c_.engine, c_.state, req);
  if (!plan.feasible || !plan.placement) return std::optional<sched::Decision>();
  for (const std::string& victim : plan.victims) {
    const auto it = c_.owner.find(victim);
    if (it == c_.owner.end()) {
      return fail(Error::internal("eviction victim " + victim + " has no owner"));
    }
    const auto [dep, replica] = it->second;
    TESSERA_RETURN_IF_ERROR(c_.runs[static_cast<std::size_t>(dep)]->evict(replica, now));
    if (measuring(now)) ++c_.evictions;  // as each deployment counts its own
  }
  sched::DecideOptions opts;
  opts.explain = false;
  opts.explainFailures = false;
  opts.diagnoseFailures = false;
  sched::Decision d = c_.engine->place(c_.state, req, opts);
  if (!d.placement) return std::optional<sched::Decision>();
  return std::optional<sched::Decision>(std::move(d));
}

Result<bool> DeploymentRun::addReplica(Micros now, bool warm, double share) {
  c_.setClock(now);
  auto perfOk = perfOn(share);
  if (!perfOk) return fail(perfOk.error());
  const ReplicaPerf& perf = **perfOk;
  const std::string id = s_.name + "-" + std::to_string(replicas_.size());
  model::PlacementRequest req =
      replicaRequest(o_.model, perf, id, o_.fleet.gpuType, s_.deploymentKey, share);
  req.model.priority = s_.priority;
  sched::DecideOptions opts;
  opts.explain = false;
  opts.explainFailures = false;
  opts.diagnoseFailures = false;
  sched::Decision d = c_.engine->place(c_.state, req, opts);
  if (!d.placement) {
    if (d.requestRefused) return fail(Error::internal("replica " + id + ": " + d.summary));
    auto evicting = placeByEviction(req, now);
    if (!evicting) return fail(evicting.error());
    if (!*evicting) {
      if (measuring(now)) ++out_.placementFailures;
      return false;
    }
    d = std::move(**evicting);
  }
  const sched::NodeId node = d.placement->node;
  Replica r(id, perf, share,
            o_.prefixCache ? perf.kvCapacityTokens / kMooncakeBlockTokens : std::int64_t{0});
  r.node = node;
  if (!d.placement->gpus.empty()) {
    out_.placedComputeMilli = d.placement->gpus.front().computeMilli;
    r.gpu = d.placement->gpus.front().gpu;
  }
  r.placedUs = now;
  r.scrapedAtUs = now;
  r.sampledComputeUs = 0;
  Micros loadUs = 0;
  if (!warm) {
    const CacheTier tier = tierFor(node, now);
    const double seconds = o_.load.seconds(tier, perf.weightsBytes);
    loadUs = static_cast<Micros>(std::ceil(seconds * 1e6));
    if (measuring(now)) {
      ++out_.coldStarts;
      ++out_.coldStartsByTier[static_cast<std::size_t>(tier)];
      out_.coldStartSeconds[static_cast<std::size_t>(tier)].push_back(seconds);
    }
    if (tier == CacheTier::kRemote && s_.nodeCache) {
      TESSERA_RETURN_IF_ERROR(c_.cacheOnDisk(node, o_.model.name));
    }
  }
  r.readyUs = now + loadUs;
  r.phase = Phase::kGone;  // setPhase counts from here
  replicas_.push_back(std::move(r));
  const int index = static_cast<int>(replicas_.size()) - 1;
  c_.owner.emplace(id, std::make_pair(index_, index));
  if (replicas_.back().gpu >= 0) c_.gpuTaken(replicas_.back().gpu, index_, index, now);
  setPhase(replicas_.back(), Phase::kLoading);
  ++c_.modelOn(node, o_.model.name).live;
  ++holding_;
  if (warm) {
    TESSERA_RETURN_IF_ERROR(onReady(index, now));
  } else {
    push(replicas_.back().readyUs, EventType::kReady, index);
  }
  return true;
}

Result<void> DeploymentRun::onReady(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase != Phase::kLoading) return {};  // cancelled while loading
  c_.setClock(now);
  if (auto ok = c_.state.apply(sched::ReplicaLoaded{r.id}); !ok) return fail(ok.error());
  setPhase(r, Phase::kReady);
  r.scrapedAtUs = now;
  r.scrapedBusyUs = 0;
  r.counters.assign(1, {now, r.engine.computeUsUntil(now), r.prefilled});
  dispatchBuffered();
  return {};
}

bool DeploymentRun::hasRoom(const Replica& r) const {
  if (r.phase != Phase::kReady) return false;
  if (o_.routerQueueDepth <= 0) return true;
  return r.engine.waiting() < o_.routerQueueDepth;
}

void DeploymentRun::dispatchBuffered() {
  while (!buffer_.empty()) {
    const int request = buffer_.front();
    const int to = pickReplica(request);
    if (to < 0) return;
    buffer_.pop_front();
    send(request, to);
  }
}

void DeploymentRun::route(int request) {
  // Arrival order: a request does not overtake the ones the router already holds.
  const int to = buffer_.empty() ? pickReplica(request) : -1;
  if (to < 0) {
    buffer_.push_back(request);
    return;
  }
  send(request, to);
}

ReplicaJob DeploymentRun::jobOf(int request) const {
  const RequestState& s = requests_[static_cast<std::size_t>(request)];
  return {request, s.inputTokens, s.outputTokens,
          trace_.requests[static_cast<std::size_t>(request)].blockHashes};
}

int DeploymentRun::pickReplica(int request) const {
  const ReplicaJob job = jobOf(request);
  // Least loaded among the replicas with room: the fewest prompt tokens still to prefill,
  // this prompt's uncached part included (with prefix caching, where its prefix is held), then
  // the fewest requests, then the oldest replica.
  int best = -1;
  std::pair<std::int64_t, int> bestLoad;
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    const Replica& r = replicas_[i];
    if (!hasRoom(r)) continue;
    const std::pair<std::int64_t, int> load{
        r.engine.pendingPromptTokens() + job.inputTokens - r.engine.cachedTokensOf(job),
        r.engine.outstanding()};
    if (best < 0 || load < bestLoad) {
      best = static_cast<int>(i);
      bestLoad = load;
    }
  }
  return best;
}

void DeploymentRun::send(int request, int replica) {
  replicas_[static_cast<std::size_t>(replica)].engine.enqueue(jobOf(request));
  kickLater(replica);
}

double DeploymentRun::slowdownOf(const Replica& r) const {
  if (s_.interference != Interference::kTimeSliced || r.gpu < 0) return 1;
  const auto it = c_.onGpu.find(r.gpu);
  if (it == c_.onGpu.end()) return 1;
  int busyNeighbours = 0;
  for (const auto& [dep, replica] : it->second) {
    if (dep == index_ && &replicas_[static_cast<std::size_t>(replica)] == &r) continue;
    if (!c_.runs[static_cast<std::size_t>(dep)]->replicaAlive(replica)) continue;
    const DeploymentRun& other = *c_.runs[static_cast<std::size_t>(dep)];
    const ReplicaEngine& e = other.replicas_[static_cast<std::size_t>(replica)].engine;
    if (e.hasWork()) ++busyNeighbours;
  }
  if (busyNeighbours == 0) return 1;
  return (busyNeighbours + 1) * (1 + s_.timeSliceOverhead);
}

void DeploymentRun::kick(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  scratchA_.clear();
  const auto end = r.engine.startIteration(now, scratchA_, slowdownOf(r));
  for (int id : scratchA_) requests_[static_cast<std::size_t>(id)].admittedUs = now;
  if (end) push(*end, EventType::kIterationEnd, index);
}

Result<void> DeploymentRun::onIterationEnd(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase == Phase::kGone || !r.engine.inIteration()) return {};  // aborted meanwhile
  scratchA_.clear();
  scratchB_.clear();
  r.engine.finishIteration(scratchA_, scratchB_);
  r.prefilled += static_cast<std::int64_t>(scratchA_.size());
  for (int id : scratchA_) {
    RequestState& s = requests_[static_cast<std::size_t>(id)];
    s.firstTokenUs = now;
    ttftMs_.add(now, static_cast<double>(now - s.arrivalUs) / 1000);
    // vllm:request_prefill_time_seconds: first scheduled (admitted) to first token.
    prefillMs_.add(now, static_cast<double>(now - s.admittedUs) / 1000);
  }
  for (int id : scratchB_) {
    RequestState& s = requests_[static_cast<std::size_t>(id)];
    s.doneUs = now;
    serviceMs_.add(now, static_cast<double>(now - s.admittedUs) / 1000);
    if (s.outputTokens > 1) {
      tpotMs_.add(now, static_cast<double>(now - s.firstTokenUs) / 1000 / (s.outputTokens - 1));
    }
  }
  kickLater(index);
  if (r.retiring) return advanceRetiring(index, now);
  // The iteration admitted and finished requests: the router may send what it holds.
  if (!buffer_.empty() && r.phase == Phase::kReady) dispatchBuffered();
  return {};
}

Result<void> DeploymentRun::startDrain(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase == Phase::kLoading) return release(index, now);  // nothing to drain: cancel the load
  if (r.phase != Phase::kReady) return {};
  setPhase(r, Phase::kDraining);
  r.retiring.emplace(r.id, now / 1000, o_.drain);
  return advanceRetiring(index, now);
}

Result<void> DeploymentRun::advanceRetiring(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase != Phase::kDraining || !r.retiring) return {};
  const scale::DrainPhase phase = r.retiring->advance(now / 1000, r.engine.outstanding());
  if (phase >= scale::DrainPhase::kFreeing && r.engine.hasWork()) {
    // The flush ran out of time: the engine exits. Requests without a first token go back to
    // the router (the gateway retries them); the others are cut mid-answer.
    ReplicaEngine::Abort a = r.engine.abortAll();
    for (int id : a.cutOff) requests_[static_cast<std::size_t>(id)].cutOff = true;
    for (const ReplicaJob& job : a.unserved) {
      requests_[static_cast<std::size_t>(job.id)].admittedUs = -1;
      route(job.id);
    }
  }
  if (phase == scale::DrainPhase::kGone) return release(index, now);
  if (const auto deadline = r.retiring->nextDeadlineMs()) {
    const Micros at = std::max(now, *deadline * 1000);
    if (at != r.nextLifecycleUs) {
      r.nextLifecycleUs = at;
      push(at, EventType::kLifecycle, index);
    }
  }
  return {};
}

Result<void> DeploymentRun::evict(int index, Micros now) {
  account(now);
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase == Phase::kGone) return {};
  ReplicaEngine::Abort a = r.engine.abortAll();
  for (int id : a.cutOff) requests_[static_cast<std::size_t>(id)].cutOff = true;
  TESSERA_RETURN_IF_ERROR(release(index, now));
  for (const ReplicaJob& job : a.unserved) {
    requests_[static_cast<std::size_t>(job.id)].admittedUs = -1;
    route(job.id);
  }
  if (measuring(now)) ++out_.evicted;
  return {};
}

Result<void> DeploymentRun::release(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase == Phase::kGone) return {};
  // Its compute since the last fleet sample still counts in the next one.
  if (c_.o_.fleetSampleSeconds > 0) c_.releasedComputeUs += sample(index, now).computeUs;
  c_.setClock(now);
  if (auto ok = c_.state.apply(sched::ReplicaUnloaded{r.id}); !ok) return fail(ok.error());
  setPhase(r, Phase::kGone);
  r.freedUs = now;
  Cluster::ModelOnNode& m = c_.modelOn(r.node, o_.model.name);
  --m.live;
  m.hostCachedUntil = now + Micros{o_.hostCacheSeconds} * kUsPerSecond;
  --holding_;
  if (r.gpu >= 0) c_.gpuLeft(r.gpu, index_, index, now);
  return {};
}

scale::DeploymentSignals DeploymentRun::signals(Micros now) {
  const Micros from = now - Micros{o_.signalWindowSeconds} * kUsPerSecond;
  for (Window* w : {&arrivals_, &contexts_, &serviceMs_, &ttftMs_, &tpotMs_, &prefillMs_}) {
    w->trim(from);
  }
  scale::DeploymentSignals s;
  s.nowMs = now / 1000;
  const double contextTokens = contexts_.mean().value_or(2048);
  for (Replica& r : replicas_) {
    if (r.phase == Phase::kGone) continue;
    scale::ReplicaSignals x;
    x.id = r.id;
    x.createdMs = r.placedUs / 1000;
    const ReplicaPerf& perf = r.engine.perf();
    x.maxConcurrency = static_cast<int>(std::clamp<double>(
        static_cast<double>(perf.kvCapacityTokens) / std::max(1.0, contextTokens), 1,
        perf.maxNumSeqs));
    x.gpuFraction = r.share;
    if (r.phase == Phase::kLoading) {
      x.phase = scale::ReplicaPhase::kLoading;
      x.expectedReadyMs = r.readyUs / 1000;
    } else {
      x.phase =
          r.phase == Phase::kReady ? scale::ReplicaPhase::kReady : scale::ReplicaPhase::kDraining;
      x.waiting = r.engine.waiting();
      x.running = r.engine.running();
      x.kvCacheUsage = r.engine.kvCacheUsage();
      const Micros busy = r.engine.busyUsUntil(now);
      if (now > r.scrapedAtUs) {
        const auto interval = static_cast<double>(now - r.scrapedAtUs);
        x.gpuUtilization =
            std::clamp(static_cast<double>(busy - r.scrapedBusyUs) / interval, 0.0, 1.0);
      }
      r.scrapedAtUs = now;
      r.scrapedBusyUs = busy;
      // Tensor activity and prefills over the signal window, like the prefill histogram.
      r.counters.push_back({now, r.engine.computeUsUntil(now), r.prefilled});
      while (r.counters.size() > 2 && r.counters[1].atUs <= from) r.counters.pop_front();
      const Replica::Counters& first = r.counters.front();
      if (now > first.atUs) {
        const auto span = static_cast<double>(now - first.atUs);
        x.computeActive = std::clamp(
            static_cast<double>(r.counters.back().computeUs - first.computeUs) / span, 0.0, 1.0);
        x.prefillsPerSec = static_cast<double>(r.prefilled - first.prefilled) / (span / 1e6);
      }
    }
    s.replicas.push_back(std::move(x));
  }
  const Micros span = std::min<Micros>(now, Micros{o_.signalWindowSeconds} * kUsPerSecond);
  if (span > 0) {
    s.arrivalRatePerSec =
        static_cast<double>(arrivals_.values.size()) / (static_cast<double>(span) / 1e6);
  }
  s.bufferedRequests = static_cast<double>(buffer_.size());
  s.meanServiceMs = serviceMs_.mean();
  s.ttftP99Ms = ttftMs_.percentile(0.99);
  s.tpotMs = tpotMs_.mean();
  s.meanPrefillMs = prefillMs_.mean();
  s.prefillP99Ms = prefillMs_.percentile(0.99);
  return s;
}

Result<void> DeploymentRun::apply(const scale::Decision& d, const scale::DeploymentSignals& s,
                                  Micros now) {
  // The plan the server's reconcile loop executes too (scale/reconcile.h).
  scale::ReconcileOptions ro;
  ro.limit = s_.replicaLimit;
  ro.share = s_.shareRule;
  const scale::ReconcilePlan plan = scale::planReconcile(d, s, ro);
  lastDesired_ = plan.target;
  lastShareReason_ = plan.place > 0 && plan.share ? plan.share->reason : "";
  if (plan.place > 0) {
    const double share = plan.share ? plan.share->milli / 1000.0 : s_.share;
    int added = 0;
    for (int i = 0; i < plan.place; ++i) {
      auto ok = addReplica(now, /*warm=*/false, share);
      if (!ok) return fail(ok.error());
      if (!*ok) break;
      ++added;
    }
    if (added > 0 && measuring(now)) ++out_.scaleUps;
    if (added < plan.place && measuring(now)) {
      out_.pendingReplicaSeconds +=
          (plan.place - added) * static_cast<double>(controller_.syncPeriodMs()) / 1000;
    }
    return {};
  }
  int removed = 0;
  for (const std::string& id : plan.retire) {
    const auto it = c_.owner.find(id);
    if (it == c_.owner.end() || it->second.first != index_) continue;
    const Phase p = replicas_[static_cast<std::size_t>(it->second.second)].phase;
    if (p != Phase::kLoading && p != Phase::kReady) continue;
    TESSERA_RETURN_IF_ERROR(startDrain(it->second.second, now));
    ++removed;
  }
  if (removed > 0 && measuring(now)) ++out_.scaleDowns;
  return {};
}

Result<void> DeploymentRun::onSync(Micros now) {
  const int before = serving();
  const int drainingBefore = counts_[2];
  const scale::DeploymentSignals s = signals(now);
  const scale::Decision d = controller_.evaluate(s);
  TESSERA_RETURN_IF_ERROR(apply(d, s, now));
  const DecisionRecord* last = out_.decisions.empty() ? nullptr : &out_.decisions.back();
  if (measuring(now) && (!last || last->recommended != d.recommendedReplicas ||
                         last->desired != d.desiredReplicas || before != serving())) {
    out_.decisions.push_back(
        {static_cast<double>(now - s_.measuredFromUs) / 1e6, before, d.recommendedReplicas,
         d.desiredReplicas, std::max(0, counts_[2] - drainingBefore),
         lastShareReason_.empty() ? d.reason : d.reason + "; " + lastShareReason_});
  }
  push(now + controller_.syncPeriodMs() * 1000, EventType::kSync);
  return {};
}

void DeploymentRun::onSample(Micros now) {
  TimelinePoint p;
  p.timeS = static_cast<double>(now - s_.measuredFromUs) / 1e6;
  p.arrivalsPerS =
      now > s_.measuredFromUs ? arrivalsSinceSample_ / static_cast<double>(o_.sampleSeconds) : 0;
  arrivalsSinceSample_ = 0;
  p.queue = static_cast<int>(buffer_.size());
  for (const Replica& r : replicas_) {
    if (r.phase == Phase::kGone) continue;
    p.queue += r.engine.waiting();
    p.running += r.engine.running();
  }
  p.loading = counts_[0];
  p.ready = counts_[1];
  p.draining = counts_[2];
  p.desired = lastDesired_;
  out_.timeline.push_back(p);
  const Micros next = now + Micros{o_.sampleSeconds} * kUsPerSecond;
  if (next <= horizonUs_) push(next, EventType::kSample);
}

DeploymentRun::Usage DeploymentRun::sample(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  Usage u;
  const ReplicaPerf& perf = r.engine.perf();
  u.heldMib = static_cast<double>(perf.memoryMib);
  // What the engine holds beyond its KV cache, and the KV running requests reserve.
  const double kvMib = static_cast<double>(perf.kvCapacityTokens) * perf.kvBytesPerToken / 1048576;
  u.usedMib = std::max(0.0, u.heldMib - kvMib) +
              static_cast<double>(r.engine.kvReservedTokens()) * perf.kvBytesPerToken / 1048576;
  const Micros compute = r.engine.computeUsUntil(now);
  // Compute time at the replica's own FLOP/s; on the whole GPU that is this much of it.
  const double weight = s_.perf.flopsPerSec > 0 ? perf.flopsPerSec / s_.perf.flopsPerSec : 1;
  u.computeUs = static_cast<double>(compute - r.sampledComputeUs) * weight;
  r.sampledComputeUs = compute;
  return u;
}

void DeploymentRun::account(Micros now) {
  if (measuring(now)) {
    const Micros from = std::max(lastCountUs_, s_.measuredFromUs);
    if (now > from) {
      servingReplicaUs_ += static_cast<double>(serving()) * static_cast<double>(now - from);
    }
    out_.peakReplicas = std::max(out_.peakReplicas, holding_);
  }
  lastCountUs_ = std::max(lastCountUs_, now);
}

Result<void> DeploymentRun::handle(const Event& e) {
  const Micros now = e.atUs;
  account(now);
  switch (e.type) {
    case EventType::kArrival: {
      RequestState& s = requests_[static_cast<std::size_t>(e.index)];
      ++arrivalsSinceSample_;
      arrivals_.add(now, 1);
      contexts_.add(now, s.inputTokens + s.outputTokens);
      if (!fitsModel(o_, probe_, {e.index, s.inputTokens, s.outputTokens})) {
        s.rejected = true;
      } else {
        route(e.index);
      }
      return {};
    }
    case EventType::kIterationEnd:
      return onIterationEnd(e.index, now);
    case EventType::kReady:
      return onReady(e.index, now);
    case EventType::kLifecycle:
      return advanceRetiring(e.index, now);
    case EventType::kSync:
      return onSync(now);
    case EventType::kSample:
      onSample(now);
      return {};
    case EventType::kFleetSample:
      return {};
  }
  return {};
}

ServingPolicyResult DeploymentRun::finish() {
  const Micros horizon = horizonUs_;
  servingReplicaUs_ += static_cast<double>(serving()) *
                       static_cast<double>(horizon - std::max(lastCountUs_, s_.measuredFromUs));
  ServingPolicyResult& r = out_;
  r.requests = static_cast<int>(requests_.size() - s_.firstCounted);
  const auto window = static_cast<double>(horizon - s_.measuredFromUs);
  r.horizonS = window / 1e6;
  std::vector<double> ttft, queue;
  ttft.reserve(requests_.size());
  queue.reserve(requests_.size());
  for (const RequestState& s : requests_) {
    if (!s.counted) continue;
    if (s.rejected) {
      ++r.rejected;
      continue;  // never ran: a miss, and no latency to speak of
    }
    const Micros first = s.firstTokenUs >= 0 ? s.firstTokenUs : horizon;
    const Micros admitted = s.admittedUs >= 0 ? s.admittedUs : horizon;
    ttft.push_back(static_cast<double>(first - s.arrivalUs) / 1000);
    queue.push_back(static_cast<double>(std::max<Micros>(0, admitted - s.arrivalUs)) / 1000);
    if (s.firstTokenUs < 0) {
      ++r.unserved;
      continue;
    }
    ++r.served;
    if (s.cutOff) ++r.cutOff;
    if (s.firstTokenUs - s.arrivalUs <= s.sloUs) ++r.sloMet;
  }
  r.sloAttainment = r.requests > 0 ? static_cast<double>(r.sloMet) / r.requests : 0;
  r.ttftP50Ms = nearestRank(ttft, 0.5);
  r.ttftP99Ms = nearestRank(ttft, 0.99);
  r.queueP50Ms = nearestRank(queue, 0.5);
  r.queueP99Ms = nearestRank(queue, 0.99);
  double gpuUs = 0, replicaUs = 0;
  r.minReplicaShare = r.maxReplicaShare = s_.share;
  for (const Replica& x : replicas_) {
    // Each replica counts its GPU share, over the measured window only.
    const Micros end = x.freedUs >= 0 ? x.freedUs : horizon;
    const auto held =
        static_cast<double>(std::max<Micros>(0, end - std::max(x.placedUs, s_.measuredFromUs)));
    gpuUs += x.share * held;
    replicaUs += held;
    if (held > 0) {
      r.minReplicaShare = std::min(r.minReplicaShare, x.share);
      r.maxReplicaShare = std::max(r.maxReplicaShare, x.share);
    }
  }
  r.gpuHours = gpuUs / 3.6e9;
  r.replicaShare = replicaUs > 0 ? gpuUs / replicaUs : s_.share;
  if (o_.prefixCache) {
    std::int64_t cached = 0, admitted = 0;
    for (const Replica& x : replicas_) {
      cached += x.engine.cachedPromptTokens();
      admitted += x.engine.admittedPromptTokens();
    }
    r.prefixCacheHitRate = admitted > 0 ? static_cast<double>(cached) / admitted : 0;
  }
  r.meanServingReplicas = window > 0 ? servingReplicaUs_ / window : 0;
  return r;
}

// `record` false: only reads the counters (the measured window starts: compute is counted from
// here).
void fleetSample(Cluster& c, Micros now, int periodSeconds, bool record) {
  FleetSample f;
  f.timeS = static_cast<double>(now - c.o_.measuredFromUs) / 1e6;
  double used = 0, held = 0, compute = c.releasedComputeUs, capacity = 0;
  c.releasedComputeUs = 0;
  for (auto& [gpu, tenants] : c.onGpu) {
    if (tenants.empty()) continue;
    ++f.gpusInUse;
    capacity += static_cast<double>(c.state.gpu(gpu).spec.memoryMib);
    for (const auto& [dep, replica] : tenants) {
      const DeploymentRun::Usage u = c.runs[static_cast<std::size_t>(dep)]->sample(replica, now);
      used += u.usedMib;
      held += u.heldMib;
      compute += u.computeUs;
      ++f.replicas;
    }
  }
  if (f.gpusInUse > 0) {
    f.memoryUsed = used / capacity;
    f.memoryAllocated = held / capacity;
    f.compute = compute / (static_cast<double>(periodSeconds) * 1e6 * f.gpusInUse);
  }
  if (record) c.samples.push_back(f);
}

}  // namespace

Result<LoopResult> runLoop(const model::GpuCatalog& catalog, const ClusterOptions& options,
                           std::vector<DeploymentSetup> setups) {
  Cluster cluster(catalog, options);
  TESSERA_RETURN_IF_ERROR(cluster.setUp());
  std::vector<std::unique_ptr<DeploymentRun>> runs;
  for (std::size_t i = 0; i < setups.size(); ++i) {
    if (setups[i].trace == nullptr || setups[i].controller == nullptr) {
      return fail(Error::invalid("deployment " + setups[i].name + ": no trace or controller"));
    }
    runs.push_back(
        std::make_unique<DeploymentRun>(cluster, static_cast<int>(i), std::move(setups[i])));
    cluster.runs.push_back(runs.back().get());
  }
  if (!runs.empty()) {
    cluster.lowestPriority = runs.front()->priority();
    for (const auto& run : runs) {
      cluster.lowestPriority = std::min(cluster.lowestPriority, run->priority());
    }
  }
  Micros horizon = 0;
  for (auto& run : runs) {
    TESSERA_RETURN_IF_ERROR(run->start());
    horizon = std::max(horizon, run->horizonUs());
  }
  if (options.fleetSampleSeconds > 0) {
    cluster.push(options.measuredFromUs, EventType::kFleetSample, -1);
  }
  bool measuring = false;
  while (!cluster.events.empty()) {
    const Event e = cluster.events.top();
    if (e.atUs > horizon) break;
    cluster.events.pop();
    if (!measuring && e.atUs >= options.measuredFromUs) {
      cluster.measuringStarts();
      measuring = true;
    }
    if (e.type == EventType::kFleetSample) {
      fleetSample(cluster, e.atUs, options.fleetSampleSeconds, e.atUs > options.measuredFromUs);
      const Micros next = e.atUs + Micros{options.fleetSampleSeconds} * kUsPerSecond;
      if (next <= horizon) cluster.push(next, EventType::kFleetSample, -1);
    } else {
      DeploymentRun& run = *runs[static_cast<std::size_t>(e.deployment)];
      if (run.ownsEventAt(e.atUs)) TESSERA_RETURN_IF_ERROR(run.handle(e));
    }
    const Micros now = e.atUs;
    if (!cluster.toKick.empty() && (cluster.events.empty() || cluster.events.top().atUs > now)) {
      for (const auto& [dep, replica] : cluster.toKick) {
        DeploymentRun& run = *runs[static_cast<std::size_t>(dep)];
        if (run.replicaAlive(replica)) run.kick(replica, now);
      }
      cluster.toKick.clear();
    }
  }
  LoopResult out;
  for (auto& run : runs) out.deployments.push_back(run->finish());
  out.samples = std::move(cluster.samples);
  out.evictions = cluster.evictions;
  cluster.chargeOpenGpus(horizon);
  for (const auto& [type, us] : cluster.gpuUsByType) out.gpuHoursByType[type] = us / 3.6e9;
  out.peakGpusInUse = cluster.peakGpusInUse;
  return out;
}

}  // namespace tessera::sim::loop
