#include "k8s/quantity.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace tessera::k8s {
namespace {

struct Suffix {
  std::string_view text;
  double factor;
};

constexpr Suffix kSuffixes[] = {
    {"Ki", 1024.0},
    {"Mi", 1024.0 * 1024},
    {"Gi", 1024.0 * 1024 * 1024},
    {"Ti", 1024.0 * 1024 * 1024 * 1024},
    {"Pi", 1024.0 * 1024 * 1024 * 1024 * 1024},
    {"Ei", 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024},
    {"m", 1e-3},
    {"k", 1e3},
    {"M", 1e6},
    {"G", 1e9},
    {"T", 1e12},
    {"P", 1e15},
    {"E", 1e18},
};

Error bad(std::string_view text, std::string_view why) {
  return Error::invalid("quantity \"" + std::string(text) + "\": " + std::string(why));
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

Result<double> parseQuantity(std::string_view text) {
  std::string_view s = text;
  if (s.empty()) return fail(bad(text, "empty"));
  if (s.front() == '+') s.remove_prefix(1);
  if (!s.empty() && s.front() == '-') return fail(bad(text, "negative quantities are not allowed"));
  // The number: digits with at most one '.', at least one digit.
  std::size_t i = 0;
  int digits = 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    if (isDigit(s[i])) {
      ++digits;
    } else if (s[i] == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0) return fail(bad(text, "expected a number"));
  const std::string number(s.substr(0, i));
  const double mantissa = std::strtod(number.c_str(), nullptr);
  const std::string_view suffix = s.substr(i);
  double factor = 1;
  if (!suffix.empty()) {
    // The named suffixes first: "Ei" is exbibytes, not an exponent (nor is "E" alone).
    bool known = false;
    for (const Suffix& s2 : kSuffixes) {
      if (suffix == s2.text) {
        factor = s2.factor;
        known = true;
        break;
      }
    }
    if (!known && (suffix.front() == 'e' || suffix.front() == 'E') && suffix.size() > 1) {
      std::string_view exp = suffix.substr(1);
      bool negative = false;
      if (exp.front() == '+' || exp.front() == '-') {
        negative = exp.front() == '-';
        exp.remove_prefix(1);
      }
      int e = 0;
      const auto [end, ec] = std::from_chars(exp.data(), exp.data() + exp.size(), e);
      if (ec != std::errc() || end != exp.data() + exp.size() || exp.empty() || e > 300) {
        return fail(bad(text, "bad exponent"));
      }
      factor = std::pow(10.0, negative ? -e : e);
    } else if (!known) {
      return fail(bad(text, "unknown suffix \"" + std::string(suffix) +
                                "\" (known: Ki Mi Gi Ti Pi Ei m k M G T P E, or e<exp>)"));
    }
  }
  const double value = mantissa * factor;
  if (!std::isfinite(value) || value > 9e18) return fail(bad(text, "too large"));
  return value;
}

Result<std::int64_t> cpuMilli(std::string_view text) {
  auto v = parseQuantity(text);
  if (!v) return fail(v.error());
  // Round up, but do not let binary noise turn 0.25 cores into 251m.
  const double milli = std::ceil(*v * 1000.0 - 1e-9);
  // parseQuantity allows up to 9e18; a thousand times that does not fit an int64 (the cast
  // would be undefined: on x86 it gave INT64_MIN).
  if (milli > 9e18) return fail(bad(text, "too large"));
  return static_cast<std::int64_t>(milli);
}

Result<std::int64_t> bytesToMib(std::string_view text) {
  auto v = parseQuantity(text);
  if (!v) return fail(v.error());
  return static_cast<std::int64_t>(std::ceil(*v / (1024.0 * 1024.0) - 1e-9));
}

Result<std::int64_t> wholeNumber(std::string_view text) {
  auto v = parseQuantity(text);
  if (!v) return fail(v.error());
  const double rounded = std::round(*v);
  if (std::abs(*v - rounded) > 1e-9) return fail(bad(text, "must be a whole number"));
  return static_cast<std::int64_t>(rounded);
}

}  // namespace tessera::k8s
