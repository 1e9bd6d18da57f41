#pragma once
// The autoscaler of one deployment: a recommender turns signals into a raw replica count; the
// governor applies Kubernetes `behavior` semantics, min/max, the warm pool and cold-start
// awareness; scale-down picks victims and drives them through drain → flush → free → gone.
//
// This header is the contract the serving simulator (sim/serving*) and the server use:
//
//   auto a = scale::Autoscaler::create(config);           // Result<Autoscaler>
//   scale::Decision d = a->evaluate(signals);             // every sync period
//   // d.desiredReplicas: how many serving replicas (loading + ready) the deployment should
//   //   have; d.victims: replica ids to start draining, in order; d.warmReplicas: standby
//   //   replicas on top. scale/reconcile.h turns a decision into replicas to place and retire.
//
// Time comes only from DeploymentSignals::nowMs (virtual in the simulator).
//
// Threading: an Autoscaler (and the Recommender inside it) keeps history and is used from one
// thread; one per deployment. docs/autoscaling.md describes every formula.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "scale/signals.h"

namespace tessera::scale {

// ---- recommenders --------------------------------------------------------------------------

struct Recommendation {
  int replicas = 0;    // raw desired count, before the governor
  std::string reason;  // one line for events and `explain`, e.g. "queue 7.2/5 per replica"
};

// An HPA scaling policy (the governor's, below): at most `value` pods, or percent of the
// replicas at the period's start, per `periodSeconds`. A recommender may name its defaults.
enum class PolicyType { kPods, kPercent };
enum class SelectPolicy { kMax, kMin, kDisabled };

// A policy type as the HPA's behavior spells it ("Pods", "Percent"; case-sensitive, as the
// Kubernetes API is), and back: nullopt for any other spelling.
std::string_view policyTypeName(PolicyType type);
std::optional<PolicyType> parsePolicyType(std::string_view name);

struct ScalingPolicy {
  PolicyType type = PolicyType::kPods;
  int value = 0;
  int periodSeconds = 15;
};

class Recommender {
 public:
  virtual ~Recommender() = default;
  virtual std::string_view name() const = 0;
  // `current` is the deployment's current replica count as the governor sees it (loading +
  // ready, draining excluded).
  virtual Recommendation recommend(const DeploymentSignals& signals, int current) = 0;
  // True when the recommender already counts loading replicas as capacity arriving at their
  // expectedReadyMs; the autoscaler's cold-start guard then leaves its scale-ups alone.
  virtual bool accountsForLoading() const { return false; }
  // The scale-down policies the governor takes when the configuration names none (empty: the
  // Kubernetes default, every replica at once).
  virtual std::vector<ScalingPolicy> defaultScaleDownPolicies() const { return {}; }
  // The scale-down stabilisation window the governor takes when the configuration sets none
  // (nullopt at creation: the Kubernetes default, 300 s). Asked again after every
  // recommendation, so it may follow what the recommender has seen (tessera: 120 s until its
  // burst history is full, then 60 s plus the last load time seen); a later nullopt keeps the
  // window the governor has.
  virtual std::optional<int> defaultScaleDownWindowSeconds() const { return std::nullopt; }
};

// ---- governor: Kubernetes autoscaling/v2 HPA `behavior` ------------------------------------

struct ScalingRules {
  std::optional<int> stabilizationWindowSeconds;  // unset: 0 up, 300 down
  SelectPolicy selectPolicy = SelectPolicy::kMax;
  std::vector<ScalingPolicy> policies;  // empty: the Kubernetes defaults for the direction
};

struct Behavior {
  ScalingRules scaleUp;
  ScalingRules scaleDown;
};

struct AutoscalerConfig {
  std::string recommender = "tessera";  // hpa, weighted, littles-law, kpa, tessera
  // Recommender arguments by name, e.g. {"queuePerReplica": 5, "kvCacheUsage": 0.8}; each
  // recommender documents and validates its own (unknown keys are an error).
  std::vector<std::pair<std::string, double>> args;
  int minReplicas = 1;
  int maxReplicas = 10;
  int warmReplicas = 0;  // kept loaded (node cache or standby) beyond the desired count
  Behavior behavior;
  // Count loading replicas as capacity arriving at their expected ready time.
  bool coldStartAware = true;
  int syncPeriodSeconds = 15;
};

struct Decision {
  int desiredReplicas = 0;           // after recommender and governor
  int recommendedReplicas = 0;       // the recommender's raw count
  std::vector<std::string> victims;  // replicas to drain now (scale-down), in order
  // Standby replicas to keep loaded beyond desiredReplicas (not routed to): the warm pool,
  // min(config.warmReplicas, maxReplicas - desiredReplicas).
  int warmReplicas = 0;
  std::string reason;
};

class Autoscaler {
 public:
  static Result<std::unique_ptr<Autoscaler>> create(const AutoscalerConfig& config);
  virtual ~Autoscaler() = default;
  virtual Decision evaluate(const DeploymentSignals& signals) = 0;
};

// Builds one recommender by name with its arguments (clear error for an unknown name or key).
Result<std::unique_ptr<Recommender>> makeRecommender(
    std::string_view name, const std::vector<std::pair<std::string, double>>& args);

// The recommender names makeRecommender knows, sorted.
std::vector<std::string> recommenderNames();

// Checks a config without building anything: min/max, warm pool, windows, policies, sync
// period, the recommender's name and arguments. Autoscaler::create calls it.
Result<void> validateConfig(const AutoscalerConfig& config);

}  // namespace tessera::scale
