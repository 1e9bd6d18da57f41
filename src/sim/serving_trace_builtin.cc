#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "sim/serving_trace.h"

namespace tessera::sim {

ServingTrace builtinChatTrace(std::uint64_t seed, double timeScale) {
  ServingTrace trace;
  trace.name = "builtin-chat";
  std::mt19937_64 rng(seed);
  constexpr double kSpanS = kBuiltinChatSpanSeconds;
  // Rate over the hour: a swell from 3 to 7 requests/s and back, and a burst at twice the
  // rate from minute 40 to 44.
  auto rate = [](double t) {
    const double swell = 5.0 - 2.0 * std::cos(2 * std::numbers::pi * t / kSpanS);
    return (t >= 2400 && t < 2640) ? 2 * swell : swell;
  };
  constexpr double kMaxRate = 14.0;  // bounds rate(t): thinning draws against it
  std::exponential_distribution<double> gap(kMaxRate);
  std::uniform_real_distribution<double> accept(0, 1);
  std::lognormal_distribution<double> prompt(std::log(700.0), 0.9);
  std::lognormal_distribution<double> output(std::log(180.0), 0.8);
  double t = 0;
  int line = 0;
  for (;;) {
    t += gap(rng);
    if (t >= kSpanS) break;
    if (accept(rng) * kMaxRate > rate(t)) continue;
    ServingRequest r;
    r.arrivalUs = std::llround(t * 1e6 * timeScale);
    r.inputTokens = static_cast<std::int32_t>(std::clamp(prompt(rng), 16.0, 16'000.0));
    r.outputTokens = static_cast<std::int32_t>(std::clamp(output(rng), 1.0, 2'000.0));
    r.line = ++line;
    trace.requests.push_back(std::move(r));
  }
  // Arrivals after the trace's first request, as the file readers give them.
  if (!trace.requests.empty()) {
    const Micros first = trace.requests.front().arrivalUs;
    for (ServingRequest& r : trace.requests) r.arrivalUs -= first;
  }
  return trace;
}

}  // namespace tessera::sim
