#include "sim/serving_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <queue>
#include <unordered_map>

#include "scale/drain.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"
#include "sched/plugin.h"
#include "sched/profile.h"
#include "sim/serving_reference.h"
#include "sim/serving_replica.h"
#include "sim/serving_stats.h"

namespace tessera::sim {
namespace {

constexpr Micros kUsPerSecond = 1'000'000;
constexpr const char* kDeployment = "serving";

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
  ReplicaEngine engine;
  std::optional<scale::ReplicaLifecycle> retiring;  // chosen for scale-down
  Micros nextLifecycleUs = -1;                      // the lifecycle event scheduled
  Micros scrapedAtUs = 0;  // the last scrape, for GPU utilisation over the scrape interval
  Micros scrapedBusyUs = 0;
  std::int64_t prefilled = 0;  // prompts that got their first token here
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
};

struct Event {
  Micros atUs = 0;
  std::uint64_t seq = 0;  // insertion order breaks ties: the run is deterministic
  EventType type = EventType::kArrival;
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

class ServingRun {
 public:
  ServingRun(const ServingTrace& trace, std::size_t firstCounted, Micros measuredFromUs,
             const model::GpuCatalog& catalog, const ServingOptions& o, const ReplicaPerf& perf,
             const ReplicaPerf& replicaPerf, double share,
             std::optional<scale::ShareRule> shareRule, std::string name,
             ServingController& controller)
      : trace_(trace),
        firstCounted_(firstCounted),
        measuredFromUs_(measuredFromUs),
        o_(o),
        perf_(perf),
        rperf_(replicaPerf),
        share_(share),
        shareRule_(std::move(shareRule)),
        name_(std::move(name)),
        controller_(controller),
        state_(catalog, clock_, engineOptions()) {}

  Result<ServingPolicyResult> run();

 private:
  static sched::EngineOptions engineOptions() {
    sched::EngineOptions e = sched::defaultProfile().options;
    // The engine pre-allocates exactly gpuMemoryUtilization x card: no margin on top.
    e.memorySafetyFactor = 1.0;
    return e;
  }
  Result<void> setUp();
  void push(Micros at, EventType type, int index = 0) { events_.push({at, seq_++, type, index}); }
  void setClock(Micros now) { clock_.set(now / 1000); }

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
  void kickLater(int replica) { toKick_.push_back(replica); }
  void kick(int replica, Micros now);
  Result<void> onIterationEnd(int replica, Micros now);
  Result<void> onReady(int replica, Micros now);
  Result<void> advanceRetiring(int replica, Micros now);
  Result<void> onSync(Micros now);
  void onSample(Micros now);
  Result<void> release(int replica, Micros now);
  Result<bool> addReplica(Micros now, bool warm, double share);
  Result<void> startDrain(int replica, Micros now);
  Result<void> apply(const scale::Decision& d, const scale::DeploymentSignals& s, Micros now);
  // A replica's performance on `share` of a GPU (rperf_ on the run's own share).
  Result<const ReplicaPerf*> perfOn(double share);
  scale::DeploymentSignals signals(Micros now);
  CacheTier tierFor(sched::NodeId node, Micros now) const;
  int serving() const { return counts_[0] + counts_[1]; }
  void setPhase(Replica& r, Phase p);
  ServingPolicyResult summarize(Micros horizon);

  bool measuring(Micros now) const { return now >= measuredFromUs_; }

