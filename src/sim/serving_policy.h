#pragma once
// Who decides the replica count in a serving run. The loop asks a ServingController every sync
// period with the signals it measured (scale::DeploymentSignals, as a scraper fills them) and
// acts on the answer (scale::Decision: desired serving replicas, victims to drain).
//
// Two controllers live here because they are not autoscalers but yardsticks that read the
// trace itself:
//   static-peak  provisions the trace's peak demand from t = 0 and never changes (demand per
//                interval: replicaDemand, the GPU-seconds its arrivals need on an unloaded
//                replica at a reference batch, divided by interval x target utilisation);
//   planned      follows a replica count per slot, asking for each slot's count one lead time
//                before the slot begins (the clairvoyant's plans, sim/serving_reference.h).
// The autoscaled policies (hpa, weighted, littles-law, kpa, tessera) are scale::Autoscaler
// instances (serving_autoscaled.cc); nothing of their logic is here.
//
// Threading: a controller belongs to one run.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "scale/autoscaler.h"
#include "scale/signals.h"
#include "sim/serving_model.h"
#include "sim/serving_trace.h"

namespace tessera::sim {

class ServingController {
 public:
  virtual ~ServingController() = default;
  virtual Millis syncPeriodMs() const = 0;
  // Replicas serving (warm) at t = 0.
  virtual int initialReplicas() const = 0;
  virtual scale::Decision evaluate(const scale::DeploymentSignals& signals) = 0;
  // The fewest replicas it ever asks for (the reconciler's floor, scale::ReconcileOptions).
  virtual int minReplicas() const { return 0; }
};

struct DemandOptions {
  int intervalSeconds = 60;
  double targetUtilization = 0.8;  // busy share a replica is provisioned for
  int referenceBatch = 16;         // decode batch the weights' read is shared over
};

// One decode step's time per sequence on an unloaded replica of `perf` at a decode batch of
// `batch` (the weights' read shared over it) and a context of `contextTokens`: the slower of
// its memory and its compute time. The demand estimate's decode cost.
double decodeSecondsPerToken(const ReplicaPerf& perf, double contextTokens, int batch);

// Replicas needed per interval of the trace (index k covers [k, k+1) x interval), >= 1.
std::vector<int> replicaDemand(const ServingTrace& trace, const ReplicaPerf& perf,
                               const DemandOptions& options);
// The configuration each autoscaled policy runs with (docs/serving-simulator.md, "Policies"):
//   hpa          queuePerReplica 5 and kvCacheUsage 0.8, min 2 / max 10, scale-down window
//                300 s and at most 1 pod per 120 s
//   weighted     the recommender's defaults; a 5-minute scale-up stabilisation window stands
//                in for the 5-minute scale-up cooldown (the contract has no cooldown)
//   kpa          the recommender's defaults, min 1 / max 10, a sync every 2 s (Knative's tick)
//   littles-law, tessera   the recommender's defaults, min 1 / max 10
// Every recommender is scale::makeRecommender's; this only chooses arguments.
Result<scale::AutoscalerConfig> autoscalerConfigFor(std::string_view policy);
// Changes one setting for an experiment: minReplicas, maxReplicas, warmReplicas,
// syncPeriodSeconds, scaleUpWindowSeconds, scaleDownWindowSeconds, or else a recommender
// argument (replaced or added; the recommender validates it when the autoscaler is built).
Result<void> overrideSetting(scale::AutoscalerConfig& config, const std::string& key, double value);
// A controller that asks a scale::Autoscaler built from `config`; it starts with
// `initialReplicas` warm, within [max(1, minReplicas), maxReplicas].
Result<std::unique_ptr<ServingController>> makeAutoscaled(const scale::AutoscalerConfig& config,
                                                          int initialReplicas = 1);

std::unique_ptr<ServingController> makeStaticPeak(const std::vector<int>& demand, int maxReplicas);
// `plan[k]`: replicas wanted during slot k ([k, k+1) x slotMs); a sync every slot. At each sync
// it asks for the most any slot overlapping [now, now + leadMs + slotMs] wants: a replica asked
// for now serves from now + leadMs, and the next chance to ask comes a slot later. Within
// [0, maxReplicas]; past the plan's end, its last slot.
std::unique_ptr<ServingController> makePlanned(std::vector<int> plan, Millis slotMs, Millis leadMs,
                                               int maxReplicas);

}  // namespace tessera::sim
