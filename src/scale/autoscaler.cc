// Autoscaler: recommender → cold-start guard → governor → victims, warm pool.
//
// Cold-start guard (coldStartAware, for recommenders that do not count loading replicas
// themselves): a scale-up records its target T and the arrival rate λ0. While any replica is
// loading, a recommendation above current is capped at max(current, ceil(T × g)), where g is
// the demand growth since: λ/λ0 when both rates are known (1 while within 10 %), otherwise
// 1 unless the recommendation itself exceeds T by more than 10 %. So a backlog that builds
// while the replicas load does not add more replicas; more demand does. Once nothing is
// loading the record is dropped.

#include <algorithm>
#include <cmath>

#include "scale/governor.h"
#include "scale/signal_stats.h"
#include "scale/victims.h"

namespace tessera::scale {

std::string_view policyTypeName(PolicyType type) {
  return type == PolicyType::kPods ? "Pods" : "Percent";
}

std::optional<PolicyType> parsePolicyType(std::string_view name) {
  for (PolicyType t : {PolicyType::kPods, PolicyType::kPercent}) {
    if (name == policyTypeName(t)) return t;
  }
  return std::nullopt;
}

namespace {

constexpr double kDemandTolerance = 0.1;

// The configured behaviour, with the recommender's scale-down policies and window where it
// names none.
Behavior behaviorFor(Behavior b, const Recommender& recommender) {
  if (b.scaleDown.policies.empty()) b.scaleDown.policies = recommender.defaultScaleDownPolicies();
  if (!b.scaleDown.stabilizationWindowSeconds) {
    b.scaleDown.stabilizationWindowSeconds = recommender.defaultScaleDownWindowSeconds();
  }
  return b;
}

class GovernedAutoscaler final : public Autoscaler {
 public:
  GovernedAutoscaler(const AutoscalerConfig& config, std::unique_ptr<Recommender> recommender)
      : config_(config),
        recommender_(std::move(recommender)),
        governor_(behaviorFor(config.behavior, *recommender_), config.minReplicas,
                  config.maxReplicas) {}

  Decision evaluate(const DeploymentSignals& signals) override {
    const PhaseCounts counts = countPhases(signals);
    const int current = counts.serving();
    const Recommendation rec = recommender_->recommend(signals, current);
    // A window the configuration leaves to the recommender follows what it has measured since.
    if (!config_.behavior.scaleDown.stabilizationWindowSeconds) {
      if (const std::optional<int> w = recommender_->defaultScaleDownWindowSeconds()) {
        governor_.setScaleDownWindowSeconds(*w);
      }
    }

    Decision d;
    d.recommendedReplicas = rec.replicas;
    d.reason = rec.reason;
    int recommended = std::max(rec.replicas, 0);
    if (counts.loading == 0) lastScaleUp_.reset();
    if (config_.coldStartAware && !recommender_->accountsForLoading() && counts.loading > 0 &&
        recommended > current && lastScaleUp_) {
      const int cap = std::max(current, coveredByLoading(signals, recommended));
      if (recommended > cap) {
        d.reason += "; cold start: " + std::to_string(counts.loading) + " loading cover " +
                    std::to_string(cap);
        recommended = cap;
      }
    }

    const GovernorResult g = governor_.normalize(signals.nowMs, current, recommended);
    d.desiredReplicas = g.replicas;
    if (!g.reason.empty()) d.reason += "; " + g.reason;
    if (d.desiredReplicas > current) {
      lastScaleUp_ = ScaleUp{recommended, signals.arrivalRatePerSec};
    }
    if (d.desiredReplicas < current) {
      d.victims = chooseVictims(signals.replicas, current - d.desiredReplicas);
    }
    d.warmReplicas =
        std::min(config_.warmReplicas, std::max(0, config_.maxReplicas - d.desiredReplicas));
    return d;
  }

 private:
  struct ScaleUp {
    int target;
    std::optional<double> arrivalRatePerSec;
  };

  // The count the loading replicas were asked for, grown with demand since.
  int coveredByLoading(const DeploymentSignals& signals, int recommended) const {
    const ScaleUp& last = *lastScaleUp_;
    if (last.arrivalRatePerSec && signals.arrivalRatePerSec && *last.arrivalRatePerSec > 0) {
      const double growth = *signals.arrivalRatePerSec / *last.arrivalRatePerSec;
      if (growth <= 1 + kDemandTolerance) return last.target;
      return static_cast<int>(std::ceil(last.target * growth - 1e-9));
    }
    if (recommended <= last.target * (1 + kDemandTolerance)) return last.target;
    return recommended;
  }

  AutoscalerConfig config_;
  std::unique_ptr<Recommender> recommender_;
  Governor governor_;
  std::optional<ScaleUp> lastScaleUp_;
};

}  // namespace

Result<void> validateConfig(const AutoscalerConfig& config) {
  if (config.minReplicas < 0) {
    return fail(
        Error::invalid("minReplicas = " + std::to_string(config.minReplicas) + " must be >= 0"));
  }
  if (config.maxReplicas < 1) {
    return fail(
        Error::invalid("maxReplicas = " + std::to_string(config.maxReplicas) + " must be >= 1"));
  }
  if (config.minReplicas > config.maxReplicas) {
    return fail(Error::invalid("minReplicas = " + std::to_string(config.minReplicas) +
                               " is above maxReplicas = " + std::to_string(config.maxReplicas)));
  }
  if (config.warmReplicas < 0) {
    return fail(
        Error::invalid("warmReplicas = " + std::to_string(config.warmReplicas) + " must be >= 0"));
  }
  if (config.syncPeriodSeconds <= 0) {
    return fail(Error::invalid("syncPeriodSeconds = " + std::to_string(config.syncPeriodSeconds) +
                               " must be > 0"));
  }
  TESSERA_RETURN_IF_ERROR(validateBehavior(config.behavior));
  TESSERA_RETURN_IF_ERROR(makeRecommender(config.recommender, config.args));
  return {};
}

Result<std::unique_ptr<Autoscaler>> Autoscaler::create(const AutoscalerConfig& config) {
  TESSERA_RETURN_IF_ERROR(validateConfig(config));
  auto recommender = makeRecommender(config.recommender, config.args);
  if (!recommender) return fail(recommender.error());
  return std::unique_ptr<Autoscaler>(
      std::make_unique<GovernedAutoscaler>(config, std::move(*recommender)));
}

}  // namespace tessera::scale
