#include "profile/estimate.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "config/loaders.h"
#include "profile/gguf_writer.h"
#include "profile/safetensors_writer.h"
#include "profile/test_util.h"

namespace tessera::profile {
namespace {

using testing::le64;
using testing::TempDir;
using testing::writeBytes;

constexpr const char* kLlama31_8BConfig = R"({
  "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "model_type": "llama", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "torch_dtype": "bfloat16",
  "vocab_size": 128256})";

struct Tensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

// Meta-Llama-3.1-8B's 291 tensors (8,030,261,248 parameters).
std::vector<Tensor> llama31_8BTensors() {
  std::vector<Tensor> t;
  t.push_back({"model.embed_tokens.weight", {128256, 4096}});
  for (int i = 0; i < 32; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "self_attn.q_proj.weight", {4096, 4096}});
    t.push_back({p + "self_attn.k_proj.weight", {1024, 4096}});
    t.push_back({p + "self_attn.v_proj.weight", {1024, 4096}});
    t.push_back({p + "self_attn.o_proj.weight", {4096, 4096}});
    t.push_back({p + "mlp.gate_proj.weight", {14336, 4096}});
    t.push_back({p + "mlp.up_proj.weight", {14336, 4096}});
    t.push_back({p + "mlp.down_proj.weight", {4096, 14336}});
    t.push_back({p + "input_layernorm.weight", {4096}});
    t.push_back({p + "post_attention_layernorm.weight", {4096}});
  }
  t.push_back({"model.norm.weight", {4096}});
  t.push_back({"lm_head.weight", {128256, 4096}});
  return t;
}

// A safetensors file with the real header of `tensors` (BF16) and a sparse data section:
// the full size on paper, no blocks on disk.
void writeSparseSafetensors(const std::string& path, const std::vector<Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    std::uint64_t n = 2;
    for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
    header[t.name] = {
        {"dtype", "BF16"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  writeBytes(path, le64(text.size()) + text);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(8 + text.size() + offset)), 0);
}

// Llama-3.1-8B as published: 4 shards, an index, config.json.
void writeLlama31_8B(const std::string& dir) {
  const auto all = llama31_8BTensors();
  nlohmann::json map = nlohmann::json::object();
  const std::size_t per = (all.size() + 3) / 4;
  for (std::size_t s = 0; s < 4; ++s) {
    const std::string shard = "model-0000" + std::to_string(s + 1) + "-of-00004.safetensors";
    std::vector<Tensor> part(
        all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), s * per)),
        all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), (s + 1) * per)));
    for (const Tensor& t : part) map[t.name] = shard;
    writeSparseSafetensors(dir + "/" + shard, part);
  }
  writeBytes(
      dir + "/model.safetensors.index.json",
      nlohmann::json{{"metadata", {{"total_size", 16060522496ull}}}, {"weight_map", map}}.dump());
  writeBytes(dir + "/config.json", kLlama31_8BConfig);
}

