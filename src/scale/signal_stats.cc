#include "scale/signal_stats.h"

namespace tessera::scale {

PhaseCounts countPhases(const DeploymentSignals& signals) {
  PhaseCounts counts;
  for (const ReplicaSignals& r : signals.replicas) {
    switch (r.phase) {
      case ReplicaPhase::kReady:
        ++counts.ready;
        break;
      case ReplicaPhase::kLoading:
        ++counts.loading;
        break;
      case ReplicaPhase::kDraining:
        ++counts.draining;
        break;
    }
  }
  return counts;
}

ReadySum sumOverReady(const DeploymentSignals& signals, ReplicaMetric metric) {
  ReadySum out;
  for (const ReplicaSignals& r : signals.replicas) {
    if (r.phase != ReplicaPhase::kReady) continue;
    const std::optional<double>& value = r.*metric;
    if (!value) continue;
    out.sum += *value;
    ++out.reporting;
  }
  return out;
}

std::optional<double> meanMaxConcurrency(const DeploymentSignals& signals) {
  double sum = 0;
  int n = 0;
  for (const ReplicaSignals& r : signals.replicas) {
    if (r.phase == ReplicaPhase::kDraining || r.maxConcurrency <= 0) continue;
    sum += r.maxConcurrency;
    ++n;
  }
  return n > 0 ? std::optional<double>(sum / n) : std::nullopt;
}

}  // namespace tessera::scale
