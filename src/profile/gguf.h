#pragma once
// Reading GGUF headers (llama.cpp's model format, versions 2 and 3): magic "GGUF", version,
// tensor and metadata counts, typed metadata key/value pairs, tensor infos (name, dims, ggml
// type, offset), then the data section at the next multiple of general.alignment (default
// 32). https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
//
// Only the header is read. Every length and count is checked against the bytes left in the
// file before anything is allocated or looped over, so a lying count fails fast; strings are
// bounded; tensor sizes come from the ggml type's block size and bytes per block (an unknown
// type is an error naming its id) and must lie inside the file without overlapping.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"

namespace tessera::profile {

enum class GgufType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
const char* ggufTypeName(GgufType type);

// Bounds of the reader.
inline constexpr std::uint64_t kMaxGgufKeyBytes = 64 * 1024;
inline constexpr std::uint64_t kMaxGgufStringBytes = 64ull << 20;  // one metadata string
inline constexpr int kMaxGgufArrayDepth = 4;                       // arrays of arrays
inline constexpr std::uint32_t kMaxGgufDims = 4;                   // GGML_MAX_DIMS
inline constexpr std::uint64_t kMaxGgufKeptArrayItems = 65536;     // integer arrays kept

struct GgufValue {
  GgufType type = GgufType::kUint8;
  // Scalars: unsigned types as uint64, signed as int64, floats as double, bool, string.
  std::variant<std::monostate, std::uint64_t, std::int64_t, double, bool, std::string> scalar;
  // Arrays: the element type and count; integer elements are kept when there are at most
  // kMaxGgufKeptArrayItems of them (per-layer head counts), other contents are skipped.
  GgufType elementType = GgufType::kUint8;
  std::uint64_t count = 0;
  std::vector<std::int64_t> ints;
  bool intsKept = false;

  // An integer scalar (any integer type, within int64); nullopt otherwise.
  std::optional<std::int64_t> asInt() const;
  const std::string* asString() const { return std::get_if<std::string>(&scalar); }
};

// A ggml tensor type: name, elements per block, bytes per block.
struct GgmlType {
  std::uint32_t id = 0;
  std::string_view name;
  std::uint32_t blockSize = 1;
  std::uint32_t typeSize = 0;
};
// The ggml type with id `id` (ggml.h's enum ggml_type); nullopt for unknown and removed ids.
std::optional<GgmlType> findGgmlType(std::uint32_t id);

struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> dims;  // ne[0] first (the contiguous dimension)
  std::uint32_t type = 0;           // ggml type id
  std::string typeName;             // "Q4_K", "F16", ...
  std::uint64_t offset = 0;         // relative to the data section
  std::uint64_t bytes = 0;
  std::uint64_t elements = 0;
};

struct GgufFile {
  std::string path;
  std::uint64_t fileSize = 0;
  std::uint32_t version = 0;
  std::uint64_t alignment = 32;
  std::uint64_t dataOffset = 0;  // start of the data section (aligned)
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors;  // in header order

  const GgufValue* find(std::string_view key) const;
  std::optional<std::int64_t> getInt(std::string_view key) const;
  std::optional<std::string> getString(std::string_view key) const;
  std::uint64_t tensorBytes() const;
};

// Reads and validates the header of the GGUF file at `path`. Errors name the file.
Result<GgufFile> readGguf(const std::string& path);

// Validates a header held in memory: `bytes` is the start of a file of `fileSize` bytes (at
// least the whole header; an error says "truncated" when it is not).
Result<GgufFile> parseGguf(std::string_view bytes, std::uint64_t fileSize);

}  // namespace tessera::profile
