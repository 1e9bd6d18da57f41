// The Kubernetes HPA's replica arithmetic for per-pod ("Pods", AverageValue) metrics, as
// pkg/controller/podautoscaler/replica_calculator.go (calcPlainMetricReplicas, groupPods) and
// horizontal.go (computeReplicasForMetrics) do it.
//
// Arguments (at least one metric; none given = queuePerReplica 5):
//   queuePerReplica    target mean `waiting` per replica
//   runningPerReplica  target mean `running` per replica
//   kvCacheUsage       target mean `kvCacheUsage` (0..1]
//   gpuUtilization     target mean `gpuUtilization` (0..1]
//   tolerance          0.1: no change while 1 - tol <= ratio <= 1 + tol
//   scaleUpTolerance, scaleDownTolerance   per direction (KEP-4951), default `tolerance`
//
// Per metric, replicas are grouped as the HPA groups pods: draining = deleted (left out
// entirely), loading = not ready / pending ("ignored"), ready without a sample = missing.
//   ratio = mean(samples of ready replicas) / target
//   no missing and not (loading and ratio > 1): within tolerance → current, else
//     ceil(ratio × readyWithSamples)
//   else fill in: missing get target if ratio < 1 and 0 otherwise; loading get 0 if ratio > 1;
//     ratio' over the n replicas now counted; current if ratio' is within tolerance or has
//     flipped direction; else ceil(ratio' × n), and current if that moves against ratio'.
// Several metrics: the largest count. A metric fails when no ready replica reports it; all
// failed → current; some failed and the rest would scale down → current (scale-up proceeds).
//
// Kubernetes keeps metric values as integer milli-units and truncates the mean to one; this
// works in doubles (differences below 0.001 of a unit).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "scale/number_text.h"
#include "scale/recommenders.h"
#include "scale/signal_stats.h"

namespace tessera::scale {
namespace {

struct HpaMetric {
  std::string name;
  ReplicaMetric field;
  double target;
};

struct MetricProposal {
  int replicas = 0;
  double ratio = 0;  // the usage ratio over replicas with samples
};

class HpaRecommender final : public Recommender {
 public:
  HpaRecommender(std::vector<HpaMetric> metrics, double upTolerance, double downTolerance)
      : metrics_(std::move(metrics)), upTolerance_(upTolerance), downTolerance_(downTolerance) {}

  std::string_view name() const override { return "hpa"; }

  Recommendation recommend(const DeploymentSignals& signals, int current) override {
    int replicas = 0;
    bool any = false;
    std::string chosen;
    std::vector<std::string> failed;
    for (const HpaMetric& m : metrics_) {
      const std::optional<MetricProposal> p = proposal(signals, m, current);
      if (!p) {
        failed.push_back(m.name);
        continue;
      }
      if (!any || p->replicas > replicas) {
        replicas = p->replicas;
        chosen = m.name + " " + shortNumber(p->ratio * m.target) + "/" + shortNumber(m.target) +
                 " → " + std::to_string(p->replicas);
      }
      any = true;
    }
    std::string failedList;
    for (const std::string& f : failed) failedList += (failedList.empty() ? "" : ", ") + f;
    if (!any) return {current, "hpa: no ready replica reports " + failedList + "; no change"};
    if (!failed.empty() && replicas < current) {
      return {current, "hpa: " + failedList + " unavailable; scale-down to " +
                           std::to_string(replicas) + " skipped"};
    }
    return {replicas, "hpa: " + chosen};
  }

 private:
  bool within(double ratio) const {
    return 1.0 - downTolerance_ <= ratio && ratio <= 1.0 + upTolerance_;
  }

