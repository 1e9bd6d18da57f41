// Two simple baselines.
//
// weighted: desired = ceil(current × max(gpu / gpuUtilization, queue / queueDepth))
//   gpu   = mean gpuUtilization over ready replicas reporting it
//   queue = mean waiting per ready replica reporting it
//   args: gpuUtilization 0.7 (0..1], queueDepth 10 (> 0)
//   With neither signal (no ready replica reports either) the count stays at current.
//
// littles-law: desired = ceil(arrivalRate × meanService / (maxConcurrency × targetUtilization))
//   maxConcurrency = the `maxConcurrency` argument, else the mean over loading and ready
//   replicas that know theirs; args: targetUtilization 0.8 (0..1], maxConcurrency 0 (= from
//   the replicas). Without a rate, a service time or a concurrency the count stays at current.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scale/number_text.h"
#include "scale/recommenders.h"
#include "scale/signal_stats.h"

namespace tessera::scale {
namespace {

class WeightedRecommender final : public Recommender {
 public:
  WeightedRecommender(double gpuTarget, double queueTarget)
      : gpuTarget_(gpuTarget), queueTarget_(queueTarget) {}
  std::string_view name() const override { return "weighted"; }

  Recommendation recommend(const DeploymentSignals& signals, int current) override {
    const std::optional<double> gpu = sumOverReady(signals, &ReplicaSignals::gpuUtilization).mean();
    const std::optional<double> queue = sumOverReady(signals, &ReplicaSignals::waiting).mean();
    if (!gpu && !queue) return {current, "weighted: no GPU or queue signal; no change"};
    const double factor =
        std::max(gpu ? *gpu / gpuTarget_ : 0.0, queue ? *queue / queueTarget_ : 0.0);
    const int replicas = static_cast<int>(std::ceil(current * factor));
    return {replicas, "weighted: gpu " + (gpu ? shortNumber(*gpu) : "-") + "/" +
                          shortNumber(gpuTarget_) + ", queue " +
                          (queue ? shortNumber(*queue) : "-") + "/" + shortNumber(queueTarget_) +
                          " → " + std::to_string(replicas)};
  }

 private:
  double gpuTarget_;
  double queueTarget_;
};

class LittlesLawRecommender final : public Recommender {
 public:
  LittlesLawRecommender(double targetUtilization, double maxConcurrency)
      : targetUtilization_(targetUtilization), maxConcurrency_(maxConcurrency) {}
  std::string_view name() const override { return "littles-law"; }

  Recommendation recommend(const DeploymentSignals& signals, int current) override {
    const std::optional<double> concurrency =
        maxConcurrency_ > 0 ? std::optional<double>(maxConcurrency_) : meanMaxConcurrency(signals);
    if (!signals.arrivalRatePerSec || !signals.meanServiceMs || !concurrency) {
      return {current, "littles-law: no arrival rate, service time or concurrency; no change"};
    }
    const double demand = *signals.arrivalRatePerSec * *signals.meanServiceMs / 1000.0;
    const double perReplica = *concurrency * targetUtilization_;
    const int replicas = static_cast<int>(std::ceil(demand / perReplica - 1e-9));
    return {replicas, "littles-law: demand " + shortNumber(demand) + " / " +
                          shortNumber(perReplica) + " per replica → " + std::to_string(replicas)};
  }

 private:
  double targetUtilization_;
  double maxConcurrency_;
};

}  // namespace

Result<std::unique_ptr<Recommender>> makeWeightedRecommender(const RecommenderArgs& args) {
  ArgReader r("weighted", args);
  const double gpu = r.fraction("gpuUtilization", 0.7);
  const double queue = r.positive("queueDepth", 10);
  TESSERA_RETURN_IF_ERROR(r.finish());
  return std::unique_ptr<Recommender>(std::make_unique<WeightedRecommender>(gpu, queue));
}

Result<std::unique_ptr<Recommender>> makeLittlesLawRecommender(const RecommenderArgs& args) {
  ArgReader r("littles-law", args);
  const double utilization = r.fraction("targetUtilization", 0.8);
  const double concurrency = r.nonNegative("maxConcurrency", 0);
  TESSERA_RETURN_IF_ERROR(r.finish());
  return std::unique_ptr<Recommender>(
      std::make_unique<LittlesLawRecommender>(utilization, concurrency));
}

}  // namespace tessera::scale
