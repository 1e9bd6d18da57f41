#include "scale/reconcile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
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

int wholeReplicas(double x) {
  return static_cast<int>(std::ceil(std::min(x, 1e9) - 1e-9));
}

bool isPlaced(const ReplicaSignals& r) {
  return !r.unplaced && r.phase != ReplicaPhase::kDraining;
}

}  // namespace

namespace {

// Beyond this many replicas a share is taken not to serve (and counts stay within int).
constexpr double kMostReplicas = 1e6;

// What the deployment measured, as a whole GPU would serve it.
struct Demand {
  double lambda = 0;        // arrivals per second
  double wholeMean = 0;     // a prompt's prefill on a whole GPU, s
  double wholeTail = 0;     // the slow prompts' (P99), s
  double cs2 = 1;           // the prefill time's squared coefficient of variation
  double sloSec = 0;        // the TTFT target, s
  double eps = 0.01;        // the share of prompts that may wait past their budget
  double serviceWhole = 0;  // a request's time in service on a whole GPU, s (0: not measured)
  double slots = 0;         // the ready replicas' mean maxConcurrency (0: not reported)
  double kvAtMean = 1;      // kvScale at their mean share
};

// Replicas on share x (fractional) that the measured demand needs: enough that each replica's
// prompts, an M/G/1 queue at λ / n, wait past what the slow prompt leaves of the target with at
// most eps probability, and (where the replicas report their slots and the service time is
// measured) that the requests in flight fit their slots at the concurrency target. nullopt: the
// share cannot serve the slow prompts within half the target, or holds no KV cache.
std::optional<double> replicasNeeded(const Demand& d, const ShareRule& rule, std::int32_t milli) {
  const double x = milli / 1000.0;
  if (2 * d.wholeTail / x > d.sloSec + 1e-12) return std::nullopt;
  double need = 0;
  const double service = d.wholeMean / x;
  const double left = d.sloSec - d.wholeTail / x;
  if (d.lambda > 0) {
    // waitTail falls as n grows (each replica sees λ / n): bisect on n above saturation.
    double lo = d.lambda * service, hi = std::max(2 * lo, 1e-6);
    auto holds = [&](double n) { return waitTail(d.lambda / n, service, d.cs2, 1, left) <= d.eps; };
    while (!holds(hi) && hi < kMostReplicas) hi *= 2;
    if (!holds(hi)) return std::nullopt;  // no count keeps the tail (a target of 100 %)
    for (int i = 0; i < 50; ++i) {
      const double mid = (lo + hi) / 2;
      (holds(mid) ? hi : lo) = mid;
    }
    need = hi;
  }
  if (d.serviceWhole > 0 && d.slots > 0) {
    const double slots = d.kvAtMean > 0 ? d.slots * rule.kvScale(milli) / d.kvAtMean : 0;
    // What one replica holds: its slots at the concurrency target, and no more than keeps the
    // requests in flight (Poisson at their mean) within its slots but for eps of the time.
    const double holds =
        std::min(slots * rule.concurrencyTargetUtilization, poissonLoadWithin(slots, d.eps));
    if (holds <= 0) return std::nullopt;
    need = std::max(need, d.lambda * d.serviceWhole / x / holds);
  }
  if (!std::isfinite(need) || need > kMostReplicas) return std::nullopt;
  return need;
}

}  // namespace

