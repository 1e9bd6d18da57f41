#pragma once
// The Kubernetes autoscaling/v2 HPA `behavior` on one deployment's replica count, as
// pkg/controller/podautoscaler/horizontal.go does it (normalizeDesiredReplicasWithBehaviors,
// stabilizeRecommendationWithBehaviors, convertDesiredReplicasWithBehaviorRate, storeScaleEvent):
//
//  1. current outside [min, max] → straight to the bound (no window, no rate limit).
//  2. Every recommendation is kept with its time. Stabilised = current raised to the minimum of
//     the recommendations within the scale-up window (default 0 s) and lowered to the maximum
//     of those within the scale-down window (default 300 s), the new one included.
//  3. Rate limits from the recorded scale events within each policy's period:
//     periodStart = current − added in period + removed in period;
//     up: Pods start + value, Percent ceil(start × (1 + value/100));
//     down: Pods start − value, Percent trunc(start × (1 − value/100)).
//     selectPolicy Max (default) takes the largest change, Min the smallest, Disabled none.
//     Defaults: up max(4 pods, 100 %) per 15 s; down 100 % per 15 s.
//  4. Clamp to [min, max] in the direction of the change.
// A change is recorded as a scale event (the caller is assumed to apply every decision).
//
// Kubernetes counts the scale-up limit from both added and removed replicas in the period
// (upstream since v1.24); its docs' short form (start = current − added) is the same whenever
// the period holds events of one direction only.
//
// Threading: one Governor per deployment, used from one thread.

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "scale/autoscaler.h"

namespace tessera::scale {

// The behavior with every default filled in (windows, policies).
Behavior withDefaults(const Behavior& behavior);

// Errors name the field: windows >= 0, policy values and periods > 0, min <= max, min >= 0.
Result<void> validateBehavior(const Behavior& behavior);

struct GovernorResult {
  int replicas = 0;
  std::string reason;  // what limited the count, e.g. "ScaleUpLimit"; empty when it did not
};

class Governor {
 public:
  Governor(const Behavior& behavior, int minReplicas, int maxReplicas);

  // One sync period: `recommendation` is the recommender's count, `current` the serving
  // replicas now. Records the recommendation and, when the result differs from current, the
  // scale event.
  GovernorResult normalize(Millis nowMs, int current, int recommendation);

  // Replaces the scale-down stabilisation window from the next call on (>= 0; the
  // recommendations already recorded stay, so a longer window sees as far back as they go).
  void setScaleDownWindowSeconds(int seconds);

 private:
  struct Timestamped {
    Millis atMs;
    int value;
  };

  int stabilize(Millis nowMs, int current, int recommendation, std::string& reason);
  int limitRate(Millis nowMs, int current, int desired, std::string& reason) const;
  int scaleUpLimit(Millis nowMs, int current) const;
  int scaleDownLimit(Millis nowMs, int current) const;
  int changeInPeriod(Millis nowMs, int periodSeconds, const std::vector<Timestamped>& events) const;
  void recordEvent(Millis nowMs, int from, int to);

  Behavior behavior_;
  int minReplicas_;
  int maxReplicas_;
  std::vector<Timestamped> recommendations_;
  std::vector<Timestamped> scaleUpEvents_;
  std::vector<Timestamped> scaleDownEvents_;
};

}  // namespace tessera::scale
