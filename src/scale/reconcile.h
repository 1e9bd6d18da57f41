#pragma once
// From an autoscaler's decision to replicas: how many to place, on what GPU share, and which
// to retire. One loop for every caller: the control plane (src/api/deployments.cc) and the
// serving simulator (src/sim/serving_deployment.cc) both execute the plan this returns, so what the
// simulation measures is what the server does.
//
//   target  = min(limit, desired + warm)        (the warm pool is held as placed replicas)
//   placed  = replicas placed and not draining   (unplaced ones are capacity asked for, not held)
//   place   = target - placed, when positive (fewer when the share rule picks a larger share
//             than the deployment's: see below)
//   retire  = placed - target, when positive: the decision's victims first, in its order, then
//             scale::chooseVictims over the rest (priority, load, newest)
//
// The share rule (ShareRule) picks the GPU share new replicas hold and how many, from what the
// deployment measured. A share x stretches a replica's prefill and decode by 1/x (time-sliced
// compute) and, where memory shrinks with it (kvScale), its KV cache. need(x), the replicas of
// share x the measured demand asks for (fractional), is the larger of
//   - prefill: the fewest replicas n for which a prompt, each replica's prompts an M/G/1 queue at
//     λ / n (P × f / x each, service variability from P99 / P, scale/queueing.h), waits past
//     what the slow prompt leaves of the TTFT target (sloTtft − P99 × f / x) with at most
//     1 − sloTarget probability;
//   - memory: the requests in flight (Little's law, λ × S × f / x) over the slots a replica of
//     share x holds at the concurrency target (C × kvScale(x) / kvScale(f) × uc);
// and a share on which the slow prompts take more than half the target (2 × P99 × f / x >
// sloTtft) cannot serve. Here λ is the arrival rate, P and P99 the mean and 99th-percentile
// prefill time measured on the ready replicas, f their mean GPU share, C their mean
// maxConcurrency, S the mean service time and uc the concurrency target utilisation.
//
// The recommender counts in replicas as the deployment holds them (share f). Where the rule
// knows how a share's memory and speed scale (kvScale: the simulator; the server books the
// profile's memory on any share and has no memory term) and the demand needs more than one
// replica of share f, a replica on a larger share x is worth need(f) / need(x) of them: the
// placed replicas count so, and what is still wanted converts into wanted × need(x) / need(f)
// replicas of share x; on a share no larger than f the count stays what is wanted and the share
// serves only if need(x) <= ceil(need(f)). Otherwise nothing converts (a count above the need is
// the recommender's floor: minReplicas, a warm pool) and a share serves if the demand spread over
// all the replicas needs no more of it. The rule takes the share whose new replicas cost the
// fewest GPUs (count × x), the smallest on a tie, never one that takes more replicas than are
// wanted (a whole GPU, the last resort, excepted); the reconciler places that count, for what
// the recommender asks for now (Decision::recommendedReplicas, at least minReplicas): a larger
// count the governor's window holds was made in the replicas the deployment had then. Where
// memory binds, a whole GPU often holds many times a half's slots (the weights take the same
// memory on any share), so a few whole replicas replace many shared ones; where only prefill
// binds, shares save a GPU while the demand is below one.
// Without λ, P, a ready replica or an SLO there is nothing to size from and the rule says
// nothing: the caller places what the model's profile asks for.

#include <climits>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "scale/autoscaler.h"
#include "scale/signals.h"

namespace tessera::scale {

struct ShareRule {
  // Shares come in steps of this many thousandths of a GPU (quarters, as MPS and time-slicing
  // set-ups commonly split a card): 250, 500 and 750 below a whole one.
  std::int32_t stepMilli = 250;
  std::optional<double> sloTtftMs;  // the deployment's TTFT target; none: no share
  // The share of prompts that must meet sloTtftMs (the tessera recommender's sloTarget).
  double sloTarget = 0.99;
  // The smallest share the model fits on (weights and a KV cache), thousandths; 0: any.
  std::int32_t minShareMilli = 0;
  // The KV cache a replica holds on a share (thousandths) relative to a whole GPU's, where the
  // share also caps its memory (an MPS memory limit; the serving simulator); empty: memory does
  // not shrink with the share (the server books the model profile's memory on any share).
  std::function<double(std::int32_t milli)> kvScale;
  // The part of its sequence slots a replica may keep busy (the tessera recommender's
  // targetUtilization).
  double concurrencyTargetUtilization = 0.8;
};

struct ShareDecision {
  std::int32_t milli = 1000;  // 1000: a whole GPU
  int replicas = 0;           // replicas of that share to place for what was asked
  std::string reason;
};

// The share for new replicas when the deployment's recommender asks for `target` replicas
// (counted as its replicas are now), no smaller than atLeastMilli, and how many of that share to
// place given the ones placed (0: they already hold what was asked); nullopt when the signals
// cannot tell.
std::optional<ShareDecision> chooseShare(const DeploymentSignals& signals, int target,
                                         const ShareRule& rule, std::int32_t atLeastMilli = 0);

struct ReconcileOptions {
  int limit = INT_MAX;             // the most replicas the fleet can hold
  int minReplicas = 0;             // the deployment's floor (what the governor never goes below)
  std::optional<ShareRule> share;  // none: new replicas take the caller's default share
};

struct ReconcilePlan {
  int target = 0;  // replicas wanted: desired + warm, within the limit
  int placed = 0;  // placed and not draining when planned
  int place = 0;   // new replicas to place
  std::optional<ShareDecision> share;  // for the new replicas (ReconcileOptions::share set)
  std::vector<std::string> retire;     // to drain (a loading one is cancelled), in order
};

ReconcilePlan planReconcile(const Decision& decision, const DeploymentSignals& signals,
                            const ReconcileOptions& options = {});

}  // namespace tessera::scale
