#pragma once
// The two yardsticks every serving run is reported against (docs/serving-simulator.md,
// "References"):
//
//   clairvoyant   knows every arrival. It plans a replica count per sync slot, asks for each
//                 slot's replicas one cold start (the slowest the fleet can see) before the slot
//                 begins, and searches for the plan with the fewest GPU-hours that still reaches
//                 the SLO target, with the simulator in the loop: the fewest replicas held
//                 constant that meet it (doubling from the demand estimate's peak, up to the
//                 whole fleet, which when it misses means nothing will; then bisection), the
//                 demand's shape under that constant, then one replica
//                 fewer over blocks of slots, breadth first, halving the blocks that fail. It does
//                 that for every GPU share the model fits on and keeps the cheapest. Guarantee:
//                 the plan it returns was simulated and meets the target, or the whole fleet
//                 does not (infeasible says why). The plan is a local optimum of that search, not
//                 a proven minimum: the bound below says how far from the best possible any
//                 policy is.
//
//   lower bound   GPU-hours no policy can go below while meeting the target (derivation in the
//                 .cc file and the doc). Every request met needs its prefill computed before its
//                 deadline, and needs a replica that exists (placed, at least one cold start
//                 before it serves) from before its deadline to its first token; a policy may
//                 miss (1 - target) of the requests, and the bound allows it to drop the ones
//                 that lower it most.
//
// Threading: pure functions of their arguments; they may run on any thread.

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sim/serving_run.h"

namespace tessera::sim {

struct ServingLowerBound {
  // nullopt when no policy can reach the target: more requests can never run anywhere (their
  // context exceeds the model's window or a whole GPU's KV cache) than the target allows.
  std::optional<double> gpuHours;
  std::string reason;           // why there is no bound, when there is none
  int requests = 0;             // measured
  int neverServable = 0;        // cannot run on a whole GPU of this type
  int allowedMisses = 0;        // floor(requests x (1 - target)) - neverServable
  double minShare = 0;          // the smallest GPU share the model's weights fit on
  double minColdStartS = 0;     // engine start-up + weights from host memory
  double workGpuHours = 0;      // prefill compute of every servable request
  double coverageGpuHours = 0;  // minShare x time a replica must exist
};

// `whole`: the model's whole-GPU replica; options.actual corrects it to the truth.
ServingLowerBound servingLowerBound(const ServingTrace& trace, const ReplicaPerf& whole,
                                    const ServingOptions& options, double target);

struct ClairvoyantOptions {
  double target = 0.99;
  int maxRuns = 60;  // simulations per GPU share searched (raise + lower)
};

// The clairvoyant reference as a policy result ("clairvoyant"); `detail` names the share and
// the runs the search took. Fails only on errors (a GPU type the catalogue lacks).
Result<ServingPolicyResult> runClairvoyant(const ServingTrace& trace,
                                           const model::GpuCatalog& catalog,
                                           const ServingOptions& options,
                                           const ClairvoyantOptions& co = {});

}  // namespace tessera::sim
