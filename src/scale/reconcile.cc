#include "scale/reconcile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "scale/queueing.h"
#include "scale/victims.h"

namespace tessera::scale {
namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

bool isPlaced(const ReplicaSignals& r) {
  return !r.unplaced && r.phase != ReplicaPhase::kDraining;
}

}  // namespace

std::optional<ShareDecision> chooseShare(const DeploymentSignals& s, int replicasAfter,
                                         const ShareRule& rule) {
  if (!rule.sloTtftMs || *rule.sloTtftMs <= 0 || !s.arrivalRatePerSec || !s.meanPrefillMs ||
      *s.meanPrefillMs <= 0) {
    return std::nullopt;
  }
  double fractions = 0, concurrency = 0;
  int ready = 0, reportingConcurrency = 0;
  for (const ReplicaSignals& r : s.replicas) {
    if (r.unplaced || r.phase != ReplicaPhase::kReady) continue;
    fractions += std::clamp(r.gpuFraction, 0.0, 1.0);
    ++ready;
    if (r.maxConcurrency > 0) {
      concurrency += r.maxConcurrency;
      ++reportingConcurrency;
    }
  }
  if (ready == 0 || fractions <= 0) return std::nullopt;
  const double f = fractions / ready;
  const double sloSec = *rule.sloTtftMs / 1000;
  // A prompt's prefill and its slow prompts' on a whole GPU, s.
  const double wholeMean = *s.meanPrefillMs * f / 1000;
  const double wholeTail = s.prefillP99Ms.value_or(*s.meanPrefillMs) * f / 1000;
  const double cs2 = serviceCs2(wholeMean, wholeTail);
  const double perReplicaRate = *s.arrivalRatePerSec / std::max(1, replicasAfter);
  const double eps = 1 - std::clamp(rule.sloTarget, 0.0, 1.0);
  // On share x a prefill takes 1/x as long: the slow prompts must keep half the target, and
  // a prompt may wait past what the slow prompt leaves of it with at most 1 - sloTarget
  // probability (one replica's prompts as an M/G/1 queue, scale/queueing.h).
  auto keepsTail = [&](double x) { return 2 * wholeTail / x <= sloSec + 1e-12; };
  auto keepsWait = [&](double x) {
    return waitTail(perReplicaRate, wholeMean / x, cs2, 1, sloSec - wholeTail / x) <= eps + 1e-12;
  };
  // Requests in flight per replica (Little's law) against the slots a share would have.
  const bool memoryBound = rule.kvScale && s.meanServiceMs && reportingConcurrency > 0;
  const double inFlight = memoryBound ? *s.arrivalRatePerSec * *s.meanServiceMs / 1000 /
                                            std::max(1, replicasAfter)
                                      : 0;
  const double measuredKv =
      memoryBound ? rule.kvScale(static_cast<std::int32_t>(std::lround(1000 * f))) : 1;
  auto holds = [&](std::int32_t m) {
    if (!memoryBound || measuredKv <= 0) return true;
    const double slots = concurrency / reportingConcurrency * rule.kvScale(m) / measuredKv;
    return slots * rule.concurrencyTargetUtilization + 1e-9 >= inFlight;
  };
  ShareDecision d;
  for (std::int32_t m = std::max(1, rule.stepMilli); m < 1000; m += std::max(1, rule.stepMilli)) {
    const double x = m / 1000.0;
    if (m >= rule.minShareMilli && keepsTail(x) && keepsWait(x) && holds(m)) {
      d.milli = m;
      break;
    }
  }
  const double x = d.milli / 1000.0;
  d.reason = "share " + fixed(x, 2) + ": " + fixed(perReplicaRate, 2) + " prompts/s per replica of " +
             fixed(1000 * wholeMean, 0) + " ms on a GPU (p99 " + fixed(1000 * wholeTail, 0) +
             " ms), " + fixed(100 * perReplicaRate * wholeMean / x, 0) + " % busy, P(wait > " +
             fixed(std::max(0.0, sloSec - wholeTail / x), 2) + " s) " +
             fixed(100 * waitTail(perReplicaRate, wholeMean / x, cs2, 1, sloSec - wholeTail / x), 2) +
             " %" +
             (memoryBound ? ", " + fixed(inFlight, 1) + " requests in flight per replica" : "");
  return d;
}

ReconcilePlan planReconcile(const Decision& decision, const DeploymentSignals& signals,
                            const ReconcileOptions& options) {
  ReconcilePlan p;
  p.target = std::min(options.limit, std::max(0, decision.desiredReplicas) +
                                         std::max(0, decision.warmReplicas));
  double largest = 0;  // the largest share a placed replica holds
  for (const ReplicaSignals& r : signals.replicas) {
    if (!isPlaced(r)) continue;
    ++p.placed;
    largest = std::max(largest, std::clamp(r.gpuFraction, 0.0, 1.0));
  }
  if (p.target > p.placed) {
    p.place = p.target - p.placed;
    if (options.share) p.share = chooseShare(signals, p.target, *options.share);
    // Shares below a GPU only grow while a deployment runs: replicas of one size keep the
    // recommender's per-replica capacity true (it sizes from their mean concurrency and
    // prefill time). Whole-GPU replicas (the profile's, placed before anything was measured)
    // do not hold the rule back.
    const auto held = static_cast<std::int32_t>(std::lround(1000 * largest));
    if (p.share && held < 1000 && held > p.share->milli) {
      p.share->reason += "; kept at " + fixed(held / 1000.0, 2) + ", the deployment's largest";
      p.share->milli = held;
    }
    return p;
  }
  const int toRetire = p.placed - p.target;
  if (toRetire == 0) return p;
  // Every placed replica in retirement order: the decision's victims first, in its order, then
  // chooseVictims' order for the rest; with shares, the smallest go first (shares converge
  // on the size the rule asks for now).
  std::unordered_set<std::string> chosen;
  std::vector<const ReplicaSignals*> order;
  auto placedById = [&](const std::string& id) -> const ReplicaSignals* {
    for (const ReplicaSignals& r : signals.replicas) {
      if (r.id == id && isPlaced(r)) return &r;
    }
    return nullptr;
  };
  for (const std::string& id : decision.victims) {
    const ReplicaSignals* r = placedById(id);
    if (r != nullptr && chosen.insert(id).second) order.push_back(r);
  }
  std::vector<ReplicaSignals> rest;
  for (const ReplicaSignals& r : signals.replicas) {
    if (isPlaced(r) && !chosen.contains(r.id)) rest.push_back(r);
  }
  for (const std::string& id : chooseVictims(rest, static_cast<int>(rest.size()))) {
    order.push_back(placedById(id));
  }
  if (options.share) {
    std::stable_sort(order.begin(), order.end(), [](const ReplicaSignals* a, const ReplicaSignals* b) {
      return a->gpuFraction < b->gpuFraction - 1e-9;
    });
  }
  for (int i = 0; i < toRetire && i < static_cast<int>(order.size()); ++i) {
    p.retire.push_back(order[static_cast<std::size_t>(i)]->id);
  }
  return p;
}

}  // namespace tessera::scale
