#pragma once
// Builders for the scale module's tests: one replica's signals in a line.

#include <optional>
#include <string>
#include <vector>

#include "scale/signals.h"

namespace tessera::scale::testing {

class Rep {
 public:
  explicit Rep(std::string id) { s_.id = std::move(id); }
  Rep& waiting(double v) {
    s_.waiting = v;
    return *this;
  }
  Rep& running(double v) {
    s_.running = v;
    return *this;
  }
  Rep& kv(double v) {
    s_.kvCacheUsage = v;
    return *this;
  }
  Rep& gpu(double v) {
    s_.gpuUtilization = v;
    return *this;
  }
  Rep& maxConcurrency(int v) {
    s_.maxConcurrency = v;
    return *this;
  }
  Rep& priority(int v) {
    s_.priority = v;
    return *this;
  }
  Rep& created(Millis v) {
    s_.createdMs = v;
    return *this;
  }
  Rep& loading(std::optional<Millis> readyAtMs = std::nullopt) {
    s_.phase = ReplicaPhase::kLoading;
    s_.expectedReadyMs = readyAtMs;
    return *this;
  }
  Rep& draining() {
    s_.phase = ReplicaPhase::kDraining;
    return *this;
  }
  operator ReplicaSignals() const { return s_; }  // NOLINT: builder

 private:
  ReplicaSignals s_;
};

inline DeploymentSignals at(Millis nowMs, std::vector<ReplicaSignals> replicas) {
  DeploymentSignals d;
  d.nowMs = nowMs;
  d.replicas = std::move(replicas);
  return d;
}

// n ready replicas named prefix0.. with the same waiting count.
inline std::vector<ReplicaSignals> readyWithWaiting(int n, double waiting,
                                                    const std::string& prefix = "r") {
  std::vector<ReplicaSignals> out;
  for (int i = 0; i < n; ++i) out.push_back(Rep(prefix + std::to_string(i)).waiting(waiting));
  return out;
}

}  // namespace tessera::scale::testing
