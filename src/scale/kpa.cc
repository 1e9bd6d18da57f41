// Knative's KPA (knative/serving pkg/autoscaler/scaling/autoscaler.go), on concurrency.
//
// Arguments:
//   containerConcurrency   per-replica concurrency limit; 0 (default) = the replicas' mean
//                          maxConcurrency, or 100 when unknown (Knative's unset default)
//   targetUtilization      0.7: target per replica = containerConcurrency × 0.7
//   stableWindowSeconds    60
//   panicWindowPercentage  10 (% of the stable window: 6 s)
//   panicThreshold         2.0 (Knative's 200 %)
//   maxScaleUpRate         1000
//   maxScaleDownRate       2
//   scaleDownDelaySeconds  0: the result is the maximum over that window
//
// Every call records one sample: total concurrency = Σ (running + waiting) over the ready
// replicas that report either, scaled up to all ready replicas (Knative's queue-proxy counts
// queued and running requests), plus bufferedRequests (its activator's). Samples older than
// the stable window are dropped.
//   ready = max(1, ready replicas); target = containerConcurrency × targetUtilization
//   dspc = ceil(mean of samples in the stable window / target)
//   dppc = ceil(mean of samples in the panic window / target)
//   each clamped to [floor(ready / maxScaleDownRate), ceil(maxScaleUpRate × ready)]
//   panic starts (or is extended) when dppc / ready >= panicThreshold and ends once a whole
//   stable window has passed since it was last over the threshold;
//   in panic: max(stable, panic) and never below the highest count of this panic.
// Knative averages 1-s buckets and ticks every 2 s; here a window averages the samples taken
// by the calls within it, so call evaluate every 2 s (syncPeriodSeconds 2) for Knative's
// resolution. No sample at all (no ready replica reports) → current.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

#include "scale/number_text.h"
#include "scale/recommenders.h"
#include "scale/signal_stats.h"

namespace tessera::scale {
namespace {

struct KpaParams {
  double containerConcurrency = 0;
  double targetUtilization = 0.7;
  double stableWindowSeconds = 60;
  double panicWindowPercentage = 10;
  double panicThreshold = 2.0;
  double maxScaleUpRate = 1000;
  double maxScaleDownRate = 2;
  double scaleDownDelaySeconds = 0;
};

class KpaRecommender final : public Recommender {
 public:
  explicit KpaRecommender(KpaParams p) : p_(p) {}
  std::string_view name() const override { return "kpa"; }