TEST(Estimate, Llama31_8BHandComputed) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/Meta-Llama-3.1-8B";
  std::filesystem::create_directory(dir);
  writeLlama31_8B(dir);

  auto model = inspectModel(dir);
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->format, ModelFormat::kSafetensors);
  EXPECT_EQ(model->name, "meta-llama-3.1-8b");  // the directory name, as a model name
  EXPECT_EQ(model->files.size(), 4u);
  EXPECT_EQ(model->configPath, dir + "/config.json");
  EXPECT_EQ(model->tensorCount, 291u);
  EXPECT_EQ(model->parameters, 8030261248u);
  EXPECT_EQ(model->weightBytes, 16060522496u);  // 2 bytes per parameter
  ASSERT_EQ(model->byDtype.size(), 1u);
  EXPECT_EQ(model->byDtype.at("BF16").bytes, 16060522496u);
  EXPECT_TRUE(model->notes.empty()) << model->notes.front();
  ASSERT_TRUE(model->shape);

  // Defaults: the model's full context (131,072), one sequence, KV in BF16.
  auto e = estimateMemory(*model, {});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->kvDtype.name, "BF16");
  EXPECT_EQ(e->kvBytesPerToken, 131072u);  // 32 × 8 × 128 × 2 × 2
  EXPECT_EQ(e->context, 131072);
  EXPECT_EQ(e->kvCacheBytes, 16ull << 30);  // 131,072 × 131,072 bytes = 16 GiB
  // 1 GiB + 5 % of 16,060,522,496 = 1,073,741,824 + 803,026,125 (rounded up).
  EXPECT_EQ(e->overheadBytes, 1876767949u);
  EXPECT_EQ(e->totalBytes, 16060522496u + (16ull << 30) + 1876767949u);
  EXPECT_EQ(e->perGpuBytes, e->totalBytes);

  const model::ModelProfile p = toModelProfile(*e, model->name);
  EXPECT_EQ(p.weightsMib, 15317);  // 15,316.3 MiB rounded up
  EXPECT_EQ(p.kvCacheMib, 16384);
  EXPECT_EQ(p.overheadMib, 1790);  // 1,789.8 MiB
  EXPECT_EQ(p.gpusPerReplica, 1);
  EXPECT_EQ(p.memoryPerGpuMib(), 15317 + 16384 + 1790);

  // 8k context × 16 sequences, FP8 KV cache, two GPUs.
  EstimateOptions o;
  o.context = 8192;
  o.concurrency = 16;
  o.kvDtype = "fp8";
  o.tensorParallel = 2;
  e = estimateMemory(*model, o);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->kvDtype.name, "F8_E4M3");
  EXPECT_EQ(e->kvBytesPerToken, 65536u);
  EXPECT_EQ(e->kvCacheBytes, 65536ull * 8192 * 16);  // 8 GiB
  EXPECT_EQ(e->overheadBytes, 2 * 1073741824ull + 803026125);
  EXPECT_EQ(e->perGpuBytes, (e->totalBytes + 1) / 2);
  EXPECT_TRUE(e->notes.empty());
  const model::ModelProfile p2 = toModelProfile(*e, "llama-8b");
  EXPECT_EQ(p2.kvCacheMib, 8192);
  EXPECT_EQ(p2.gpusPerReplica, 2);
  EXPECT_EQ(p2.memoryPerGpuMib(), (15317 + 8192 + 2814 + 1) / 2);

  // Notes: a context beyond the model's, heads that do not split over 3 GPUs.
  o = {};
  o.context = 200000;
  o.tensorParallel = 3;
  e = estimateMemory(*model, o);
  ASSERT_TRUE(e);
  ASSERT_EQ(e->notes.size(), 2u);
  EXPECT_NE(e->notes[0].find("beyond the model's maximum 131072"), std::string::npos);
  EXPECT_NE(e->notes[1].find("32 attention heads do not split evenly over 3 GPUs"),
            std::string::npos);
  // 8 KV heads over 3 GPUs: 3 per GPU, 9 in all.
  EXPECT_EQ(e->kvBytesPerToken, 32u * 9 * 256 * 2);
}

TEST(Estimate, RequestBodyIsAcceptedByTheApi) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/llama";
  std::filesystem::create_directory(dir);
  writeLlama31_8B(dir);
  auto model = inspectModel(dir);
  ASSERT_TRUE(model);
  EstimateOptions o;
  o.tensorParallel = 2;
  auto e = estimateMemory(*model, o);
  ASSERT_TRUE(e);
  const model::ModelProfile p = toModelProfile(*e, model->name);
  const auto body = modelRequestBody(p);
  EXPECT_EQ(body.dump(),
            R"({"name":"llama","weightsMib":15317,"kvCacheMib":16384,"overheadMib":2814,)"
            R"("gpusPerReplica":2})");
  // What POST /api/v1/models runs on a body (ControlPlane::putModel).
  auto parsed = config::parseRequestsYaml(
      nlohmann::json{{"models", nlohmann::json::array({nlohmann::json::parse(body.dump())})},
                     {"requests", nlohmann::json::array()}}
          .dump(1),
      "body", {});
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_EQ(parsed->models.size(), 1u);
  EXPECT_EQ(parsed->models[0].weightsMib, p.weightsMib);
  EXPECT_EQ(parsed->models[0].kvCacheMib, p.kvCacheMib);
  EXPECT_EQ(parsed->models[0].overheadMib, p.overheadMib);
  EXPECT_EQ(parsed->models[0].gpusPerReplica, 2);
  EXPECT_EQ(parsed->models[0].memoryPerGpuMib(), p.memoryPerGpuMib());
}

