#pragma once
// Element types of the model file formats: safetensors dtype names ("BF16", "F8_E4M3", ...)
// with their width in bits. Sub-byte types (F4, F6_*) exist, so sizes are computed in bits.

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::profile {

struct Dtype {
  std::string_view name;  // the safetensors spelling
  int bits = 0;           // width of one element
  bool floating = false;  // a floating-point type (candidate for the activation dtype)
};

// The safetensors dtype named `name` (case-sensitive, as the format spells it); nullopt when
// unknown.
std::optional<Dtype> findDtype(std::string_view name);

// "BOOL, F4, ..." for error messages.
std::string_view knownDtypeList();

// Bytes of `elements` elements of `dtype`; nullopt on overflow or when the bits do not fill
// whole bytes (e.g. 3 elements of F4).
std::optional<std::uint64_t> dtypeBytes(const Dtype& dtype, std::uint64_t elements);

// Product of `shape` (each dimension >= 0); nullopt on a negative dimension or overflow.
// The empty shape is a scalar: 1 element.
template <typename Range>
std::optional<std::uint64_t> elementCount(const Range& shape) {
  std::uint64_t n = 1;
  for (const auto d : shape) {
    if (d < 0) return std::nullopt;
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && n > UINT64_MAX / u) return std::nullopt;
    n *= u;
  }
  return n;
}

}  // namespace tessera::profile
