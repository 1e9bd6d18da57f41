#pragma once
// Small helpers the simulator's SVG writers share (plot.cc, serving_report.cc).

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

namespace tessera::sim::svg {

// `v` printed with a printf format (one decimal by default).
inline std::string num(double v, const char* format = "%.1f") {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Text safe inside an XML element or a double-quoted attribute.
inline std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" axis maximum and tick step (1, 2, 2.5 or 5 × a power of ten) for values up to
// `max`, with about `ticks` steps.
inline std::pair<double, double> axis(double max, int ticks) {
  if (!(max > 0)) return {1, 0.5};
  const double raw = max / ticks;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  return {std::ceil(max / step) * step, step};
}

}  // namespace tessera::sim::svg
