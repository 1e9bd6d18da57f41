#include "api/requests.h"

#include <algorithm>

namespace tessera::api {

scale::AutoscalerConfig DeploymentSpec::autoscalerConfig() const {
  scale::AutoscalerConfig c;
  c.minReplicas = effectiveMinReplicas();
  c.maxReplicas = effectiveMaxReplicas();
  if (autoscaling) {
    const Autoscaling& a = *autoscaling;
    if (a.recommender) c.recommender = *a.recommender;
    if (a.args) c.args = *a.args;
    c.warmReplicas = a.warmReplicas.value_or(0);
    c.syncPeriodSeconds = a.syncPeriodSeconds.value_or(15);
    if (a.scaleUpStabilizationSeconds) {
      c.behavior.scaleUp.stabilizationWindowSeconds = *a.scaleUpStabilizationSeconds;
    }
    if (a.scaleDownStabilizationSeconds) {
      c.behavior.scaleDown.stabilizationWindowSeconds = *a.scaleDownStabilizationSeconds;
    }
    if (a.scaleDownPolicies) c.behavior.scaleDown.policies = *a.scaleDownPolicies;
  }
  // The deployment's SLO is what tessera's recommender sizes the prefill stage against, as the
  // simulator tells it; an explicit argument wins.
  const bool sloArg = std::any_of(c.args.begin(), c.args.end(),
                                  [](const auto& arg) { return arg.first == "sloTtftMs"; });
  if (c.recommender == "tessera" && sloTtftMs && !sloArg)
    c.args.emplace_back("sloTtftMs", *sloTtftMs);
  return c;
}

}  // namespace tessera::api
