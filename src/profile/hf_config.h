#pragma once
// Reading a Hugging Face config.json: the attention shape of a transformer.
//
//   layers        num_hidden_layers (or n_layer, num_layers, n_layers)
//   heads         num_attention_heads (or n_head, num_heads)
//   KV heads      num_key_value_heads (or num_kv_heads, n_head_kv; multi_query: true = 1);
//                 default: heads. May be a list with one count per layer.
//   hidden size   hidden_size (or n_embd, d_model)
//   head dim      head_dim (default hidden_size / heads); v_head_dim for V when stated
//   context       max_position_embeddings (or n_positions, max_sequence_length, seq_length)
//   dtype         torch_dtype (or dtype): float16, bfloat16, float32, ...
//   MLA           kv_lora_rank + qk_rope_head_dim (DeepSeek V2/V3): the latent is cached
//
// Multimodal configs keep the language model's figures in a nested text_config (or
// llm_config, language_config); it is used when the top level has no layer count. Errors name
// the field ("text_config.num_attention_heads: ...").

#include <string>
#include <string_view>

#include "common/result.h"
#include "profile/model_shape.h"

namespace tessera::profile {

inline constexpr std::uint64_t kMaxConfigBytes = 16ull << 20;

Result<ModelShape> parseHfConfig(std::string_view json);
// Errors name the file.
Result<ModelShape> readHfConfig(const std::string& path);

// The safetensors dtype name of a torch dtype string ("bfloat16" → "BF16"); "" if unknown.
std::string torchDtypeToSafetensors(std::string_view torchDtype);

}  // namespace tessera::profile
