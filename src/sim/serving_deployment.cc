// One deployment of the serving loop (sim/serving_loop_internal.h): its requests, replicas,
// router, controller and what it reports.

#include <algorithm>
#include <cmath>

#include "sim/serving_loop_internal.h"

namespace tessera::sim::loop::internal {
namespace {

bool fitsModel(const ServingOptions& o, const ReplicaEngine& probe, const ReplicaJob& job) {
  return static_cast<std::int64_t>(job.inputTokens) + job.outputTokens <= o.maxContextTokens &&
         probe.fits(job);
}

// One deployment: its requests, replicas, router and controller.
}  // namespace

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
  ro.minReplicas = controller_.minReplicas();
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
}  // namespace tessera::sim::loop::internal
