#pragma once
// Capacity planning (`tessera plan`, docs/fleet-simulator.md "Planning"): the smallest fleet
// that meets every deployment's SLO target when its traffic is replayed under a policy.
//
// For each candidate GPU type the planner searches the GPU count of a fleet of that type alone
// (nodes of up to gpusPerNode cards): it doubles the count until every deployment meets the
// target, then bisects between the last count that failed and the first that met. The count it
// reports therefore met the target when replayed and one GPU fewer did not (both were run); the
// simulation is not guaranteed monotone in the count, so a smaller fleet that happens to meet it
// may exist below the last failure. Fleets mixing types are not searched.
//
// Threading: plan() runs its simulations in the calling thread.

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "sim/fleet.h"

namespace tessera::sim {

struct PlanOptions {
  std::vector<std::string> gpuTypes = {"H100-80GB", "A100-80GB", "L40S"};
  std::string policy = "tessera";
  int gpusPerNode = 8;
  int maxGpus = 1024;  // the search gives up above this
  double sloTarget = 0.99;
};

struct PlanOption {
  std::string gpuType;
  bool feasible = false;
  std::string why;  // when not feasible: a model that does not fit, or maxGpus not enough
  int gpus = 0;     // the smallest count found that meets every SLO
  double pricePerGpuHour = 0;
  double costPerHour = 0;     // gpus x price: the fleet's cost
  FleetPolicyResult atCount;  // the replay at `gpus`
  // One GPU fewer: the deployment that misses first and its attainment there (the type's
  // marginal value: what the last card buys).
  std::string bindingDeployment;
  double bindingAttainment = 0;
  double attainmentOneFewer = 0;  // over all requests
  int runs = 0;                   // simulations the search took
};

struct Plan {
  std::string policy;
  std::vector<PlanOption> options;  // per GPU type, in the order asked
  std::optional<std::size_t> best;  // the cheapest feasible option
};

// The fleet of `spec` is replaced by each candidate; deployments keep their models, SLOs and
// traffic (their GPU type is the candidate's).
Result<Plan> plan(const FleetSpec& spec, const model::GpuCatalog& catalog,
                  const PlanOptions& options);

// `spec` with a fleet of `gpus` cards of `gpuType` (full nodes of gpusPerNode, then the rest on
// one more) and every deployment on that type.
FleetSpec withFleet(const FleetSpec& spec, const std::string& gpuType, int gpus, int gpusPerNode);

// Whether every deployment of a replay met the target.
bool meetsEverySlo(const FleetPolicyResult& r, double sloTarget);

}  // namespace tessera::sim