TEST(Estimate, SingleFileWithAndWithoutConfig) {
  TempDir tmp;
  const std::string path = tmp.file("tiny.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {{"w", "F16", {64, 64}}, {"b", "F32", {64}}}));
  auto model = inspectModel(path);
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->name, "tiny");
  EXPECT_EQ(model->weightBytes, 8192u + 256);
  EXPECT_EQ(model->parameters, 4096u + 64);
  EXPECT_FALSE(model->shape);
  ASSERT_EQ(model->notes.size(), 1u);
  EXPECT_NE(model->notes[0].find("no config.json"), std::string::npos);
  EXPECT_EQ(model->dominantFloatDtype(), "F16");
  auto e = estimateMemory(*model, {});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kvBytesPerToken, 0u);
  EXPECT_EQ(e->kvCacheBytes, 0u);
  EXPECT_EQ(e->context, kDefaultContext);
  EXPECT_EQ(e->kvDtype.name, "F16");  // from the weights

  // With config.json beside it (no dtype): KV in the weights' dtype.
  writeBytes(tmp.file("config.json"),
             R"({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
                 "max_position_embeddings": 1024})");
  model = inspectModel(path);
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->shape);
  e = estimateMemory(*model, {});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->context, 1024);
  EXPECT_EQ(e->kvBytesPerToken, 2u * 4 * 16 * 2 * 2);
  EXPECT_EQ(e->kvCacheBytes, 2u * 4 * 16 * 2 * 2 * 1024);

  // A broken config.json is an error naming it.
  writeBytes(tmp.file("config.json"), R"({"num_hidden_layers": 2})");
  auto bad = inspectModel(path);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, tmp.file("config.json") + ": num_attention_heads: missing");
}

TEST(Estimate, DirectoryOfUnindexedFiles) {
  TempDir tmp;
  ASSERT_TRUE(writeSafetensors(tmp.file("a.safetensors"), {{"x", "BF16", {8}}}));
  ASSERT_TRUE(writeSafetensors(tmp.file("b.safetensors"), {{"y", "F8_E4M3", {8}}}));
  auto model = inspectModel(tmp.path());
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->files.size(), 2u);
  EXPECT_EQ(model->byDtype.at("BF16").bytes, 16u);
  EXPECT_EQ(model->byDtype.at("F8_E4M3").bytes, 8u);
  EXPECT_EQ(model->byDtype.at("F8_E4M3").parameters, 8u);
  // The same tensor in two files and no index: refused.
  ASSERT_TRUE(writeSafetensors(tmp.file("c.safetensors"), {{"x", "BF16", {8}}}));
  auto dup = inspectModel(tmp.path());
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("tensor \"x\" is also in"), std::string::npos);
}

