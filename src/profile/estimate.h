#pragma once
// Model profiling: what a model's files say (weights by dtype, parameters, attention shape)
// and the GPU memory one replica needs for a given context length and concurrency, as a
// model::ModelProfile and as the body of POST /api/v1/models (docs/profiling.md).
//
//   weights    = Σ tensor bytes (every file of the model)
//   KV / token = layers × KV heads × (K head dim + V head dim) × KV dtype bytes
//                (at tensor-parallel degree tp each GPU holds ceil(KV heads / tp) heads)
//   KV cache   = KV / token × context × concurrency
//   overhead   = overheadPerGpuMib × tp + activationFraction × weights
//   per GPU    = (weights + KV cache + overhead) / tp

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "model/workload.h"
#include "profile/model_shape.h"

namespace tessera::profile {

struct DtypeTotal {
  std::uint64_t bytes = 0;
  std::uint64_t parameters = 0;  // elements
  std::uint64_t tensors = 0;
};

enum class ModelFormat { kSafetensors, kGguf };
const char* modelFormatName(ModelFormat format);

// What the files of one model say.
struct ModelFiles {
  ModelFormat format = ModelFormat::kSafetensors;
  std::string path;                // as given
  std::string name;                // default model name: the directory or the file's stem
  std::vector<std::string> files;  // weight files read (shards in order)
  std::string configPath;          // config.json read; "" when none
  std::map<std::string, DtypeTotal> byDtype;  // safetensors dtype or ggml type name
  std::uint64_t weightBytes = 0;
  std::uint64_t parameters = 0;
  std::uint64_t tensorCount = 0;
  std::optional<ModelShape> shape;  // nullopt: no config.json / no GGUF architecture
  std::vector<std::string> notes;   // things worth a warning (holes, no config, ...)

  // The floating-point dtype holding the most weight bytes among F16, BF16, F32 ("" none).
  std::string dominantFloatDtype() const;
};

// PATH is a .safetensors file (config.json beside it is read when present), a .gguf file, or
// a directory: a *.safetensors.index.json and its shards, else every *.safetensors file in it
// (tensor names unique across them), else its one .gguf file; plus its config.json. Every
// file is validated; errors name the file and what is wrong.
Result<ModelFiles> inspectModel(const std::string& path);

struct EstimateOptions {
  std::int64_t context = 0;      // tokens per sequence; 0 = the model's maximum (else 4096)
  std::int64_t concurrency = 1;  // sequences held at full context at once
  std::string kvDtype = "auto";  // see parseKvDtype
  int tensorParallel = 1;        // GPUs per replica
  std::int64_t overheadPerGpuMib = 1024;  // CUDA context, cuBLAS/NCCL workspaces, allocator
  double activationFraction = 0.05;       // activations and scratch, as a fraction of weights
};

inline constexpr std::int64_t kDefaultContext = 4096;
inline constexpr int kMaxTensorParallel = 16;  // sched::kMaxGpusPerReplica
// The largest figure a model profile may state (config::limits::kMaxGpuMemoryMib, 16 TiB).
inline constexpr std::uint64_t kMaxProfileMib = 16ull << 20;

// A KV-cache element type: bytes per 32 elements (llama.cpp's q8_0 and q4_0 caches are
// block formats: 34 and 18 bytes per 32).
struct KvDtype {
  std::string name;  // "BF16", "F8_E4M3", "Q8_0", ...
  std::uint32_t bytesPer32 = 64;
};
// "auto" (nullopt: decided from the model), fp16/f16/float16, bf16/bfloat16, fp32/f32/float32,
// fp8/fp8_e4m3, fp8_e5m2, int8, q8_0, q4_0.
Result<std::optional<KvDtype>> parseKvDtype(std::string_view text);

struct Estimate {
  std::uint64_t weightBytes = 0;
  KvDtype kvDtype;
  std::uint64_t kvBytesPerToken = 0;  // whole replica (0: shape unknown)
  std::int64_t context = 0;
  std::int64_t concurrency = 1;
  std::uint64_t kvCacheBytes = 0;
  std::uint64_t overheadBytes = 0;
  int tensorParallel = 1;
  std::uint64_t totalBytes = 0;
  std::uint64_t perGpuBytes = 0;
  std::vector<std::string> notes;
};

// Checks the options alone (ranges, the KV dtype's name); estimateMemory checks them too.
Result<void> checkEstimateOptions(const EstimateOptions& options);

Result<Estimate> estimateMemory(const ModelFiles& model, const EstimateOptions& options);

// Bytes → MiB, rounded up.
std::int64_t toMib(std::uint64_t bytes);

// The profile the rest of Tessera uses (weights, KV cache, overhead in MiB, rounded up;
// gpusPerReplica = tp).
model::ModelProfile toModelProfile(const Estimate& estimate, std::string name);

// The body of POST /api/v1/models for `profile`: name, weightsMib, kvCacheMib, overheadMib,
// gpusPerReplica.
nlohmann::ordered_json modelRequestBody(const model::ModelProfile& profile);

}  // namespace tessera::profile
