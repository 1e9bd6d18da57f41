#pragma once
// Writing safetensors files for tests and benchmarks: real headers, tensor bytes filled with
// a deterministic pattern derived from the tensor's name, so that a loader can check every
// byte it read (tensorPatternFill gives the expected bytes of any range). Data is generated
// and written in large chunks: files of several GiB are as fast as the disk.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tessera::profile {

struct TensorSpec {
  std::string name;
  std::string dtype;  // a safetensors dtype: "BF16", "F32", ...
  std::vector<std::int64_t> shape;
};

// Writes `path` (replacing it): header, then the tensors in the given order, contiguous,
// each filled with tensorPatternFill(name, ...). The header is padded with spaces to a
// multiple of 8 bytes so the data section is 8-byte aligned. Names must be unique and not
// "__metadata__"; dtypes known; shapes non-negative. On error the file is removed.
Result<void> writeSafetensors(const std::string& path, const std::vector<TensorSpec>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// A synthetic model of BF16 tensors whose sizes add up to `totalBytes` rounded down to an
// even number (every tensor but the last has the same size): `tensorCount` tensors named
// "model.layers.<i>.weight", 2-D where the size allows. Fewer tensors when totalBytes is
// too small for `tensorCount` non-empty ones. metadata: {"format": "pt", "tessera":
// "synthetic"}.
Result<void> writeSyntheticModel(const std::string& path, std::uint64_t totalBytes,
                                 int tensorCount = 64);

// The tensors writeSyntheticModel writes for these arguments.
std::vector<TensorSpec> syntheticModelTensors(std::uint64_t totalBytes, int tensorCount = 64);

// The pattern: the tensor's bytes are the little-endian 64-bit words
//   word(i) = seed ^ ((i + 1) * 0x9E3779B97F4A7C15),  seed = FNV-1a-64(name),
// so byte k of the tensor is byte (k % 8) of word(k / 8). Writes the pattern bytes
// [offset, offset + size) of tensor `name` into `out`.
std::uint64_t tensorPatternSeed(std::string_view name);
void tensorPatternFill(std::uint64_t seed, std::uint64_t offset, std::byte* out, std::size_t size);

// The first offset in [0, size) where `data` (bytes [offset, offset + size) of the tensor)
// differs from the pattern, or -1 when it matches.
std::int64_t tensorPatternMismatch(std::uint64_t seed, std::uint64_t offset, const std::byte* data,
                                   std::size_t size);

}  // namespace tessera::profile
