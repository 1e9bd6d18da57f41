#pragma once
// Reading safetensors files: the 8-byte little-endian header length N, then N bytes of JSON
// naming every tensor's dtype, shape and byte range in the data section that follows
// (https://github.com/huggingface/safetensors). Only the header is read, never the data.
//
// Everything is validated, so that a loader can trust the result: N within bounds (at most
// 100 MiB and within the file), a JSON object header with no duplicate names, known dtypes,
// shapes whose element count × dtype size equals the byte range (overflow-checked), ranges
// inside the file and not overlapping. Holes (bytes of the data section no tensor covers)
// are allowed but reported. Sharded models (model.safetensors.index.json) are read with
// readSafetensorsIndex: every shard must exist and hold the tensors the index maps to it.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tessera::profile {

// Bound on the header length (the format's own reader refuses more than 100 MB too).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;
// Bound on the JSON nesting of a header (a valid one nests 3 deep).
inline constexpr int kMaxSafetensorsHeaderDepth = 16;

struct TensorInfo {
  std::string name;
  std::string dtype;  // the safetensors spelling: "BF16", "F8_E4M3", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // offsets relative to the data section
  std::uint64_t bytes() const { return end - begin; }
  std::uint64_t elements() const;  // product of shape (1 for a scalar)
};

// A byte range of the data section that no tensor covers: [begin, end), data-relative.
struct ByteRange {
  std::uint64_t begin = 0, end = 0;
};

struct SafetensorsFile {
  std::string path;
  std::uint64_t fileSize = 0;
  std::uint64_t dataOffset = 0;                 // 8 + header length
  std::vector<TensorInfo> tensors;              // in data order (ascending begin; ties by name)
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
  std::vector<ByteRange> holes;  // uncovered ranges of the data section, trailing bytes included

  std::uint64_t dataBytes() const { return fileSize - dataOffset; }
  std::uint64_t tensorBytes() const;  // sum of the tensors' sizes
};

// Reads and validates the header of the file at `path` (reads 8 + N bytes, not the data).
// Errors name the file.
Result<SafetensorsFile> readSafetensors(const std::string& path);

// Validates a header held in memory: `bytes` holds at least the first 8 + N bytes of a file
// of `fileSize` bytes (more is ignored). `path` of the result is empty. Errors say what is
// wrong without a file name.
Result<SafetensorsFile> parseSafetensorsHeader(std::string_view bytes, std::uint64_t fileSize);

// A sharded model: model.safetensors.index.json maps every tensor to the shard holding it.
struct ShardedSafetensors {
  std::string indexPath;
  std::vector<SafetensorsFile> shards;           // in file-name order
  std::map<std::string, std::string> weightMap;  // tensor → shard file name, as the index says
  std::uint64_t declaredTotalSize = 0;           // the index's metadata.total_size (0 when absent)
};

// Reads the index, then every shard it names (relative to the index's directory). Each
// shard must exist and be valid, every tensor of weight_map must be in the shard it names,
// and no shard may hold a tensor the index does not map to it. Errors name the file.
Result<ShardedSafetensors> readSafetensorsIndex(const std::string& indexPath);

// Validates an index held in memory (weight_map only; the shards are not opened). Shard
// names must be plain file names (no directories, no "..").
Result<ShardedSafetensors> parseSafetensorsIndex(std::string_view json);

}  // namespace tessera::profile
