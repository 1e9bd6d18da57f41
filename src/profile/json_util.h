#pragma once
// Shared helpers of the profile parsers: JSON parsing of untrusted text without exceptions
// and with a bound on nesting, and little-endian integer reads.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tessera::profile::internal {

// Parses `text` as one JSON document. Refuses nesting deeper than `maxDepth` (checked on the
// text first, so no deep document is ever built) and, when `rejectDuplicateTopKeys`, a key
// repeated in the top-level object (nlohmann would silently keep the last). Errors start
// with "invalid JSON" or "JSON nested" or "duplicate key".
Result<nlohmann::json> parseJson(std::string_view text, int maxDepth, bool rejectDuplicateTopKeys);

// "string \"x\"", "number 3", "array", ... for error messages.
std::string describeJson(const nlohmann::json& value);

// A JSON integer >= 0 (an unsigned or non-negative signed number; not a float).
std::optional<std::uint64_t> jsonUnsigned(const nlohmann::json& value);

inline std::uint64_t readLe64(const void* p) {
  unsigned char b[8];
  std::memcpy(b, p, 8);
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

inline std::uint32_t readLe32(const void* p) {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  return static_cast<std::uint32_t>(b[0]) | (static_cast<std::uint32_t>(b[1]) << 8) |
         (static_cast<std::uint32_t>(b[2]) << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
}

// Shortens `s` for an error message (at most `max` bytes, "..." appended when cut), and
// replaces control and non-ASCII bytes by '?', so that a message never carries bytes of a
// hostile file that are not valid UTF-8.
std::string printable(std::string_view s, std::size_t max = 80);
// The same without the quotes.
std::string sanitized(std::string_view s, std::size_t max = 80);

}  // namespace tessera::profile::internal
