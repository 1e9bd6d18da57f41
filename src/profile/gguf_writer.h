#pragma once
// Writing small GGUF files (version 3 by default) for tests and fuzz seeds: metadata of any
// type, tensor infos laid out at aligned offsets, and zero-filled data. Not a converter.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/result.h"
#include "profile/gguf.h"

namespace tessera::profile {

struct GgufSpecValue {
  GgufType type = GgufType::kUint32;
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string> scalar = std::uint64_t{0};
  // Arrays: element type and items (strings or numbers, as the element type says).
  GgufType elementType = GgufType::kUint32;
  std::vector<std::variant<std::uint64_t, std::int64_t, double, bool, std::string>> items;

  using Scalar = std::variant<std::uint64_t, std::int64_t, double, bool, std::string>;
  static GgufSpecValue scalarOf(GgufType type, Scalar v) {
    GgufSpecValue out;
    out.type = type;
    out.scalar = std::move(v);
    return out;
  }
  static GgufSpecValue u32(std::uint32_t v) {
    return scalarOf(GgufType::kUint32, std::uint64_t{v});
  }
  static GgufSpecValue u64(std::uint64_t v) { return scalarOf(GgufType::kUint64, v); }
  static GgufSpecValue i32(std::int32_t v) { return scalarOf(GgufType::kInt32, std::int64_t{v}); }
  static GgufSpecValue f32(float v) { return scalarOf(GgufType::kFloat32, double{v}); }
  static GgufSpecValue boolean(bool v) { return scalarOf(GgufType::kBool, v); }
  static GgufSpecValue string(std::string v) { return scalarOf(GgufType::kString, std::move(v)); }
  static GgufSpecValue stringArray(std::vector<std::string> v);
  static GgufSpecValue intArray(GgufType elementType, std::vector<std::int64_t> v);
};

struct GgufSpecTensor {
  GgufSpecTensor(std::string n, std::vector<std::uint64_t> d, std::uint32_t t = 0,
                 std::optional<std::uint64_t> o = std::nullopt)
      : name(std::move(n)), dims(std::move(d)), type(t), offset(o) {}
  std::string name;
  std::vector<std::uint64_t> dims;      // ne[0] first
  std::uint32_t type = 0;               // ggml type id (0 = F32)
  std::optional<std::uint64_t> offset;  // default: the next aligned offset after the last
};

struct GgufSpec {
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;  // used for the layout; write general.alignment to change it
  std::vector<std::pair<std::string, GgufSpecValue>> metadata;
  std::vector<GgufSpecTensor> tensors;
};

// The bytes of the file: header, padding to the alignment, then each tensor's bytes (zeros)
// at the next aligned offset. Tensor sizes use findGgmlType; an unknown type is an error.
Result<std::string> ggufBytes(const GgufSpec& spec);

Result<void> writeGguf(const std::string& path, const GgufSpec& spec);

}  // namespace tessera::profile
