#pragma once
// How the scale module's recommenders print a number in their reasons: three significant
// digits ("0.667", "12.5", "1.2e+03").

#include <cstdio>
#include <string>

namespace tessera::scale {

inline std::string shortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace tessera::scale
