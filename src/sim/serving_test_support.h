#pragma once
// Shared by the serving simulation's tests: the built-in GPU catalogue and traces of steady
// phases whose numbers can be worked out by hand.

#include <cmath>
#include <utility>
#include <vector>

#include "model/gpu_catalog.h"
#include "sim/serving_trace.h"

namespace tessera::sim::testing {

inline const model::GpuCatalog& servingCatalog() {
  static const model::GpuCatalog c = model::GpuCatalog::builtin();
  return c;
}

// Requests at a steady rate per phase: {seconds, requests per second}, prompt and output fixed.
inline ServingTrace phasedTrace(const std::vector<std::pair<int, double>>& phases,
                                int prompt = 1000, int output = 100) {
  ServingTrace t;
  t.name = "phased";
  Micros start = 0;
  for (const auto& [seconds, rate] : phases) {
    const auto n = static_cast<int>(seconds * rate);
    for (int i = 0; i < n; ++i) {
      const Micros at = start + static_cast<Micros>(std::llround(i * 1e6 / rate));
      t.requests.push_back({at, prompt, output, static_cast<int>(t.requests.size()) + 2});
    }
    start += Micros{seconds} * 1'000'000;
  }
  return t;
}

}  // namespace tessera::sim::testing
