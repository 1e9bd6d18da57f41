#include "sim/serving_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::sim {
namespace {

class StaticPeak final : public ServingController {
 public:
  explicit StaticPeak(int replicas) : replicas_(replicas) {}
  Millis syncPeriodMs() const override { return 15'000; }
  int initialReplicas() const override { return replicas_; }
  scale::Decision evaluate(const scale::DeploymentSignals&) override {
    scale::Decision d;
    d.desiredReplicas = d.recommendedReplicas = replicas_;
    d.reason = "static: the trace's peak demand";
    return d;
  }

 private:
  int replicas_;
};

class Planned final : public ServingController {
 public:
  Planned(std::vector<int> plan, Millis slotMs, Millis leadMs, int maxReplicas)
      : plan_(std::move(plan)),
        slotMs_(std::max<Millis>(1, slotMs)),
        leadMs_(leadMs),
        max_(maxReplicas) {}
  Millis syncPeriodMs() const override { return slotMs_; }
  int initialReplicas() const override { return wanted(0); }
  scale::Decision evaluate(const scale::DeploymentSignals& s) override {
    scale::Decision d;
    d.desiredReplicas = d.recommendedReplicas = wanted(s.nowMs);
    d.reason = "planned: the most any slot wants before a replica asked for now is ready";
    return d;
  }

 private:
  int wanted(Millis nowMs) const {
    if (plan_.empty()) return 0;
    const auto first = static_cast<std::size_t>(nowMs / slotMs_);
    const auto last = static_cast<std::size_t>((nowMs + leadMs_ + slotMs_) / slotMs_);
    int n = 0;
    for (std::size_t k = first; k <= last; ++k)
      n = std::max(n, plan_[std::min(k, plan_.size() - 1)]);
    return std::clamp(n, 0, max_);
  }

  std::vector<int> plan_;
  Millis slotMs_;
  Millis leadMs_;
  int max_;
};

}  // namespace

namespace {

// GPU-seconds each interval's arrivals need on an unloaded replica.
std::vector<double> intervalWork(const ServingTrace& trace, const ReplicaPerf& perf,
                                 const DemandOptions& o) {
  const Micros intervalUs = Micros{o.intervalSeconds} * 1'000'000;
  const auto intervals = static_cast<std::size_t>(trace.spanUs() / intervalUs + 1);
  std::vector<double> work(intervals, 0.0);
  for (const ServingRequest& r : trace.requests) {
    const double out = std::max(1, r.outputTokens);
    const double perToken = decodeSecondsPerToken(perf, r.inputTokens + out / 2, o.referenceBatch);
    work[static_cast<std::size_t>(r.arrivalUs / intervalUs)] +=
        perf.prefillSeconds(r.inputTokens) + (out - 1) * perToken;
  }
  return work;
}

}  // namespace

double decodeSecondsPerToken(const ReplicaPerf& perf, double contextTokens, int batch) {
  const double b = std::max(1, batch);
  return std::max(
      (perf.weightsBytes / b + contextTokens * perf.kvBytesPerToken) / perf.bytesPerSec,
      (perf.flopsPerToken + perf.attentionFlopsPerPair * contextTokens) / perf.flopsPerSec);
}

std::vector<int> replicaDemand(const ServingTrace& trace, const ReplicaPerf& perf,
                               const DemandOptions& o) {
  const std::vector<double> work = intervalWork(trace, perf, o);
  std::vector<int> demand(work.size());
  const double capacity = o.intervalSeconds * o.targetUtilization;
  for (std::size_t k = 0; k < work.size(); ++k) {
    demand[k] = std::max(1, static_cast<int>(std::ceil(work[k] / capacity - 1e-9)));
  }
  return demand;
}

std::unique_ptr<ServingController> makeStaticPeak(const std::vector<int>& demand, int maxReplicas) {
  int peak = 1;
  for (int n : demand) peak = std::max(peak, n);
  return std::make_unique<StaticPeak>(std::min(peak, maxReplicas));
}

std::unique_ptr<ServingController> makePlanned(std::vector<int> plan, Millis slotMs, Millis leadMs,
                                               int maxReplicas) {
  return std::make_unique<Planned>(std::move(plan), slotMs, leadMs, maxReplicas);
}

}  // namespace tessera::sim
