// Fuzz target: k8s::parseQuantity and its unit conversions (cpuMilli, bytesToMib,
// wholeNumber) on arbitrary bytes: the text of a pod's resource values.
//
// Checks beyond "no crash, no sanitizer report": an accepted quantity is finite, not negative
// and at most 9e18; the conversions agree with it (cpuMilli = ceil(value × 1000), bytesToMib =
// ceil(value / 2^20), wholeNumber = value) or refuse it, and never answer a negative number
// (a float-to-integer conversion out of range is undefined behaviour that GCC's UBSan does
// not report); errors quote the text.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "k8s/quantity.h"

namespace {

void checkConversion(const tessera::Result<std::int64_t>& r, double expected, std::string_view text,
                     const char* name) {
  const std::string what = std::string(name) + "(\"" + std::string(text) + "\")";
  if (!r) {
    TESSERA_FUZZ_CHECK(r.error().message.starts_with("quantity \""),
                       what + ": " + r.error().message);
    return;
  }
  TESSERA_FUZZ_CHECK(*r >= 0, what + " = " + std::to_string(*r));
  // Rounding slack: the conversions subtract 1e-9 before rounding up, and doubles carry 53 bits.
  const double slack = 1.0 + std::abs(expected) * 1e-12;
  TESSERA_FUZZ_CHECK(
      std::abs(static_cast<double>(*r) - expected) <= slack,
      what + " = " + std::to_string(*r) + ", expected about " + std::to_string(expected));
}

// A second reading of the grammar: "+"? digits with at most one '.', then one named suffix or
// none. Such text must be accepted (when not too large). Exponents are left to the checks
// above. Returns the expected value, or nullopt when the text is not of that simple form.
std::optional<double> simpleForm(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  std::size_t i = 0;
  bool dot = false, digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digit = true;
    } else if (s[i] == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digit) return std::nullopt;
  const std::string_view suffix = s.substr(i);
  static const std::pair<std::string_view, double> kSuffixes[] = {
      {"", 1},        {"Ki", 0x1p10}, {"Mi", 0x1p20}, {"Gi", 0x1p30}, {"Ti", 0x1p40},
      {"Pi", 0x1p50}, {"Ei", 0x1p60}, {"m", 1e-3},    {"k", 1e3},     {"M", 1e6},
      {"G", 1e9},     {"T", 1e12},    {"P", 1e15},    {"E", 1e18}};
  for (const auto& [text, factor] : kSuffixes) {
    if (suffix == text) return std::strtod(std::string(s.substr(0, i)).c_str(), nullptr) * factor;
  }
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = tessera::k8s::parseQuantity(text);
  if (const auto expected = simpleForm(text); expected && *expected <= 8e18) {
    TESSERA_FUZZ_CHECK(v.has_value(),
                       "refused \"" + std::string(text) + "\": " + (v ? "" : v.error().message));
    TESSERA_FUZZ_CHECK(std::abs(*v - *expected) <= 1e-9 * std::max(1.0, *expected),
                       "\"" + std::string(text) + "\" read as " + std::to_string(*v));
  }
  if (!v) {
    TESSERA_FUZZ_CHECK(v.error().message.starts_with("quantity \""), v.error().message);
    TESSERA_FUZZ_CHECK(!tessera::k8s::cpuMilli(text) && !tessera::k8s::bytesToMib(text) &&
                           !tessera::k8s::wholeNumber(text),
                       "a conversion accepted what parseQuantity refused");
    return 0;
  }
  const std::string what = "parseQuantity(\"" + std::string(text) + "\") = " + std::to_string(*v);
  TESSERA_FUZZ_CHECK(std::isfinite(*v) && *v >= 0 && *v <= 9e18, what);
  checkConversion(tessera::k8s::cpuMilli(text), std::ceil(*v * 1000.0 - 1e-9), text, "cpuMilli");
  checkConversion(tessera::k8s::bytesToMib(text), std::ceil(*v / (1024.0 * 1024.0) - 1e-9), text,
                  "bytesToMib");
  auto whole = tessera::k8s::wholeNumber(text);
  if (whole) checkConversion(whole, std::round(*v), text, "wholeNumber");
  return 0;
}