  const ServingTrace& trace_;
  std::size_t firstCounted_;  // requests before this index are the warm-up's
  Micros measuredFromUs_;     // the measured window starts here
  const ServingOptions& o_;
  const ReplicaPerf& perf_;   // a whole GPU: the SLO's unloaded prefill
  const ReplicaPerf& rperf_;  // a replica on its share
  double share_;  // the share the run's first replicas hold
  std::optional<scale::ShareRule> shareRule_;  // new replicas' shares (none: share_)
  std::map<std::int32_t, ReplicaPerf> sharePerfs_;  // by thousandths of a GPU
  std::unordered_map<std::string, int> indexOf_;    // replica id → index
  std::string name_;
  ServingController& controller_;
  ManualClock clock_;
  sched::ClusterState state_;
  std::unique_ptr<sched::PlacementEngine> engine_;
  std::vector<model::NodeSpec> nodeSpecs_;
  std::vector<Micros> hostCachedUntil_;  // per node; live replicas keep it warm
  std::vector<int> liveOnNode_;

  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  std::vector<RequestState> requests_;
  std::deque<Replica> replicas_;  // never relocated: engines keep iterators into themselves
  std::array<int, 3> counts_{};   // loading, ready, draining
  std::deque<int> buffer_;        // requests waiting for a ready replica
  std::vector<int> scratchA_, scratchB_;
  std::vector<int> toKick_;

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

bool fitsModel(const ServingOptions& o, const ReplicaEngine& probe, const ReplicaJob& job) {
  return static_cast<std::int64_t>(job.inputTokens) + job.outputTokens <= o.maxContextTokens &&
         probe.fits(job);
}

Result<void> ServingRun::setUp() {
  const model::GpuType* type = state_.catalog().find(o_.fleet.gpuType);
  if (type == nullptr) {
    return fail(Error::invalid("unknown GPU type '" + o_.fleet.gpuType + "'"));
  }
  for (int n = 0; n < o_.fleet.nodes; ++n) {
    model::NodeSpec node;
    node.name = "node-" + std::to_string(n);
    node.cpuMilli = o_.fleet.cpuMilliPerNode;
    node.hostMemoryMib = o_.fleet.hostMemoryMibPerNode;
    if (o_.fleet.modelCachedOnDisk) node.cachedModels.push_back(o_.model.name);
    for (int g = 0; g < o_.fleet.gpusPerNode; ++g) {
      model::GpuSpec gpu;
      gpu.id = std::to_string(g);
      gpu.type = type->name;
      gpu.nvlinkGroup = type->nvlinkGBps ? 0 : -1;  // an L40S box has no NVLink
      gpu.numaNode = g * 2 / std::max(1, o_.fleet.gpusPerNode);
      node.gpus.push_back(std::move(gpu));
    }
    if (auto ok = state_.apply(sched::NodeAdded{node}); !ok) return fail(ok.error());
    nodeSpecs_.push_back(std::move(node));
  }
  hostCachedUntil_.assign(nodeSpecs_.size(), -1);
  liveOnNode_.assign(nodeSpecs_.size(), 0);
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  const sched::Profile profile = sched::defaultProfile();
  auto plugins = sched::buildPlugins(profile, registry);
  if (!plugins) return fail(plugins.error());
  engine_ = std::make_unique<sched::PlacementEngine>(std::move(*plugins), engineOptions());

  requests_.reserve(trace_.requests.size());
  const double sloFloorUs = o_.sloTtftMs * 1000;
  for (const ServingRequest& r : trace_.requests) {
    RequestState s;
    s.counted = requests_.size() >= firstCounted_;
    s.arrivalUs = r.arrivalUs;
    s.inputTokens = r.inputTokens;
    s.outputTokens = std::max(1, r.outputTokens);
    const double prefillUs = perf_.prefillSeconds(r.inputTokens) * 1e6;
    s.sloUs = static_cast<Micros>(std::max(sloFloorUs, o_.sloPrefillFactor * prefillUs));
    requests_.push_back(s);
  }
  horizonUs_ = trace_.spanUs() + Micros{o_.tailSeconds} * kUsPerSecond;
  return {};
}

void ServingRun::setPhase(Replica& r, Phase p) {
  if (r.phase != Phase::kGone) --counts_[static_cast<int>(r.phase)];
  r.phase = p;
  if (p != Phase::kGone) ++counts_[static_cast<int>(p)];
}

CacheTier ServingRun::tierFor(sched::NodeId node, Micros now) const {
  const auto n = static_cast<std::size_t>(node);
  if (liveOnNode_[n] > 0 || hostCachedUntil_[n] >= now) return CacheTier::kHostMemory;
  if (state_.modelCachedOnNode(node, o_.model.name)) return CacheTier::kLocalDisk;
  return CacheTier::kRemote;
}

Result<const ReplicaPerf*> ServingRun::perfOn(double share) {
  if (std::abs(share - share_) < 1e-9) return &rperf_;
  const auto milli = static_cast<std::int32_t>(std::lround(share * 1000));
  auto it = sharePerfs_.find(milli);
  if (it == sharePerfs_.end()) {
    // perf_ is the run's whole GPU as the world runs it (the model error applied).
    auto p = milli >= 1000 ? Result<ReplicaPerf>(perf_) : sharePerf(perf_, o_.model, milli / 1000.0);
    if (!p) return fail(p.error());
    it = sharePerfs_.emplace(milli, *p).first;
  }
  return &it->second;
}

Result<bool> ServingRun::addReplica(Micros now, bool warm, double share) {
  setClock(now);
  auto perfOk = perfOn(share);
  if (!perfOk) return fail(perfOk.error());
  const ReplicaPerf& perf = **perfOk;
  const std::string id = name_ + "-" + std::to_string(replicas_.size());
  const model::PlacementRequest req =
      replicaRequest(o_.model, perf, id, o_.fleet.gpuType, kDeployment, share);
  sched::DecideOptions opts;
  opts.explain = false;
  opts.explainFailures = false;
  opts.diagnoseFailures = false;
  const sched::Decision d = engine_->place(state_, req, opts);
  if (!d.placement) {
    if (d.requestRefused) return fail(Error::internal("replica " + id + ": " + d.summary));
    if (measuring(now)) ++out_.placementFailures;
    return false;
  }
  const sched::NodeId node = d.placement->node;
  if (!d.placement->gpus.empty()) out_.placedComputeMilli = d.placement->gpus.front().computeMilli;
  Replica r(id, perf, share,
            o_.prefixCache ? perf.kvCapacityTokens / kMooncakeBlockTokens : std::int64_t{0});
  r.node = node;
  r.placedUs = now;
  r.scrapedAtUs = now;
  Micros loadUs = 0;
  if (!warm) {
    const CacheTier tier = tierFor(node, now);
    loadUs = static_cast<Micros>(std::ceil(o_.load.seconds(tier, perf.weightsBytes) * 1e6));
    if (measuring(now)) {
      ++out_.coldStarts;
      ++out_.coldStartsByTier[static_cast<std::size_t>(tier)];
    }
    if (tier == CacheTier::kRemote) {
      // The download fills the node's disk cache (the node agent reports it).
      model::NodeSpec& spec = nodeSpecs_[static_cast<std::size_t>(node)];
      spec.cachedModels.push_back(o_.model.name);
      if (auto ok = state_.apply(sched::NodeUpdated{spec}); !ok) return fail(ok.error());
    }
  }
  r.readyUs = now + loadUs;
  r.phase = Phase::kGone;  // setPhase counts from here
  replicas_.push_back(std::move(r));
  const int index = static_cast<int>(replicas_.size()) - 1;
  indexOf_.emplace(id, index);
  setPhase(replicas_.back(), Phase::kLoading);
  ++liveOnNode_[static_cast<std::size_t>(node)];
  ++holding_;
  if (warm) {
    TESSERA_RETURN_IF_ERROR(onReady(index, now));
  } else {
    push(replicas_.back().readyUs, EventType::kReady, index);
  }
  return true;
}

Result<void> ServingRun::onReady(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase != Phase::kLoading) return {};  // cancelled while loading
  setClock(now);
  if (auto ok = state_.apply(sched::ReplicaLoaded{r.id}); !ok) return fail(ok.error());
  setPhase(r, Phase::kReady);
  r.scrapedAtUs = now;
  r.scrapedBusyUs = 0;
  r.counters.assign(1, {now, r.engine.computeUsUntil(now), r.prefilled});
  dispatchBuffered();
  return {};
}

bool ServingRun::hasRoom(const Replica& r) const {
  if (r.phase != Phase::kReady) return false;
  if (o_.routerQueueDepth <= 0) return true;
  return r.engine.waiting() < o_.routerQueueDepth;
}

void ServingRun::dispatchBuffered() {
  while (!buffer_.empty()) {
    const int request = buffer_.front();
    const int to = pickReplica(request);
    if (to < 0) return;
    buffer_.pop_front();
    send(request, to);
  }
}

void ServingRun::route(int request) {
  // Arrival order: a request does not overtake the ones the router already holds.
  const int to = buffer_.empty() ? pickReplica(request) : -1;
  if (to < 0) {
    buffer_.push_back(request);
    return;
  }
  send(request, to);
}

ReplicaJob ServingRun::jobOf(int request) const {
  const RequestState& s = requests_[static_cast<std::size_t>(request)];
  return {request, s.inputTokens, s.outputTokens,
          trace_.requests[static_cast<std::size_t>(request)].blockHashes};
}

int ServingRun::pickReplica(int request) const {
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

void ServingRun::send(int request, int replica) {
  replicas_[static_cast<std::size_t>(replica)].engine.enqueue(jobOf(request));
  kickLater(replica);
}

void ServingRun::kick(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  scratchA_.clear();
  const auto end = r.engine.startIteration(now, scratchA_);
  for (int id : scratchA_) requests_[static_cast<std::size_t>(id)].admittedUs = now;
  if (end) push(*end, EventType::kIterationEnd, index);
}

Result<void> ServingRun::onIterationEnd(int index, Micros now) {
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

Result<void> ServingRun::startDrain(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase == Phase::kLoading) return release(index, now);  // nothing to drain: cancel the load
  if (r.phase != Phase::kReady) return {};
  setPhase(r, Phase::kDraining);
  r.retiring.emplace(r.id, now / 1000, o_.drain);
  return advanceRetiring(index, now);
}

Result<void> ServingRun::advanceRetiring(int index, Micros now) {
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

Result<void> ServingRun::release(int index, Micros now) {
  Replica& r = replicas_[static_cast<std::size_t>(index)];
  if (r.phase == Phase::kGone) return {};
  setClock(now);
  if (auto ok = state_.apply(sched::ReplicaUnloaded{r.id}); !ok) return fail(ok.error());
  setPhase(r, Phase::kGone);
  r.freedUs = now;
  const auto node = static_cast<std::size_t>(r.node);
  --liveOnNode_[node];
  hostCachedUntil_[node] = now + Micros{o_.hostCacheSeconds} * kUsPerSecond;
  --holding_;
  return {};
}

scale::DeploymentSignals ServingRun::signals(Micros now) {
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

Result<void> ServingRun::apply(const scale::Decision& d, const scale::DeploymentSignals& s,
                               Micros now) {
  // The plan the server's reconcile loop executes too (scale/reconcile.h).
  scale::ReconcileOptions ro;
  ro.limit = replicaCapacity(o_.fleet, share_);
  ro.share = shareRule_;
  const scale::ReconcilePlan plan = scale::planReconcile(d, s, ro);
  lastDesired_ = plan.target;
  lastShareReason_ = plan.place > 0 && plan.share ? plan.share->reason : "";
  if (plan.place > 0) {
    const double share = plan.share ? plan.share->milli / 1000.0 : share_;
    int added = 0;
    for (int i = 0; i < plan.place; ++i) {
      auto ok = addReplica(now, /*warm=*/false, share);
      if (!ok) return fail(ok.error());
      if (!*ok) break;
      ++added;
    }
    if (added > 0 && measuring(now)) ++out_.scaleUps;
    return {};
  }
  int removed = 0;
  for (const std::string& id : plan.retire) {
    const auto it = indexOf_.find(id);
    if (it == indexOf_.end()) continue;
    const Phase p = replicas_[static_cast<std::size_t>(it->second)].phase;
    if (p != Phase::kLoading && p != Phase::kReady) continue;
    TESSERA_RETURN_IF_ERROR(startDrain(it->second, now));
    ++removed;
  }
  if (removed > 0 && measuring(now)) ++out_.scaleDowns;
  return {};
}

Result<void> ServingRun::onSync(Micros now) {
  const int before = serving();
  const int drainingBefore = counts_[2];
  const scale::DeploymentSignals s = signals(now);
  const scale::Decision d = controller_.evaluate(s);
  TESSERA_RETURN_IF_ERROR(apply(d, s, now));
  const DecisionRecord* last = out_.decisions.empty() ? nullptr : &out_.decisions.back();
  if (measuring(now) && (!last || last->recommended != d.recommendedReplicas ||
                         last->desired != d.desiredReplicas || before != serving())) {
    out_.decisions.push_back({static_cast<double>(now - measuredFromUs_) / 1e6, before,
                              d.recommendedReplicas, d.desiredReplicas,
                              std::max(0, counts_[2] - drainingBefore),
                              lastShareReason_.empty() ? d.reason
                                                       : d.reason + "; " + lastShareReason_});
  }
  push(now + controller_.syncPeriodMs() * 1000, EventType::kSync);
  return {};
}

void ServingRun::onSample(Micros now) {
  TimelinePoint p;
  p.timeS = static_cast<double>(now - measuredFromUs_) / 1e6;
  p.arrivalsPerS =
      now > measuredFromUs_ ? arrivalsSinceSample_ / static_cast<double>(o_.sampleSeconds) : 0;
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

Result<ServingPolicyResult> ServingRun::run() {
  const auto started = std::chrono::steady_clock::now();
  TESSERA_RETURN_IF_ERROR(setUp());
  out_.policy = name_;
  lastDesired_ = std::clamp(controller_.initialReplicas(), 0, replicaCapacity(o_.fleet, share_));
  for (int i = 0; i < lastDesired_; ++i) {
    auto ok = addReplica(0, /*warm=*/true, share_);
    if (!ok) return fail(ok.error());
    if (!*ok) break;
  }
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    push(requests_[i].arrivalUs, EventType::kArrival, static_cast<int>(i));
  }
  push(measuredFromUs_, EventType::kSample);
  push(controller_.syncPeriodMs() * 1000, EventType::kSync);
  const ReplicaEngine probe(rperf_);
  while (!events_.empty()) {
    const Event e = events_.top();
    if (e.atUs > horizonUs_) break;
    events_.pop();
    const Micros now = e.atUs;
    if (measuring(now)) {
      const Micros from = std::max(lastCountUs_, measuredFromUs_);
      servingReplicaUs_ += static_cast<double>(serving()) * static_cast<double>(now - from);
      out_.peakReplicas = std::max(out_.peakReplicas, holding_);
    }
    lastCountUs_ = now;
    switch (e.type) {
      case EventType::kArrival: {
        RequestState& s = requests_[static_cast<std::size_t>(e.index)];
        ++arrivalsSinceSample_;
        arrivals_.add(now, 1);
        contexts_.add(now, s.inputTokens + s.outputTokens);
        if (!fitsModel(o_, probe, {e.index, s.inputTokens, s.outputTokens})) {
          s.rejected = true;
        } else {
          route(e.index);
        }
        break;
      }
      case EventType::kIterationEnd:
        TESSERA_RETURN_IF_ERROR(onIterationEnd(e.index, now));
        break;
      case EventType::kReady:
        TESSERA_RETURN_IF_ERROR(onReady(e.index, now));
        break;
      case EventType::kLifecycle:
        TESSERA_RETURN_IF_ERROR(advanceRetiring(e.index, now));
        break;
      case EventType::kSync:
        TESSERA_RETURN_IF_ERROR(onSync(now));
        break;
      case EventType::kSample:
        onSample(now);
        break;
    }
    if (!toKick_.empty() && (events_.empty() || events_.top().atUs > now)) {
      for (int i : toKick_) {
        if (replicas_[static_cast<std::size_t>(i)].phase != Phase::kGone) kick(i, now);
      }
      toKick_.clear();
    }
  }
  servingReplicaUs_ += static_cast<double>(serving()) *
                       static_cast<double>(horizonUs_ - std::max(lastCountUs_, measuredFromUs_));
  ServingPolicyResult result = summarize(horizonUs_);
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

ServingPolicyResult ServingRun::summarize(Micros horizon) {
  ServingPolicyResult& r = out_;
  r.requests = static_cast<int>(requests_.size() - firstCounted_);
  const auto window = static_cast<double>(horizon - measuredFromUs_);
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
  r.minReplicaShare = r.maxReplicaShare = share_;
  for (const Replica& x : replicas_) {
    // Each replica counts its GPU share, over the measured window only.
    const Micros end = x.freedUs >= 0 ? x.freedUs : horizon;
    const auto held =
        static_cast<double>(std::max<Micros>(0, end - std::max(x.placedUs, measuredFromUs_)));
    gpuUs += x.share * held;
    replicaUs += held;
    if (held > 0) {
      r.minReplicaShare = std::min(r.minReplicaShare, x.share);
      r.maxReplicaShare = std::max(r.maxReplicaShare, x.share);
    }
  }
  r.gpuHours = gpuUs / 3.6e9;
  r.replicaShare = replicaUs > 0 ? gpuUs / replicaUs : share_;
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

}  // namespace

namespace {

// The trace behind a lead-in: its first warmupSeconds replayed once, then the whole trace.
struct WarmedTrace {
  ServingTrace trace;
  std::size_t firstCounted = 0;
  Micros measuredFromUs = 0;
};

WarmedTrace withWarmup(const ServingTrace& t, int warmupSeconds) {
  WarmedTrace w;
  w.measuredFromUs = leadInUs(t, warmupSeconds);
  w.trace = withLeadIn(t, warmupSeconds);
  w.firstCounted = w.trace.requests.size() - t.requests.size();
  return w;
}

// The run itself sees the world as it is (ServingOptions::actual): the controller was built
// from the model, the replicas run at the actual speeds and load at the actual cold starts.
Result<ServingPolicyResult> runWarmed(const WarmedTrace& w, const model::GpuCatalog& catalog,
                                      const ServingOptions& options, const ReplicaPerf& perf,
                                      const ReplicaPerf& replicaPerf, double share,
                                      std::optional<scale::ShareRule> shareRule,
                                      std::string policyName, ServingController& controller) {
  if (w.firstCounted == w.trace.requests.size()) {
    return fail(Error::invalid("trace " + w.trace.name + ": no requests"));
  }
  ServingOptions actual = options;
  actual.load = withError(options.load, options.actual);
  const ReplicaPerf actualPerf = withError(perf, options.actual);
  const ReplicaPerf actualReplica = withError(replicaPerf, options.actual);
  ServingRun run(w.trace, w.firstCounted, w.measuredFromUs, catalog, actual, actualPerf,
                 actualReplica, share, std::move(shareRule), std::move(policyName), controller);
  return run.run();
}

}  // namespace

Result<ServingPolicyResult> runServingOnShare(const ServingTrace& trace,
                                              const model::GpuCatalog& catalog,
                                              const ServingOptions& options, double share,
                                              std::string policyName,
                                              ServingController& controller) {
  auto perf = servingPerf(catalog, options);
  if (!perf) return fail(perf.error());
  auto c = fixedShare(*perf, options.model, share);
  if (!c) return fail(c.error());
  return runWarmed(withWarmup(trace, options.warmupSeconds), catalog, options, *perf, c->perf,
                   c->share, std::nullopt, std::move(policyName), controller);
}

Result<ServingPolicyResult> runServingWith(const ServingTrace& trace,
                                           const model::GpuCatalog& catalog,
                                           const ServingOptions& options, std::string policyName,
                                           ServingController& controller) {
  const double share = options.replicaShare > 0 ? options.replicaShare : 1;  // auto: whole
  return runServingOnShare(trace, catalog, options, share, std::move(policyName), controller);
}

Result<ServingPolicyResult> runServing(const ServingTrace& trace, const model::GpuCatalog& catalog,
                                       const ServingOptions& options, std::string_view policy) {
  auto perf = servingPerf(catalog, options);
  if (!perf) return fail(perf.error());
  if (policy == "clairvoyant") {
    return runClairvoyant(trace, catalog, options,
                          ClairvoyantOptions{options.sloTarget, options.clairvoyantMaxRuns});
  }
  const WarmedTrace warmed = withWarmup(trace, options.warmupSeconds);
  auto share = chooseReplicaShare(warmed.trace, warmed.measuredFromUs, *perf, options, policy);
  if (!share) return fail(share.error());
  // The warm start sizes in replicas of the chosen share.
  auto controller = makeServingController(policy, warmed.trace, share->perf, options, share->share);
  if (!controller) return fail(controller.error());
  auto r = runWarmed(warmed, catalog, options, *perf, share->perf, share->share,
                     shareRuleFor(policy, *perf, options), std::string(policy), **controller);
  if (r && r->minReplicaShare < 1) {
    char detail[96];
    if (r->maxReplicaShare - r->minReplicaShare < 1e-9) {
      std::snprintf(detail, sizeof detail, "replicas on %.2f GPU shares", r->minReplicaShare);
    } else {
      std::snprintf(detail, sizeof detail, "replicas on %.2f to %.2f GPU shares (%.2f on average)",
                    r->minReplicaShare, r->maxReplicaShare, r->replicaShare);
    }
    r->detail = detail;
  }
  return r;
}

}  // namespace tessera::sim
