#pragma once
// Memory quantities written for people ("80Gi", "40GB") converted to whole MiB.
//
// Binary units: Mi/MiB = 2^20 bytes, Gi/GiB = 1024 Mi, Ti/TiB = 1024 Gi.
// Decimal units: MB = 10^6 bytes, GB = 10^9 bytes, TB = 10^12 bytes (so 40GB = 38146.97 MiB).
// The number may have a fraction ("1.5Gi"); a unit is required and case matters (Gb would be
// gigabits). Results that are not a whole MiB are rounded as the caller asks.

#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace tessera::config {

enum class Rounding : std::uint8_t { kDown, kUp };

// The error message is about the text only; callers add the file, line and field.
Result<std::int64_t> parseMemoryQuantity(std::string_view text, Rounding rounding);

// The units parseMemoryQuantity accepts, for messages and documentation.
constexpr std::string_view kMemoryUnits = "Mi, MiB, Gi, GiB, Ti, TiB, MB, GB, TB";

}  // namespace tessera::config
