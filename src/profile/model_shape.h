#pragma once
// The attention shape of a model: what the KV-cache estimate needs. Read from a Hugging Face
// config.json (hf_config.h) or from GGUF metadata (shapeFromGguf).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "profile/gguf.h"

namespace tessera::profile {

// Bounds on what a config may state (far beyond any model; they keep products in 64 bits).
inline constexpr std::int64_t kMaxLayers = 100'000;
inline constexpr std::int64_t kMaxHeads = 100'000;
inline constexpr std::int64_t kMaxHeadDim = 1 << 20;
inline constexpr std::int64_t kMaxHiddenSize = 1 << 24;
inline constexpr std::int64_t kMaxContext = 1ll << 32;

struct ModelShape {
  std::string architecture;  // "LlamaForCausalLM" (config.json) or "llama" (GGUF)
  std::int64_t layers = 0;
  std::int64_t attentionHeads = 0;
  std::int64_t kvHeads = 0;                   // KV heads per layer (the largest, when per-layer)
  std::vector<std::int64_t> perLayerKvHeads;  // when they differ by layer; empty = kvHeads each
  std::int64_t headDim = 0;                   // K head dimension
  std::int64_t valueHeadDim = 0;              // V head dimension (usually headDim)
  std::int64_t hiddenSize = 0;                // 0 when not stated
  std::int64_t maxContext = 0;                // 0 when not stated
  std::string dtype;             // the config's dtype as a safetensors name ("BF16"); "" unknown
  std::int64_t mlaCacheDim = 0;  // multi-head latent attention: cached values per layer
                                 // (kv_lora_rank + qk_rope_head_dim); 0 = ordinary attention

  // KV-cache elements one token needs, on all the GPUs of a replica with tensor-parallel
  // degree `tp` together: every layer's K and V heads. Each GPU holds ceil(kvHeads / tp)
  // heads (heads are replicated when tp exceeds them); MLA's latent is replicated on every
  // GPU.
  std::uint64_t kvElementsPerToken(int tp = 1) const;
  // "32 layers × 8 KV heads × (128 + 128)" for the table output.
  std::string kvFormula(int tp = 1) const;
};

// The shape from GGUF metadata: general.architecture, then <arch>.block_count,
// .attention.head_count, .attention.head_count_kv (a number or one per layer; default
// head_count), .embedding_length, .attention.key_length / .value_length (default
// embedding_length / head_count), .context_length, and for MLA models .attention.kv_lora_rank
// with .rope.dimension_count. nullopt when the file has no general.architecture.
Result<std::optional<ModelShape>> shapeFromGguf(const GgufFile& file);

// Validation shared by both sources: counts within bounds, kvHeads <= heads and so on.
Result<void> checkShape(const ModelShape& shape);

}  // namespace tessera::profile