TEST(Estimate, GgufModel) {
  TempDir tmp;
  GgufSpec spec;
  spec.metadata = {
      {"general.architecture", GgufSpecValue::string("qwen2")},
      {"qwen2.block_count", GgufSpecValue::u32(4)},
      {"qwen2.attention.head_count", GgufSpecValue::u32(8)},
      {"qwen2.attention.head_count_kv", GgufSpecValue::u32(2)},
      {"qwen2.embedding_length", GgufSpecValue::u32(512)},
      {"qwen2.context_length", GgufSpecValue::u32(32768)},
  };
  spec.tensors = {{"token_embd.weight", {512, 1000}, 12}, {"output_norm.weight", {512}, 0}};
  ASSERT_TRUE(writeGguf(tmp.file("qwen-tiny-Q4_K_M.gguf"), spec));
  auto model = inspectModel(tmp.file("qwen-tiny-Q4_K_M.gguf"));
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->format, ModelFormat::kGguf);
  EXPECT_EQ(model->name, "qwen-tiny-q4-k-m");  // the file stem, as a model name
  EXPECT_EQ(model->byDtype.at("Q4_K").bytes, 512000u / 256 * 144);
  EXPECT_EQ(model->byDtype.at("F32").bytes, 2048u);
  EXPECT_EQ(model->parameters, 512000u + 512);
  EstimateOptions o;
  o.context = 4096;
  auto e = estimateMemory(*model, o);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->kvDtype.name, "F16");  // llama.cpp's default cache type
  EXPECT_EQ(e->kvBytesPerToken, 4u * 2 * 64 * 2 * 2);
  o.kvDtype = "q8_0";
  e = estimateMemory(*model, o);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kvBytesPerToken, 4u * 2 * 64 * 2 * 34 / 32);
  // The directory holding it works too.
  model = inspectModel(tmp.path());
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->format, ModelFormat::kGguf);
}

TEST(Estimate, InspectErrors) {
  TempDir tmp;
  auto r = inspectModel(tmp.file("nothing"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, tmp.file("nothing") + ": no such file or directory");
  r = inspectModel(tmp.path());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no .safetensors"), std::string::npos);
  writeBytes(tmp.file("config.json"), "{}");
  r = inspectModel(tmp.file("config.json"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("a JSON file"), std::string::npos);
  // A truncated shard of a sharded model: the shard is named.
  ASSERT_TRUE(writeSafetensors(tmp.file("s1.safetensors"), {{"a", "BF16", {1024}}}));
  writeBytes(tmp.file("model.safetensors.index.json"),
             R"({"weight_map": {"a": "s1.safetensors"}})");
  ASSERT_EQ(::truncate(tmp.file("s1.safetensors").c_str(), 100), 0);
  r = inspectModel(tmp.path());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind(tmp.file("s1.safetensors") + ": ", 0), 0u) << r.error().message;
  // A bad GGUF.
  writeBytes(tmp.file("x.gguf"), "GGUF" + std::string(3, '\0'));
  r = inspectModel(tmp.file("x.gguf"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind(tmp.file("x.gguf") + ": ", 0), 0u);
}

TEST(Estimate, OptionErrors) {
  ModelFiles m;
  m.weightBytes = 1 << 30;
  EstimateOptions o;
  o.tensorParallel = 0;
  EXPECT_FALSE(estimateMemory(m, o));
  o = {};
  o.tensorParallel = 17;
  EXPECT_FALSE(estimateMemory(m, o));
  o = {};
  o.concurrency = 0;
  EXPECT_FALSE(estimateMemory(m, o));
  o = {};
  o.context = -1;
  EXPECT_FALSE(estimateMemory(m, o));
  o = {};
  o.kvDtype = "fp7";
  auto r = estimateMemory(m, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--kv-dtype \"fp7\": not one of"), std::string::npos);
  o = {};
  o.activationFraction = -0.5;
  EXPECT_FALSE(estimateMemory(m, o));
  // A KV cache beyond what a profile may state.
  m.shape = ModelShape{};
  m.shape->layers = 100;
  m.shape->attentionHeads = m.shape->kvHeads = 64;
  m.shape->headDim = m.shape->valueHeadDim = 256;
  o = {};
  o.context = 1 << 30;
  o.concurrency = 1000;
  r = estimateMemory(m, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("16 TiB"), std::string::npos);
}

TEST(Estimate, KvDtypes) {
  EXPECT_FALSE(*parseKvDtype("auto"));
  EXPECT_EQ((*parseKvDtype("BF16"))->bytesPer32, 64u);
  EXPECT_EQ((*parseKvDtype("fp32"))->bytesPer32, 128u);
  EXPECT_EQ((*parseKvDtype("fp8_e5m2"))->name, "F8_E5M2");
  EXPECT_EQ((*parseKvDtype("q4_0"))->bytesPer32, 18u);
  EXPECT_FALSE(parseKvDtype(""));
}

}  // namespace
}  // namespace tessera::profile
