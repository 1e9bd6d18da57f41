#include "profile/dtype.h"

#include <array>

namespace tessera::profile {
namespace {

// The dtypes of the safetensors format (safetensors' Dtype enum, 0.6).
constexpr std::array<Dtype, 20> kDtypes{{
    {"BOOL", 8, false},   {"F4", 4, true},    {"F6_E2M3", 6, true}, {"F6_E3M2", 6, true},
    {"U8", 8, false},     {"I8", 8, false},   {"F8_E5M2", 8, true}, {"F8_E4M3", 8, true},
    {"F8_E8M0", 8, true}, {"I16", 16, false}, {"U16", 16, false},   {"F16", 16, true},
    {"BF16", 16, true},   {"I32", 32, false}, {"U32", 32, false},   {"F32", 32, true},
    {"C64", 64, true},    {"F64", 64, true},  {"I64", 64, false},   {"U64", 64, false},
}};

}  // namespace

std::optional<Dtype> findDtype(std::string_view name) {
  for (const Dtype& d : kDtypes) {
    if (d.name == name) return d;
  }
  return std::nullopt;
}

std::string_view knownDtypeList() {
  return "BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F4, F6_E2M3, F6_E3M2, F8_E4M3, F8_E5M2, "
         "F8_E8M0, F16, BF16, F32, F64, C64";
}

std::optional<std::uint64_t> dtypeBytes(const Dtype& dtype, std::uint64_t elements) {
  const auto bits = static_cast<std::uint64_t>(dtype.bits);
  if (elements != 0 && elements > UINT64_MAX / bits) return std::nullopt;
  const std::uint64_t total = elements * bits;
  if (total % 8 != 0) return std::nullopt;
  return total / 8;
}

}  // namespace tessera::profile
