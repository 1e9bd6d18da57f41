#include "config/quantity.h"

#include <array>
#include <cctype>
#include <limits>
#include <string>

namespace tessera::config {
namespace {

struct Unit {
  std::string_view suffix;
  __int128 bytes;
};

constexpr __int128 kMib = __int128{1} << 20;
constexpr std::array<Unit, 9> kUnits = {{
    {"Mi", kMib},
    {"MiB", kMib},
    {"Gi", kMib << 10},
    {"GiB", kMib << 10},
    {"Ti", kMib << 20},
    {"TiB", kMib << 20},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
}};

// Enough digits for any real size; keeps the exact arithmetic below inside 128 bits.
constexpr int kMaxDigits = 18;

}  // namespace

Result<std::int64_t> parseMemoryQuantity(std::string_view text, Rounding rounding) {
  // Built with append: g++ 12 at -O3 reports a false -Wrestrict on "\"" + std::string(...).
  std::string quoted(1, '"');
  quoted.append(text);
  quoted.push_back('"');
  std::size_t pos = 0;
  while (pos < text.size() && text[pos] == ' ') ++pos;
  if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) {
    if (text[pos] == '-') return fail(Error::invalid("must not be negative, got " + quoted));
    return fail(Error::invalid("expected a number and a unit, got " + quoted));
  }

  // The number is read as mantissa / 10^fractionDigits so the conversion stays exact.
  __int128 mantissa = 0;
  int digits = 0;
  int fractionDigits = 0;
  bool seenPoint = false;
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c == '.' && !seenPoint) {
      seenPoint = true;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) break;
    if (++digits > kMaxDigits) return fail(Error::invalid("number too long in " + quoted));
    mantissa = mantissa * 10 + (c - '0');
    if (seenPoint) ++fractionDigits;
  }
  if (digits == 0) return fail(Error::invalid("expected a number and a unit, got " + quoted));
  while (pos < text.size() && text[pos] == ' ') ++pos;
  std::string_view suffix = text.substr(pos);
  while (!suffix.empty() && suffix.back() == ' ') suffix.remove_suffix(1);
  if (suffix.empty()) {
    return fail(Error::invalid("needs a unit (" + std::string(kMemoryUnits) + "), got " + quoted));
  }
  const Unit* unit = nullptr;
  for (const Unit& u : kUnits) {
    if (u.suffix == suffix) unit = &u;
  }
  if (unit == nullptr) {
    return fail(Error::invalid("unknown unit \"" + std::string(suffix) + "\" in " + quoted +
                               "; units: " + std::string(kMemoryUnits)));
  }

  __int128 denominator = kMib;
  for (int i = 0; i < fractionDigits; ++i) denominator *= 10;
  const __int128 numerator = mantissa * unit->bytes;
  __int128 mib = numerator / denominator;
  if (rounding == Rounding::kUp && numerator % denominator != 0) ++mib;
  if (mib > std::numeric_limits<std::int64_t>::max()) {
    return fail(Error::invalid("too large: " + quoted));
  }
  return static_cast<std::int64_t>(mib);
}

}  // namespace tessera::config
