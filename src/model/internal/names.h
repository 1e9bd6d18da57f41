#pragma once
// Case-insensitive matching for GPU type names, aliases and MIG profile names. The same card is
// spelled "A100-80GB" in a cluster file, "NVIDIA A100-SXM4-80GB" by NVML and "a100-80gb" by a
// user on the command line; all of them must find it. ASCII only: every name NVIDIA or a trace
// uses is ASCII, and locale-dependent folding would make lookups differ between hosts.

#include <cstddef>
#include <string_view>

namespace tessera::model::internal {

inline char asciiLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (asciiLower(a[i]) != asciiLower(b[i])) return false;
  }
  return true;
}

}  // namespace tessera::model::internal
