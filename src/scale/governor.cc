#include "scale/governor.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::scale {
namespace {

constexpr int kDefaultUpWindowSeconds = 0;
constexpr int kDefaultDownWindowSeconds = 300;

Result<void> validateRules(const ScalingRules& rules, std::string_view direction) {
  const std::string where = "behavior." + std::string(direction);
  if (rules.stabilizationWindowSeconds && *rules.stabilizationWindowSeconds < 0) {
    return fail(Error::invalid(where + ".stabilizationWindowSeconds = " +
                               std::to_string(*rules.stabilizationWindowSeconds) +
                               " must be >= 0"));
  }
  for (std::size_t i = 0; i < rules.policies.size(); ++i) {
    const ScalingPolicy& p = rules.policies[i];
    const std::string at = where + ".policies[" + std::to_string(i) + "]";
    if (p.value <= 0) {
      return fail(Error::invalid(at + ".value = " + std::to_string(p.value) + " must be > 0"));
    }
    if (p.periodSeconds <= 0) {
      return fail(Error::invalid(at + ".periodSeconds = " + std::to_string(p.periodSeconds) +
                                 " must be > 0"));
    }
  }
  return {};
}

int longestPeriodSeconds(const Behavior& b) {
  int longest = 0;
  for (const ScalingPolicy& p : b.scaleUp.policies) longest = std::max(longest, p.periodSeconds);
  for (const ScalingPolicy& p : b.scaleDown.policies) longest = std::max(longest, p.periodSeconds);
  return longest;
}

}  // namespace

Behavior withDefaults(const Behavior& behavior) {
  Behavior b = behavior;
  if (!b.scaleUp.stabilizationWindowSeconds) {
    b.scaleUp.stabilizationWindowSeconds = kDefaultUpWindowSeconds;
  }
  if (!b.scaleDown.stabilizationWindowSeconds) {
    b.scaleDown.stabilizationWindowSeconds = kDefaultDownWindowSeconds;
  }
  if (b.scaleUp.policies.empty()) {
    b.scaleUp.policies = {{PolicyType::kPods, 4, 15}, {PolicyType::kPercent, 100, 15}};
  }
  if (b.scaleDown.policies.empty()) b.scaleDown.policies = {{PolicyType::kPercent, 100, 15}};
  return b;
}

Result<void> validateBehavior(const Behavior& behavior) {
  TESSERA_RETURN_IF_ERROR(validateRules(behavior.scaleUp, "scaleUp"));
  TESSERA_RETURN_IF_ERROR(validateRules(behavior.scaleDown, "scaleDown"));
  return {};
}

Governor::Governor(const Behavior& behavior, int minReplicas, int maxReplicas)
    : behavior_(withDefaults(behavior)), minReplicas_(minReplicas), maxReplicas_(maxReplicas) {}

GovernorResult Governor::normalize(Millis nowMs, int current, int recommendation) {
  GovernorResult out;
  if (current > maxReplicas_) {
    out = {maxReplicas_, "current above maxReplicas"};
  } else if (current < minReplicas_) {
    out = {minReplicas_, "current below minReplicas"};
  } else {
    std::string reason;
    const int stabilized = stabilize(nowMs, current, recommendation, reason);
    const int limited = limitRate(nowMs, current, stabilized, reason);
    out = {limited, reason};
  }
  if (out.replicas != current) recordEvent(nowMs, current, out.replicas);
  return out;
}

void Governor::setScaleDownWindowSeconds(int seconds) {
  behavior_.scaleDown.stabilizationWindowSeconds = std::max(0, seconds);
}

int Governor::stabilize(Millis nowMs, int current, int recommendation, std::string& reason) {
  const Millis upCutoff = nowMs - *behavior_.scaleUp.stabilizationWindowSeconds * Millis{1000};
  const Millis downCutoff = nowMs - *behavior_.scaleDown.stabilizationWindowSeconds * Millis{1000};
  int up = recommendation;    // min over the scale-up window
  int down = recommendation;  // max over the scale-down window
  for (const Timestamped& r : recommendations_) {
    if (r.atMs > upCutoff) up = std::min(up, r.value);
    if (r.atMs > downCutoff) down = std::max(down, r.value);
  }
  int stabilized = current;
  if (stabilized < up) stabilized = up;
  if (stabilized > down) stabilized = down;
  if (stabilized != recommendation) {
    reason = stabilized < recommendation ? "ScaleUpStabilized" : "ScaleDownStabilized";
  }
  std::erase_if(recommendations_,
                [&](const Timestamped& r) { return r.atMs <= upCutoff && r.atMs <= downCutoff; });
  recommendations_.push_back({nowMs, recommendation});
  return stabilized;
}