  std::optional<MetricProposal> proposal(const DeploymentSignals& signals, const HpaMetric& m,
                                         int current) const {
    int ready = 0;
    int unready = 0;
    int missing = 0;
    double sum = 0;
    for (const ReplicaSignals& r : signals.replicas) {
      if (r.phase == ReplicaPhase::kDraining) continue;
      if (r.phase == ReplicaPhase::kLoading) {
        ++unready;
        continue;
      }
      const std::optional<double>& v = r.*(m.field);
      if (!v) {
        ++missing;
        continue;
      }
      ++ready;
      sum += *v;
    }
    if (ready == 0) return std::nullopt;
    const double ratio = sum / ready / m.target;
    const bool scaleUpWithUnready = unready > 0 && ratio > 1.0;
    if (!scaleUpWithUnready && missing == 0) {
      if (within(ratio)) return MetricProposal{current, ratio};
      return MetricProposal{static_cast<int>(std::ceil(ratio * ready)), ratio};
    }
    int n = ready + missing;
    if (ratio < 1.0) sum += m.target * missing;  // on a scale-up missing replicas count 0
    if (scaleUpWithUnready) n += unready;        // at 0
    const double newRatio = sum / n / m.target;
    if (within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0)) {
      return MetricProposal{current, ratio};
    }
    const int replicas = static_cast<int>(std::ceil(newRatio * n));
    if ((newRatio < 1.0 && replicas > current) || (newRatio > 1.0 && replicas < current)) {
      return MetricProposal{current, ratio};
    }
    return MetricProposal{replicas, ratio};
  }

  std::vector<HpaMetric> metrics_;
  double upTolerance_;
  double downTolerance_;
};

}  // namespace

Result<std::unique_ptr<Recommender>> makeHpaRecommender(const RecommenderArgs& args) {
  ArgReader r("hpa", args);
  std::vector<HpaMetric> metrics;
  if (auto v = r.find("queuePerReplica")) metrics.push_back({"queuePerReplica", nullptr, *v});
  if (auto v = r.find("runningPerReplica")) metrics.push_back({"runningPerReplica", nullptr, *v});
  if (auto v = r.find("kvCacheUsage")) metrics.push_back({"kvCacheUsage", nullptr, *v});
  if (auto v = r.find("gpuUtilization")) metrics.push_back({"gpuUtilization", nullptr, *v});
  const double tolerance = r.nonNegative("tolerance", 0.1);
  const double up = r.nonNegative("scaleUpTolerance", tolerance);
  const double down = r.nonNegative("scaleDownTolerance", tolerance);
  TESSERA_RETURN_IF_ERROR(r.finish());
  if (metrics.empty()) metrics.push_back({"queuePerReplica", nullptr, 5});
  for (HpaMetric& m : metrics) {
    const bool isFraction = m.name == "kvCacheUsage" || m.name == "gpuUtilization";
    if (!std::isfinite(m.target) || m.target <= 0 || (isFraction && m.target > 1)) {
      return fail(Error::invalid("hpa argument '" + m.name + "' = " + shortNumber(m.target) +
                                 " is out of range (must be " + (isFraction ? "in (0, 1]" : "> 0") +
                                 ")"));
    }
    if (m.name == "queuePerReplica") m.field = &ReplicaSignals::waiting;
    if (m.name == "runningPerReplica") m.field = &ReplicaSignals::running;
    if (m.name == "kvCacheUsage") m.field = &ReplicaSignals::kvCacheUsage;
    if (m.name == "gpuUtilization") m.field = &ReplicaSignals::gpuUtilization;
  }
  if (down >= 1) {
    const bool own = std::any_of(args.begin(), args.end(),
                                 [](const auto& a) { return a.first == "scaleDownTolerance"; });
    return fail(Error::invalid(std::string("hpa argument '") +
                               (own ? "scaleDownTolerance" : "tolerance") +
                               "' = " + shortNumber(down) + " is out of range (must be < 1)"));
  }
  return std::unique_ptr<Recommender>(
      std::make_unique<HpaRecommender>(std::move(metrics), up, down));
}

}  // namespace tessera::scale
