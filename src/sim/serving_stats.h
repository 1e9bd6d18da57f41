#pragma once
// Small statistics the serving simulation's signals are computed with: a sliding time window
// of values and the nearest-rank percentile. Shared by the run (serving_run.cc) and the warm
// start's estimate of what a deployment measured before the trace (serving_setup.cc).

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "sim/serving_trace.h"

namespace tessera::sim {

// Nearest rank: the smallest value with at least p of the values at or below it (sorts `v`);
// 0 for no values.
inline double nearestRank(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

// Values in a sliding time window (signals over the last signalWindowSeconds).
struct Window {
  std::deque<std::pair<Micros, double>> values;
  void add(Micros at, double v) { values.emplace_back(at, v); }
  void trim(Micros fromUs) {
    while (!values.empty() && values.front().first <= fromUs) values.pop_front();
  }
  std::optional<double> mean() const {
    if (values.empty()) return std::nullopt;
    double sum = 0;
    for (const auto& [at, v] : values) sum += v;
    return sum / static_cast<double>(values.size());
  }
  std::optional<double> percentile(double p) const {
    if (values.empty()) return std::nullopt;
    std::vector<double> v;
    v.reserve(values.size());
    for (const auto& [at, x] : values) v.push_back(x);
    return nearestRank(v, p);
  }
};

}  // namespace tessera::sim
