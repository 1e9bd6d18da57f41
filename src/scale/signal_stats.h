#pragma once
// Small sums and means over a deployment's replicas, shared by the recommenders. Draining
// replicas never count: they are leaving and are not capacity. Internal to the scale module.

#include <optional>

#include "scale/signals.h"

namespace tessera::scale {

using ReplicaMetric = std::optional<double> ReplicaSignals::*;

struct PhaseCounts {
  int ready = 0;
  int loading = 0;
  int draining = 0;
  int serving() const { return ready + loading; }  // what the governor calls current
};

PhaseCounts countPhases(const DeploymentSignals& signals);

// Sum and count of a metric over the ready replicas that report it.
struct ReadySum {
  double sum = 0;
  int reporting = 0;
  std::optional<double> mean() const {
    return reporting > 0 ? std::optional<double>(sum / reporting) : std::nullopt;
  }
};
ReadySum sumOverReady(const DeploymentSignals& signals, ReplicaMetric metric);

// Mean maxConcurrency over loading and ready replicas that know it (> 0).
std::optional<double> meanMaxConcurrency(const DeploymentSignals& signals);

}  // namespace tessera::scale
