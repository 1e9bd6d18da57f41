#pragma once
// What the serving simulation assumes about a model, a GPU type and loading weights
// (docs/serving-simulator.md, "The model"). One replica = one serving engine (vLLM-like) on
// one whole GPU; its speed follows a roofline: an iteration takes
//   max(FLOPs / effective FLOP/s, bytes read / effective HBM bandwidth)
// where prefill costs 2 x parameters FLOPs per prompt token plus attention (quadratic in the
// prompt) and each decode step reads the weights once plus every running sequence's KV cache.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "model/workload.h"

namespace tessera::sim {

// A served model. Defaults: Llama-3.1-8B in BF16 (8.03 B parameters, 32 layers, hidden 4096,
// 8 KV heads x 128 dims: 32 x 8 x 128 x 2 (K,V) x 2 bytes = 128 KiB of KV per token).
struct ServingModel {
  std::string name = "llama-3.1-8b";
  std::int64_t weightsMib = 15317;  // 8.03e9 x 2 bytes
  std::int64_t overheadMib = 4096;  // activations, CUDA graphs, allocator slack
  std::int64_t kvBytesPerToken = 131072;
  double parametersB = 8.03;             // FLOPs per token = 2 x parameters
  int layers = 32;                       // attention FLOPs per (token, earlier token) =
  int hiddenSize = 4096;                 //   4 x layers x hiddenSize (QK^T and AV)
  int maxNumSeqs = 256;                  // vLLM max_num_seqs
  std::int64_t maxBatchedTokens = 8192;  // prompt tokens admitted per iteration (>= 1 prompt)
  double gpuMemoryUtilization = 0.9;     // share of the card the engine takes (vLLM's default)

  double flopsPerToken() const { return 2e9 * parametersB; }
  double attentionFlopsPerPair() const { return 4.0 * layers * hiddenSize; }
  double weightsBytes() const { return static_cast<double>(weightsMib) * 1024 * 1024; }
};

// Loads a model file (docs/serving-simulator.md, "Model file"); every error names the file,
// line and key.
Result<ServingModel> loadServingModelFile(const std::string& path);
Result<ServingModel> parseServingModelYaml(const std::string& text, const std::string& source);

// How well a GPU type's peak figures turn into serving throughput.
struct GpuEfficiency {
  double prefillMfu = 0.4;  // share of dense FP16 FLOP/s a prefill reaches
  double decodeHbm = 0.7;   // share of HBM bandwidth a decode step reaches
};
// The table (docs/serving-simulator.md): per catalogue type, with a default for the others.
GpuEfficiency gpuEfficiency(std::string_view gpuType);

// What one replica of `model` on one GPU of `gpuType` can do.
struct ReplicaPerf {
  double flopsPerSec = 0;   // effective
  double bytesPerSec = 0;   // effective HBM bandwidth
  double weightsBytes = 0;  // read once per decode step
  double flopsPerToken = 0;
  double attentionFlopsPerPair = 0;  // 0: attention not modelled (tests)
  double kvBytesPerToken = 0;
  std::int64_t kvCapacityTokens = 0;  // (memory x utilisation - weights - overhead) / KV per token
  int maxNumSeqs = 256;
  std::int64_t maxBatchedTokens = 8192;
  std::int64_t memoryMib = 0;  // what the engine holds on the card

  // Unloaded latency of a prompt of `tokens` alone (one iteration), microseconds.
  double prefillSeconds(std::int64_t tokens) const;
};
Result<ReplicaPerf> replicaPerf(const ServingModel& model, const model::GpuType& gpu);

// Cold start: weights read from the fastest tier that holds them, plus the engine's start-up.
enum class CacheTier { kHostMemory, kLocalDisk, kRemote };
const char* cacheTierName(CacheTier tier);
struct LoadTimes {
  double hostMemoryGBps = 20;        // page cache / pinned host memory to GPU
  double localDiskGBps = 3;          // NVMe
  double remoteGBps = 1;             // object store / network file system
  double engineStartupSeconds = 30;  // process, CUDA context, CUDA-graph capture
  double seconds(CacheTier tier, double weightsBytes) const;
};

// A replica on a share f in (0, 1] of one GPU (time-slicing / MPS): f of the whole-GPU
// replica's FLOP/s and HBM bandwidth (every iteration takes 1/f as long) and f of the memory
// the engine takes (memoryMib = floor(f x whole.memoryMib)), so a smaller KV cache. Fails when
// the weights and overhead leave no KV cache on the share.
Result<ReplicaPerf> sharePerf(const ReplicaPerf& whole, const ServingModel& model, double share);

// The placement request of one replica, with the memory the engine takes (weights + overhead +
// KV cache = perf.memoryMib): share 1 = the whole GPU, exclusive; share < 1 = a shared
// placement booking computeMilli = share x 1000 (perf from sharePerf).
model::PlacementRequest replicaRequest(const ServingModel& model, const ReplicaPerf& perf,
                                       const std::string& replicaId, const std::string& gpuType,
                                       const std::string& deployment, double share = 1);

}  // namespace tessera::sim