  Recommendation recommend(const DeploymentSignals& signals, int current) override {
    const Millis now = signals.nowMs;
    const Millis stableMs = static_cast<Millis>(p_.stableWindowSeconds * 1000);
    const Millis panicMs = static_cast<Millis>(stableMs * p_.panicWindowPercentage / 100);

    int readyCount = 0;
    int reporting = 0;
    double observed = 0;
    for (const ReplicaSignals& r : signals.replicas) {
      if (r.phase != ReplicaPhase::kReady) continue;
      ++readyCount;
      if (!r.running && !r.waiting) continue;
      ++reporting;
      observed += r.running.value_or(0) + r.waiting.value_or(0);
    }
    // Requests buffered in front of the replicas count as Knative's activator reports them.
    if (reporting > 0 || signals.bufferedRequests) {
      const double onReplicas = reporting > 0 ? observed * readyCount / reporting : 0;
      samples_.push_back({now, onReplicas + signals.bufferedRequests.value_or(0)});
    }
    while (!samples_.empty() && samples_.front().atMs <= now - stableMs) samples_.pop_front();
    if (samples_.empty()) return {current, "kpa: no concurrency samples; no change"};

    const double stable = windowMean(now - stableMs);
    const double panic = windowMean(now - panicMs);
    const double concurrency = p_.containerConcurrency > 0
                                   ? p_.containerConcurrency
                                   : meanMaxConcurrency(signals).value_or(100);
    const double target = concurrency * p_.targetUtilization;
    const double ready = std::max(1, readyCount);
    const double maxUp = std::ceil(p_.maxScaleUpRate * ready);
    const double maxDown = std::floor(ready / p_.maxScaleDownRate);
    const double dspc = std::ceil(stable / target - 1e-9);
    const double dppc = std::ceil(panic / target - 1e-9);
    const int desiredStable = static_cast<int>(std::min(std::max(dspc, maxDown), maxUp));
    const int desiredPanic = static_cast<int>(std::min(std::max(dppc, maxDown), maxUp));

    const bool over = dppc / ready >= p_.panicThreshold;
    if (over) {
      panicSinceMs_ = now;
    } else if (panicSinceMs_ && *panicSinceMs_ + stableMs < now) {
      panicSinceMs_.reset();
      maxPanicPods_ = 0;
    }
    int desired = desiredStable;
    if (panicSinceMs_) {
      desired = std::max(desired, desiredPanic);
      if (desired > maxPanicPods_) {
        maxPanicPods_ = desired;
      } else {
        desired = maxPanicPods_;
      }
    }
    std::string reason = "kpa: stable " + shortNumber(stable) + " panic " + shortNumber(panic) +
                         " / target " + shortNumber(target) + (panicSinceMs_ ? " (panic)" : "") +
                         " → " + std::to_string(desired);
    if (p_.scaleDownDelaySeconds > 0) {
      const Millis delayMs = static_cast<Millis>(p_.scaleDownDelaySeconds * 1000);
      desiredHistory_.push_back({now, static_cast<double>(desired)});
      while (desiredHistory_.front().atMs <= now - delayMs) desiredHistory_.pop_front();
      for (const Sample& s : desiredHistory_)
        desired = std::max(desired, static_cast<int>(s.value));
    }
    return {desired, reason};
  }

 private:
  struct Sample {
    Millis atMs;
    double value;
  };

  double windowMean(Millis cutoff) const {
    double sum = 0;
    int n = 0;
    for (const Sample& s : samples_) {
      if (s.atMs <= cutoff) continue;
      sum += s.value;
      ++n;
    }
    return n > 0 ? sum / n : 0;
  }

  KpaParams p_;
  std::deque<Sample> samples_;
  std::deque<Sample> desiredHistory_;
  std::optional<Millis> panicSinceMs_;
  int maxPanicPods_ = 0;
};

}  // namespace

Result<std::unique_ptr<Recommender>> makeKpaRecommender(const RecommenderArgs& args) {
  ArgReader r("kpa", args);
  KpaParams p;
  p.containerConcurrency = r.nonNegative("containerConcurrency", p.containerConcurrency);
  p.targetUtilization = r.fraction("targetUtilization", p.targetUtilization);
  p.stableWindowSeconds = r.positive("stableWindowSeconds", p.stableWindowSeconds);
  p.panicWindowPercentage = r.positive("panicWindowPercentage", p.panicWindowPercentage);
  p.panicThreshold = r.positive("panicThreshold", p.panicThreshold);
  p.maxScaleUpRate = r.atLeastOne("maxScaleUpRate", p.maxScaleUpRate);
  p.maxScaleDownRate = r.atLeastOne("maxScaleDownRate", p.maxScaleDownRate);
  p.scaleDownDelaySeconds = r.nonNegative("scaleDownDelaySeconds", p.scaleDownDelaySeconds);
  TESSERA_RETURN_IF_ERROR(r.finish());
  if (p.panicWindowPercentage > 100) {
    return fail(Error::invalid(
        "kpa argument 'panicWindowPercentage' = " + shortNumber(p.panicWindowPercentage) +
        " is out of range (must be in (0, 100])"));
  }
  return std::unique_ptr<Recommender>(std::make_unique<KpaRecommender>(p));
}

}  // namespace tessera::scale
