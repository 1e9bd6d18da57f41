// The autoscaled policies of the serving simulation: scale::Autoscaler instances with the
// baseline configurations of the issue. No scaling logic lives here.

#include "sim/serving_policy.h"

#include <algorithm>
#include <cmath>

namespace tessera::sim {
namespace {

class Autoscaled final : public ServingController {
 public:
  Autoscaled(const scale::AutoscalerConfig& config, std::unique_ptr<scale::Autoscaler> a,
             int initial)
      : config_(config), autoscaler_(std::move(a)), initial_(initial) {}
  Millis syncPeriodMs() const override { return Millis{config_.syncPeriodSeconds} * 1000; }
  int initialReplicas() const override {
    return std::clamp(initial_, std::max(1, config_.minReplicas), config_.maxReplicas);
  }
  scale::Decision evaluate(const scale::DeploymentSignals& signals) override {
    return autoscaler_->evaluate(signals);
  }
  int minReplicas() const override { return config_.minReplicas; }

 private:
  scale::AutoscalerConfig config_;
  std::unique_ptr<scale::Autoscaler> autoscaler_;
  int initial_;
};

}  // namespace

Result<scale::AutoscalerConfig> autoscalerConfigFor(std::string_view policy) {
  scale::AutoscalerConfig c;
  c.recommender = std::string(policy);
  c.minReplicas = 1;
  c.maxReplicas = 10;
  if (policy == "hpa") {
    c.args = {{"queuePerReplica", 5}, {"kvCacheUsage", 0.8}};
    c.minReplicas = 2;
    c.behavior.scaleDown.stabilizationWindowSeconds = 300;
    c.behavior.scaleDown.policies = {{scale::PolicyType::kPods, 1, 120}};
  } else if (policy == "weighted") {
    c.behavior.scaleUp.stabilizationWindowSeconds = 300;
  } else if (policy == "kpa") {
    c.syncPeriodSeconds = 2;  // Knative's tick: its 6 s panic window needs it
  } else if (policy != "littles-law" && policy != "tessera") {
    std::string message = "not an autoscaled policy: ";
    message += policy;
    return fail(Error::invalid(std::move(message)));
  }
  return c;
}

Result<void> overrideSetting(scale::AutoscalerConfig& c, const std::string& key, double value) {
  // Whole numbers within int's range only (a cast of one beyond it is undefined).
  const bool integral = std::abs(value) < 1e9 && value == std::floor(value);
  const int whole = integral ? static_cast<int>(value) : 0;
  if (key == "minReplicas" || key == "maxReplicas" || key == "warmReplicas" ||
      key == "syncPeriodSeconds" || key == "scaleUpWindowSeconds" ||
      key == "scaleDownWindowSeconds") {
    if (!integral) return fail(Error::invalid(key + " must be a whole number"));
    if (key == "minReplicas") c.minReplicas = whole;
    if (key == "maxReplicas") c.maxReplicas = whole;
    if (key == "warmReplicas") c.warmReplicas = whole;
    if (key == "syncPeriodSeconds") c.syncPeriodSeconds = whole;
    if (key == "scaleUpWindowSeconds") c.behavior.scaleUp.stabilizationWindowSeconds = whole;
    if (key == "scaleDownWindowSeconds") c.behavior.scaleDown.stabilizationWindowSeconds = whole;
    return {};
  }
  if (key == "scaleDownPercent" || key == "scaleDownPeriodSeconds") {
    // One Percent policy for scale-downs (HPA's behavior.scaleDown.policies): at most this
    // share of the replicas at the period's start removed per period (default 60 s).
    if (!integral || whole < 1 || (key == "scaleDownPercent" && whole > 100)) {
      return fail(
          Error::invalid(key + (key == "scaleDownPercent" ? " must be a whole number in [1, 100]"
                                                          : " must be a whole number >= 1")));
    }
    // It replaces the configured scale-down policies with one Percent policy, starting from
    // the recommender's own where it names one (tessera: 50 % per 60 s), else 100 % per 60 s.
    auto& policies = c.behavior.scaleDown.policies;
    if (policies.size() != 1 || policies.front().type != scale::PolicyType::kPercent) {
      std::vector<scale::ScalingPolicy> own;
      if (policies.empty()) {
        if (auto r = scale::makeRecommender(c.recommender, {}))
          own = (*r)->defaultScaleDownPolicies();
      }
      if (own.size() == 1 && own.front().type == scale::PolicyType::kPercent) {
        policies = own;
      } else {
        policies = {{scale::PolicyType::kPercent, 100, 60}};
      }
    }
    if (key == "scaleDownPercent") policies.front().value = whole;
    if (key == "scaleDownPeriodSeconds") policies.front().periodSeconds = whole;
    return {};
  }
  for (auto& [name, v] : c.args) {
    if (name == key) {
      v = value;
      return {};
    }
  }
  c.args.emplace_back(key, value);
  return {};
}

Result<std::unique_ptr<ServingController>> makeAutoscaled(const scale::AutoscalerConfig& config,
                                                          int initialReplicas) {
  auto a = scale::Autoscaler::create(config);
  if (!a)
    return fail(Error::invalid("autoscaler " + config.recommender + ": " + a.error().message));
  return std::unique_ptr<ServingController>(
      std::make_unique<Autoscaled>(config, std::move(*a), initialReplicas));
}

}  // namespace tessera::sim