std::optional<ShareDecision> chooseShare(const DeploymentSignals& s, int target,
                                         const ShareRule& rule, std::int32_t atLeastMilli) {
  auto finite = [](const std::optional<double>& v) { return !v || std::isfinite(*v); };
  if (!rule.sloTtftMs || *rule.sloTtftMs <= 0 || !s.arrivalRatePerSec || !s.meanPrefillMs ||
      !(*s.meanPrefillMs > 0) || !finite(s.arrivalRatePerSec) || !finite(s.meanPrefillMs) ||
      !finite(s.prefillP99Ms) || !finite(s.meanServiceMs)) {
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
  const auto fMilli = std::max<std::int32_t>(1, static_cast<std::int32_t>(std::lround(1000 * f)));
  Demand d;
  d.lambda = std::max(0.0, *s.arrivalRatePerSec);
  d.wholeMean = *s.meanPrefillMs * f / 1000;
  d.wholeTail = std::max(0.0, s.prefillP99Ms.value_or(*s.meanPrefillMs)) * f / 1000;
  d.cs2 = serviceCs2(d.wholeMean, d.wholeTail);
  d.sloSec = *rule.sloTtftMs / 1000;
  d.eps = 1 - std::clamp(rule.sloTarget, 0.0, 1.0);
  // Memory only where the rule is told how a share's memory scales (kvScale): the server books
  // the profile's memory on any share and sizes shares by their prefill alone.
  if (rule.kvScale && s.meanServiceMs && *s.meanServiceMs > 0 && reportingConcurrency > 0) {
    d.serviceWhole = *s.meanServiceMs * f / 1000;
    d.slots = concurrency / reportingConcurrency;
    d.kvAtMean = rule.kvScale(fMilli);
  }
  // need(x) per share, each searched once: the placed replicas' shares and the steps repeat.
  std::map<std::int32_t, std::optional<double>> needs;
  const auto needAt = [&](std::int32_t m) {
    auto it = needs.find(m);
    if (it == needs.end()) it = needs.emplace(m, replicasNeeded(d, rule, m)).first;
    return it->second;
  };
  const std::optional<double> needHere = needAt(fMilli);
  // The recommender counts in the deployment's replicas as they are (share f). Where the rule
  // knows how a share's memory and speed scale (kvScale) and the demand needs more than one
  // replica of share f, a replica on a larger share x is worth need(f) / need(x) of them: the
  // replicas placed count so (one loading on a whole GPU may already hold several of what is
  // asked), and what is still wanted converts into wanted × need(x) / need(f) replicas of share
  // x. Otherwise the count is what is wanted (a count above the need is the recommender's floor:
  // minReplicas, a warm pool). On a share no larger than f the count is what is wanted too, and
  // the share serves, with kvScale, only if the demand needs no more replicas of it than the
  // whole number it needs of share f (need(x) <= max(1, ceil(need(f))): a count the recommender
  // sized for memory on share f says nothing about a smaller one); without kvScale (the server:
  // the prefill tail alone) if the demand spread over all the replicas needs no more of it. A
  // share that takes more replicas than were asked is not taken (the reconciler places no more),
  // except a whole GPU, the last resort. Where share f cannot serve, the placed replicas carry
  // nothing of share x.
  const bool memoryModel = static_cast<bool>(rule.kvScale);
  const bool converts = memoryModel && needHere && *needHere > 1;
  const auto worth = [&](double share) {
    const auto m = static_cast<std::int32_t>(std::lround(1000 * std::clamp(share, 0.0, 1.0)));
    if (!converts || m <= fMilli) return 1.0;
    const std::optional<double> need = needAt(m);
    return need && *need > 0 ? *needHere / *need : 1.0;
  };
  double placedWorth = 0;
  int placed = 0;
  for (const ReplicaSignals& r : s.replicas) {
    if (!isPlaced(r)) continue;
    ++placed;
    placedWorth += worth(r.gpuFraction);
  }
  ShareDecision best;
  const double wanted = target - placedWorth;
  if (wanted <= 1e-9) {
    best.replicas = 0;
    best.reason = "the " + std::to_string(placed) + " placed hold " + fixed(placedWorth, 1) +
                  " of the " + std::to_string(target) + " replicas asked for";
    return best;
  }
  const int asked = wholeReplicas(wanted);
  const std::int32_t step = std::clamp(rule.stepMilli, 1, 1000);
  double bestCost = 0;
  std::optional<double> bestNeed;
  for (std::int32_t m = step; m <= 1000; m = m < 1000 ? std::min(1000, m + step) : m + 1) {
    if (m < 1000 && (m < rule.minShareMilli || m < atLeastMilli)) continue;
    const std::optional<double> need = needAt(m);
    int count = asked;
    if (!need) {
      if (m < 1000) continue;
    } else if (converts && m > fMilli) {
      count = std::max(1, wholeReplicas(wanted * *need / *needHere));
    } else {
      // The count stays what is wanted; the share must carry it: with the memory model, a share
      // no larger than f at most the deployment's rounded need, else the demand spread over
      // every replica.
      const bool roundedNeed = m <= fMilli && memoryModel && needHere;
      const double carried =
          roundedNeed ? std::max(1, wholeReplicas(*needHere)) : asked + (needHere ? placed : 0);
      if (*need > carried + 1e-9 && m < 1000) continue;
    }
    if (count > asked && m < 1000) continue;
    const double cost = count * m / 1000.0;
    // The smallest share among the cheapest: finer steps to scale by later.
    if (best.replicas == 0 || cost < bestCost - 1e-9) {
      best.milli = m;
      best.replicas = count;
      bestCost = cost;
      bestNeed = need;
    }
  }
  const double x = best.milli / 1000.0;
  best.reason = "share " + fixed(x, 2) + " x " + std::to_string(best.replicas) + " for " +
                fixed(wanted, 1) + " asked: " + fixed(d.lambda, 2) + " prompts/s of " +
                fixed(1000 * d.wholeMean, 0) + " ms on a GPU (p99 " + fixed(1000 * d.wholeTail, 0) +
                " ms)";
  if (bestNeed) best.reason += ", " + fixed(*bestNeed, 2) + " replicas of it needed";
  if (needHere) best.reason += " (" + fixed(*needHere, 2) + " of share " + fixed(f, 2) + ")";
  if (d.slots > 0) {
    best.reason += ", " + fixed(d.lambda * d.serviceWhole / f, 1) + " requests in flight";
  }
  return best;
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
    // Shares below a GPU only grow while a deployment runs: replicas of one size keep the
    // recommender's per-replica capacity true (it sizes from their mean concurrency and
    // prefill time). Whole-GPU replicas (the profile's, placed before anything was measured)
    // do not hold the rule back.
    const auto held = static_cast<std::int32_t>(std::lround(1000 * largest));
    if (options.share) {
      // The governor's scale-down window holds the largest recent recommendation, counted in the
      // replicas the deployment had then. Where the rule has since put larger replicas in their
      // place that count is stale: new replicas are placed for what the recommender asks for
      // now (at least the floor), and the held count only keeps replicas from retiring.
      const int now = std::max(std::max(0, decision.recommendedReplicas), options.minReplicas) +
                      std::max(0, decision.warmReplicas);
      p.share =
          chooseShare(signals, std::min(p.target, now), *options.share, held < 1000 ? held : 0);
      // A larger share than the deployment's holds more: fewer replicas give what was asked.
      if (p.share) p.place = std::min(p.place, p.share->replicas);
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
