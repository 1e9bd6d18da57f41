#include "profile/hf_config.h"

#include <gtest/gtest.h>

namespace tessera::profile {
namespace {

// Meta-Llama-3.1-8B's config.json (the fields that matter, as published).
constexpr const char* kLlama31_8B = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

std::string error(std::string_view json) {
  auto r = parseHfConfig(json);
  return r ? "" : r.error().message;
}

TEST(HfConfig, Llama31_8B) {
  auto s = parseHfConfig(kLlama31_8B);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->architecture, "LlamaForCausalLM");
  EXPECT_EQ(s->layers, 32);
  EXPECT_EQ(s->attentionHeads, 32);
  EXPECT_EQ(s->kvHeads, 8);
  EXPECT_EQ(s->hiddenSize, 4096);
  EXPECT_EQ(s->headDim, 128);  // 4096 / 32
  EXPECT_EQ(s->valueHeadDim, 128);
  EXPECT_EQ(s->maxContext, 131072);
  EXPECT_EQ(s->dtype, "BF16");
  EXPECT_EQ(s->mlaCacheDim, 0);
  // 32 layers × 8 KV heads × 128 × 2 (K and V) = 65,536 elements; × 2 bytes = 131,072 bytes.
  EXPECT_EQ(s->kvElementsPerToken(), 65536u);
  EXPECT_EQ(s->kvElementsPerToken(2), 65536u);    // 4 heads on each of 2 GPUs
  EXPECT_EQ(s->kvElementsPerToken(16), 131072u);  // 8 heads replicated: one per GPU of 16
  EXPECT_EQ(s->kvFormula(), "32 layers × 8 KV heads × (128 + 128)");
}

TEST(HfConfig, DefaultsAndAliases) {
  // No num_key_value_heads: as many as attention heads; explicit head_dim wins.
  auto s = parseHfConfig(
      R"({"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512, "head_dim": 128})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->kvHeads, 8);
  EXPECT_EQ(s->headDim, 128);
  EXPECT_EQ(s->maxContext, 0);
  EXPECT_EQ(s->dtype, "");
  // head_dim: null means "derive it".
  s = parseHfConfig(
      R"({"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512, "head_dim": null})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->headDim, 64);
  // GPT-2 spellings.
  s = parseHfConfig(R"({"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024,
                        "torch_dtype": "float32"})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->layers, 12);
  EXPECT_EQ(s->headDim, 64);
  EXPECT_EQ(s->maxContext, 1024);
  EXPECT_EQ(s->dtype, "F32");
  // Falcon's multi_query; the newer "dtype" key.
  s = parseHfConfig(R"({"num_hidden_layers": 32, "num_attention_heads": 71, "hidden_size": 4544,
                        "multi_query": true, "dtype": "float16"})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->kvHeads, 1);
  EXPECT_EQ(s->dtype, "F16");
  // "auto" leaves the dtype to the weights.
  s = parseHfConfig(R"({"num_hidden_layers": 1, "num_attention_heads": 1, "hidden_size": 8,
                        "torch_dtype": "auto"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dtype, "");
}

TEST(HfConfig, NestedTextConfig) {
  // A multimodal config (Llama-3.2-Vision-like): the language model is under text_config, the
  // dtype at the top.
  auto s = parseHfConfig(R"({
    "architectures": ["MllamaForConditionalGeneration"],
    "torch_dtype": "bfloat16",
    "text_config": {"num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
                    "hidden_size": 4096, "max_position_embeddings": 131072},
    "vision_config": {"num_hidden_layers": 32, "attention_heads": 16, "hidden_size": 1280}
  })");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->architecture, "MllamaForConditionalGeneration");
  EXPECT_EQ(s->layers, 40);
  EXPECT_EQ(s->kvHeads, 8);
  EXPECT_EQ(s->dtype, "BF16");
  EXPECT_EQ(s->kvElementsPerToken(), 40u * 8 * 128 * 2);
  // Errors name the nested field.
  EXPECT_EQ(error(R"({"text_config": {"num_hidden_layers": 4, "hidden_size": 64}})"),
            "text_config.num_attention_heads: missing");
  EXPECT_EQ(error(R"({"text_config": 3})"), "text_config: must be an object, got number 3");
}

