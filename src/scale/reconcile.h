#pragma once
// From an autoscaler's decision to replicas: how many to place, on what GPU share, and which
// to retire. One loop for every caller: the control plane (src/api/deployments.cc) and the
// serving simulator (src/sim/serving_deployment.cc) both execute the plan this returns, so what the
// simulation measures is what the server does.
//
//   target  = min(limit, desired + warm)        (the warm pool is held as placed replicas)
//   placed  = replicas placed and not draining   (unplaced ones are capacity asked for, not held)
//   place   = target - placed, when positive
//   retire  = placed - target, when positive: the decision's victims first, in its order, then
//             scale::chooseVictims over the rest (priority, load, newest)
//
// The share rule (ShareRule) picks the GPU share new replicas hold, from what the deployment
// measured: a share s stretches a replica's prefill by 1/s (prefill is compute-bound), so s is
// the smallest allowed share on which
//   - the deployment's slow prompts keep half of the TTFT target:   2 × P99 × f / s <= sloTtft
//   - a prompt waits past what a slow prompt leaves of the target (sloTtft − P99 × f / s) with
//     at most 1 − sloTarget probability, a replica's prompts (λ / n per second, P × f / s each)
//     taken as an M/G/1 queue whose service variability comes from P99 / P
//     (scale/queueing.h)
//   - where memory shrinks with the share (kvScale), a replica's part of the requests in
//     flight (Little's law) still fits at the concurrency target utilisation:
//       C × kvScale(s) / kvScale(f) × uc >= λ × S / n
// with λ the arrival rate, P and P99 the mean and 99th-percentile prefill time measured on the
// ready replicas, f their mean GPU share (so P × f is a prefill on a whole GPU), C their mean
// maxConcurrency, S the mean service time, uc the concurrency target utilisation and n the
// replicas after this step. None fits: a whole GPU. Without λ, P, a ready replica or an SLO
// there is nothing to size from and the rule says nothing: the caller places what the model's
// profile asks for.

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
  std::string reason;
};

// The share for new replicas when the deployment will have `replicasAfter` of them, or
// nullopt when the signals cannot tell.
std::optional<ShareDecision> chooseShare(const DeploymentSignals& signals, int replicasAfter,
                                         const ShareRule& rule);

struct ReconcileOptions {
  int limit = INT_MAX;             // the most replicas the fleet can hold
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
