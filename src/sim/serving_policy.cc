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

class Oracle final : public ServingController {
 public:
  Oracle(std::vector<int> demand, int intervalSeconds, Millis leadMs, Millis syncPeriodMs,
         int maxReplicas)
      : demand_(std::move(demand)),
        intervalMs_(Millis{intervalSeconds} * 1000),
        leadMs_(leadMs),
        syncMs_(syncPeriodMs),
        max_(maxReplicas) {}
  Millis syncPeriodMs() const override { return syncMs_; }
  int initialReplicas() const override { return wanted(0); }
  scale::Decision evaluate(const scale::DeploymentSignals& s) override {
    scale::Decision d;
    d.desiredReplicas = d.recommendedReplicas = wanted(s.nowMs);
    d.reason = "oracle: demand of the intervals starting before a new replica is ready";
    return d;
  }

 private:
  // The largest demand of the intervals that overlap [now, now + lead + sync]: a replica asked
  // for now serves from now + lead, and the next chance to ask comes one sync later.
  int wanted(Millis nowMs) const {
    const auto first = static_cast<std::size_t>(nowMs / intervalMs_);
    const auto last = static_cast<std::size_t>((nowMs + leadMs_ + syncMs_) / intervalMs_);
    int n = 0;
    for (std::size_t k = first; k <= last && k < demand_.size(); ++k) n = std::max(n, demand_[k]);
    return std::clamp(n, 1, max_);
  }

  std::vector<int> demand_;
  Millis intervalMs_;
  Millis leadMs_;
  Millis syncMs_;
  int max_;
};

}  // namespace

namespace {

// GPU-seconds each interval's arrivals (before untilUs) need on an unloaded replica.
std::vector<double> intervalWork(const ServingTrace& trace, const ReplicaPerf& perf,
                                 const DemandOptions& o, Micros untilUs, bool prefillOnly) {
  const Micros intervalUs = Micros{o.intervalSeconds} * 1'000'000;
  const auto intervals = static_cast<std::size_t>(trace.spanUs() / intervalUs + 1);
  std::vector<double> work(intervals, 0.0);
  const double batch = std::max(1, o.referenceBatch);
  for (const ServingRequest& r : trace.requests) {
    if (r.arrivalUs >= untilUs) continue;
    const double out = std::max(1, r.outputTokens);
    const double context = r.inputTokens + out / 2;
    const double perToken =
        std::max((perf.weightsBytes / batch + context * perf.kvBytesPerToken) / perf.bytesPerSec,
                 (perf.flopsPerToken + perf.attentionFlopsPerPair * context) / perf.flopsPerSec);
    work[static_cast<std::size_t>(r.arrivalUs / intervalUs)] +=
        perf.prefillSeconds(r.inputTokens) + (prefillOnly ? 0 : (out - 1) * perToken);
  }
  return work;
}

}  // namespace

std::vector<int> replicaDemand(const ServingTrace& trace, const ReplicaPerf& perf,
                               const DemandOptions& o) {
  const std::vector<double> work =
      intervalWork(trace, perf, o, std::numeric_limits<Micros>::max(), false);
  std::vector<int> demand(work.size());
  const double capacity = o.intervalSeconds * o.targetUtilization;
  for (std::size_t k = 0; k < work.size(); ++k) {
    demand[k] = std::max(1, static_cast<int>(std::ceil(work[k] / capacity - 1e-9)));
  }
  return demand;
}

double peakPrefillDemand(const ServingTrace& trace, const ReplicaPerf& perf, const DemandOptions& o,
                         Micros untilUs) {
  double peak = 0;
  for (double w : intervalWork(trace, perf, o, untilUs, true)) {
    peak = std::max(peak, w / (o.intervalSeconds * o.targetUtilization));
  }
  return peak;
}

std::unique_ptr<ServingController> makeStaticPeak(const std::vector<int>& demand, int maxReplicas) {
  int peak = 1;
  for (int n : demand) peak = std::max(peak, n);
  return std::make_unique<StaticPeak>(std::min(peak, maxReplicas));
}

std::unique_ptr<ServingController> makeOracle(std::vector<int> demand, int intervalSeconds,
                                              Millis leadMs, Millis syncPeriodMs, int maxReplicas) {
  return std::make_unique<Oracle>(std::move(demand), intervalSeconds, leadMs, syncPeriodMs,
                                  maxReplicas);
}

}  // namespace tessera::sim