int Governor::limitRate(Millis nowMs, int current, int desired, std::string& reason) const {
  if (desired > current) {
    const int limit = std::max(scaleUpLimit(nowMs, current), current);
    const int allowed = std::min(maxReplicas_, limit);
    if (desired > allowed) {
      reason = maxReplicas_ > limit ? "ScaleUpLimit" : "TooManyReplicas";
      return allowed;
    }
  } else if (desired < current) {
    const int limit = std::min(scaleDownLimit(nowMs, current), current);
    const int allowed = std::max(minReplicas_, limit);
    if (desired < allowed) {
      reason = minReplicas_ < limit ? "ScaleDownLimit" : "TooFewReplicas";
      return allowed;
    }
  }
  return desired;
}

int Governor::changeInPeriod(Millis nowMs, int periodSeconds,
                             const std::vector<Timestamped>& events) const {
  const Millis cutoff = nowMs - periodSeconds * Millis{1000};
  int change = 0;
  for (const Timestamped& e : events) {
    if (e.atMs > cutoff) change += e.value;
  }
  return change;
}

int Governor::scaleUpLimit(Millis nowMs, int current) const {
  const ScalingRules& rules = behavior_.scaleUp;
  if (rules.selectPolicy == SelectPolicy::kDisabled) return current;
  const bool pickMin = rules.selectPolicy == SelectPolicy::kMin;
  long long result = pickMin ? std::numeric_limits<int>::max() : std::numeric_limits<int>::min();
  for (const ScalingPolicy& p : rules.policies) {
    const long long start = current - changeInPeriod(nowMs, p.periodSeconds, scaleUpEvents_) +
                            changeInPeriod(nowMs, p.periodSeconds, scaleDownEvents_);
    const long long proposed =
        p.type == PolicyType::kPods
            ? start + p.value
            : static_cast<long long>(std::ceil(static_cast<double>(start) * (1 + p.value / 100.0)));
    result = pickMin ? std::min(result, proposed) : std::max(result, proposed);
  }
  return static_cast<int>(std::clamp<long long>(result, std::numeric_limits<int>::min(),
                                                std::numeric_limits<int>::max()));
}

int Governor::scaleDownLimit(Millis nowMs, int current) const {
  const ScalingRules& rules = behavior_.scaleDown;
  if (rules.selectPolicy == SelectPolicy::kDisabled) return current;
  const bool pickMin = rules.selectPolicy == SelectPolicy::kMin;  // smallest change = largest count
  long long result = pickMin ? std::numeric_limits<int>::min() : std::numeric_limits<int>::max();
  for (const ScalingPolicy& p : rules.policies) {
    const long long start = current - changeInPeriod(nowMs, p.periodSeconds, scaleUpEvents_) +
                            changeInPeriod(nowMs, p.periodSeconds, scaleDownEvents_);
    const long long proposed =
        p.type == PolicyType::kPods
            ? start - p.value
            : static_cast<long long>(static_cast<double>(start) * (1 - p.value / 100.0));
    result = pickMin ? std::max(result, proposed) : std::min(result, proposed);
  }
  return static_cast<int>(std::clamp<long long>(result, std::numeric_limits<int>::min(),
                                                std::numeric_limits<int>::max()));
}

void Governor::recordEvent(Millis nowMs, int from, int to) {
  const Millis cutoff = nowMs - longestPeriodSeconds(behavior_) * Millis{1000};
  auto outdated = [&](const Timestamped& e) { return e.atMs <= cutoff; };
  std::erase_if(scaleUpEvents_, outdated);
  std::erase_if(scaleDownEvents_, outdated);
  if (to > from) scaleUpEvents_.push_back({nowMs, to - from});
  if (to < from) scaleDownEvents_.push_back({nowMs, from - to});
}

}  // namespace tessera::scale