TEST(HfConfig, DeepSeekMla) {
  auto s = parseHfConfig(R"({"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "max_position_embeddings": 163840, "torch_dtype": "bfloat16"})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->mlaCacheDim, 576);
  EXPECT_EQ(s->kvElementsPerToken(), 61u * 576);  // 70,272 elements: 140,544 bytes in BF16
  EXPECT_EQ(s->kvElementsPerToken(8), 61u * 576 * 8);
}

TEST(HfConfig, PerLayerKvHeads) {
  auto s = parseHfConfig(R"({"num_hidden_layers": 3, "num_attention_heads": 8, "hidden_size": 512,
                              "num_key_value_heads": [2, 4, 0]})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->kvHeads, 4);
  EXPECT_EQ(s->kvElementsPerToken(), (2u + 4 + 0) * 64 * 2);
  EXPECT_NE(error(R"({"num_hidden_layers": 3, "num_attention_heads": 8, "hidden_size": 512,
                      "num_key_value_heads": [2, 4]})")
                .find("one count per layer (3), got 2"),
            std::string::npos);
}

TEST(HfConfig, Errors) {
  EXPECT_EQ(error(R"({"num_attention_heads": 8, "hidden_size": 512})"),
            "num_hidden_layers: missing");
  EXPECT_EQ(error(R"({"num_hidden_layers": 2, "hidden_size": 512})"),
            "num_attention_heads: missing");
  EXPECT_EQ(error(R"({"num_hidden_layers": "32", "num_attention_heads": 8, "hidden_size": 512})"),
            "num_hidden_layers: must be an integer, got string \"32\"");
  EXPECT_EQ(error(R"({"num_hidden_layers": 32.0, "num_attention_heads": 8, "hidden_size": 512})"),
            "num_hidden_layers: must be an integer, got number 32.0");
  EXPECT_EQ(error(R"({"num_hidden_layers": 0, "num_attention_heads": 8, "hidden_size": 512})"),
            "num_hidden_layers: must be in [1, 100000], got 0");
  EXPECT_EQ(error(R"({"num_hidden_layers": -3, "num_attention_heads": 8, "hidden_size": 512})"),
            "num_hidden_layers: must be in [1, 100000], got -3");
  EXPECT_EQ(error(R"({"num_hidden_layers": 1e400, "num_attention_heads": 8, "hidden_size": 512})")
                .substr(0, 12),
            "invalid JSON");
  EXPECT_EQ(error(R"({"num_hidden_layers": 18446744073709551615, "num_attention_heads": 8,
                      "hidden_size": 512})"),
            "num_hidden_layers: must be in [1, 100000], got 18446744073709551615");
  EXPECT_EQ(error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 16,
                      "hidden_size": 512})"),
            "num_key_value_heads: must be in [1, 8], got 16");
  EXPECT_EQ(error(R"({"num_hidden_layers": 2, "num_attention_heads": 8})"),
            "hidden_size: missing (needed for the head dimension when head_dim is not given)");
  EXPECT_EQ(error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 4})"),
            "hidden_size 4 is smaller than num_attention_heads 8");
  EXPECT_EQ(error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512,
                      "torch_dtype": "float12"})"),
            "torch_dtype: unknown dtype \"float12\" (known: float16, bfloat16, float32, float64, "
            "float8_e4m3fn, float8_e5m2, auto)");
  EXPECT_EQ(error(R"({"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512,
                      "torch_dtype": 16})"),
            "torch_dtype: must be a string, got number 16");
  EXPECT_EQ(error("[1, 2]"), "expected a JSON object, got an array");
  EXPECT_EQ(error("{").substr(0, 12), "invalid JSON");
  EXPECT_EQ(error(std::string(100, '[')).substr(0, 15), "JSON nested dee");
}

TEST(HfConfig, ReadNamesTheFile) {
  auto r = readHfConfig("/nonexistent/config.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "/nonexistent/config.json: no such file");
}

}  // namespace
}  // namespace tessera::profile
