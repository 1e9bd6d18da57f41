#include "profile/gguf.h"

#include <gtest/gtest.h>

#include "profile/gguf_writer.h"
#include "profile/model_shape.h"
#include "profile/test_util.h"

namespace tessera::profile {
namespace {

using testing::le64;
using testing::TempDir;
using testing::writeBytes;

GgufSpec llamaSpec() {
  GgufSpec spec;
  spec.metadata = {
      {"general.architecture", GgufSpecValue::string("llama")},
      {"general.name", GgufSpecValue::string("tiny llama")},
      {"llama.block_count", GgufSpecValue::u32(2)},
      {"llama.attention.head_count", GgufSpecValue::u32(4)},
      {"llama.attention.head_count_kv", GgufSpecValue::u32(2)},
      {"llama.embedding_length", GgufSpecValue::u32(64)},
      {"llama.context_length", GgufSpecValue::u32(2048)},
      {"llama.rope.freq_base", GgufSpecValue::f32(500000.0f)},
      {"general.file_type", GgufSpecValue::i32(15)},
      {"tokenizer.ggml.tokens", GgufSpecValue::stringArray({"<s>", "</s>", "hello", ""})},
      {"tokenizer.ggml.token_type", GgufSpecValue::intArray(GgufType::kInt32, {3, 3, 1, 1})},
      {"tokenizer.ggml.add_bos_token", GgufSpecValue::boolean(true)},
  };
  spec.tensors = {
      {"token_embd.weight", {64, 100}, 1},      // F16: 6400 × 2 = 12800
      {"blk.0.attn_q.weight", {64, 64}, 2},     // Q4_0: 4096 / 32 × 18 = 2304
      {"blk.0.ffn_up.weight", {256, 4}, 12},    // Q4_K: 1024 / 256 × 144 = 576
      {"blk.0.attn_norm.weight", {64}, 0},      // F32: 256
      {"blk.1.ffn_down.weight", {256, 2}, 14},  // Q6_K: 2 × 210 = 420
      {"output.weight", {32, 3}, 8},            // Q8_0: 3 × 34 = 102
  };
  return spec;
}

std::string bytesOf(const GgufSpec& spec) {
  auto b = ggufBytes(spec);
  EXPECT_TRUE(b) << (b ? "" : b.error().message);
  return b ? *b : std::string();
}

std::string parseError(std::string_view bytes) {
  auto r = parseGguf(bytes, bytes.size());
  return r ? "" : r.error().message;
}

TEST(Gguf, V3RoundTrip) {
  const std::string bytes = bytesOf(llamaSpec());
  auto file = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->version, 3u);
  EXPECT_EQ(file->alignment, 32u);
  EXPECT_EQ(file->dataOffset % 32, 0u);
  EXPECT_EQ(file->getString("general.architecture"), "llama");
  EXPECT_EQ(file->getInt("llama.block_count"), 2);
  EXPECT_EQ(file->getInt("general.file_type"), 15);
  const GgufValue* tokens = file->find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->type, GgufType::kArray);
  EXPECT_EQ(tokens->elementType, GgufType::kString);
  EXPECT_EQ(tokens->count, 4u);
  const GgufValue* types = file->find("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(types->ints, (std::vector<std::int64_t>{3, 3, 1, 1}));
  EXPECT_DOUBLE_EQ(std::get<double>(file->find("llama.rope.freq_base")->scalar), 500000.0);
  EXPECT_TRUE(std::get<bool>(file->find("tokenizer.ggml.add_bos_token")->scalar));

  ASSERT_EQ(file->tensors.size(), 6u);
  const std::vector<std::pair<std::string, std::uint64_t>> expected = {
      {"F16", 12800}, {"Q4_0", 2304}, {"Q4_K", 576}, {"F32", 256}, {"Q6_K", 420}, {"Q8_0", 102}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(file->tensors[i].typeName, expected[i].first) << i;
    EXPECT_EQ(file->tensors[i].bytes, expected[i].second) << i;
    EXPECT_EQ(file->tensors[i].offset % 32, 0u) << i;
  }
  EXPECT_EQ(file->tensors[0].elements, 6400u);
  EXPECT_EQ(file->tensors[0].dims, (std::vector<std::uint64_t>{64, 100}));
  EXPECT_EQ(file->tensorBytes(), 12800u + 2304 + 576 + 256 + 420 + 102);

  auto shape = shapeFromGguf(*file);
  ASSERT_TRUE(shape) << shape.error().message;
  ASSERT_TRUE(*shape);
  EXPECT_EQ((*shape)->architecture, "llama");
  EXPECT_EQ((*shape)->layers, 2);
  EXPECT_EQ((*shape)->attentionHeads, 4);
  EXPECT_EQ((*shape)->kvHeads, 2);
  EXPECT_EQ((*shape)->headDim, 16);
  EXPECT_EQ((*shape)->maxContext, 2048);
  EXPECT_EQ((*shape)->kvElementsPerToken(), 2u * 2 * 16 * 2);
}

TEST(Gguf, ReadFromFileAndV2) {
  TempDir dir;
  GgufSpec spec = llamaSpec();
  spec.version = 2;
  ASSERT_TRUE(writeGguf(dir.file("m.gguf"), spec));
  auto file = readGguf(dir.file("m.gguf"));
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->version, 2u);
  EXPECT_EQ(file->path, dir.file("m.gguf"));
  EXPECT_EQ(file->tensors.size(), 6u);
  auto missing = readGguf(dir.file("none.gguf"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("none.gguf: no such file"), std::string::npos);
}

TEST(Gguf, LargeHeaderReadInWindows) {
  // A vocabulary of 200,000 tokens: several MiB of header, read through the 1 MiB window.
  GgufSpec spec = llamaSpec();
  std::vector<std::string> tokens;
  for (int i = 0; i < 200000; ++i) tokens.push_back("token-" + std::to_string(i));
  spec.metadata.emplace_back("tokenizer.ggml.merges", GgufSpecValue::stringArray(tokens));
  TempDir dir;
  ASSERT_TRUE(writeGguf(dir.file("big.gguf"), spec));
  auto file = readGguf(dir.file("big.gguf"));
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_GT(file->dataOffset, 3u << 20);
  EXPECT_EQ(file->find("tokenizer.ggml.merges")->count, 200000u);
  EXPECT_EQ(file->tensors.size(), 6u);
}

TEST(Gguf, AlignmentAndPerLayerHeads) {
  GgufSpec spec = llamaSpec();
  spec.alignment = 64;
  spec.metadata.emplace_back("general.alignment", GgufSpecValue::u32(64));
  // Per-layer KV heads (a hybrid model: layer 1 has no attention).
  spec.metadata[4].second = GgufSpecValue::intArray(GgufType::kUint32, {2, 0});
  const std::string bytes = bytesOf(spec);
  auto file = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->alignment, 64u);
  EXPECT_EQ(file->dataOffset % 64, 0u);
  auto shape = shapeFromGguf(*file);
  ASSERT_TRUE(shape) << shape.error().message;
  EXPECT_EQ((*shape)->perLayerKvHeads, (std::vector<std::int64_t>{2, 0}));
  EXPECT_EQ((*shape)->kvElementsPerToken(), 2u * 16 * 2);
  EXPECT_EQ((*shape)->kvElementsPerToken(4), 4u * 16 * 2);  // 2 heads replicated over 4 GPUs
}

TEST(Gguf, MlaShape) {
  GgufSpec spec;
  spec.metadata = {
      {"general.architecture", GgufSpecValue::string("deepseek2")},
      {"deepseek2.block_count", GgufSpecValue::u32(61)},
      {"deepseek2.attention.head_count", GgufSpecValue::u32(128)},
      {"deepseek2.attention.head_count_kv", GgufSpecValue::u32(128)},
      {"deepseek2.embedding_length", GgufSpecValue::u32(7168)},
      {"deepseek2.attention.key_length", GgufSpecValue::u32(192)},
      {"deepseek2.attention.value_length", GgufSpecValue::u32(128)},
      {"deepseek2.attention.kv_lora_rank", GgufSpecValue::u32(512)},
      {"deepseek2.rope.dimension_count", GgufSpecValue::u32(64)},
      {"deepseek2.context_length", GgufSpecValue::u32(163840)},
  };
  const std::string bytes = bytesOf(spec);
  auto file = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(file) << file.error().message;
  auto shape = shapeFromGguf(*file);
  ASSERT_TRUE(shape) << shape.error().message;
  EXPECT_EQ((*shape)->mlaCacheDim, 576);
  EXPECT_EQ((*shape)->kvElementsPerToken(), 61u * 576);
}

TEST(Gguf, ShapeErrors) {
  GgufSpec spec = llamaSpec();
  spec.metadata.erase(spec.metadata.begin() + 2);  // llama.block_count
  std::string bytes = bytesOf(spec);
  auto file = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(file);
  auto shape = shapeFromGguf(*file);
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.error().message.find("\"llama.block_count\" is missing"), std::string::npos);

  spec = llamaSpec();
  spec.metadata[3].second = GgufSpecValue::string("four");  // head_count
  bytes = bytesOf(spec);
  file = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(file);
  shape = shapeFromGguf(*file);
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.error().message.find("\"llama.attention.head_count\" must be an integer"),
            std::string::npos);

  spec = llamaSpec();
  spec.metadata[0].second = GgufSpecValue::string("l\x1b[2Jlama");  // not a name
  bytes = bytesOf(spec);
  file = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(file);
  shape = shapeFromGguf(*file);
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.error().message.find("\"l?[2Jlama\" is not a name"), std::string::npos);

  spec = llamaSpec();
  spec.metadata.erase(spec.metadata.begin());  // no architecture: no shape, not an error
  bytes = bytesOf(spec);
  file = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(file);
  shape = shapeFromGguf(*file);
  ASSERT_TRUE(shape);
  EXPECT_FALSE(*shape);
}

// The header of a file with `tensorCount` tensors and `kvCount` pairs, then `rest`.
std::string header(std::uint32_t version, std::uint64_t tensorCount, std::uint64_t kvCount,
                   std::string_view rest) {
  std::string out = "GGUF";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((version >> (8 * i)) & 0xff);
  return out + le64(tensorCount) + le64(kvCount) + std::string(rest);
}

std::string u32(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string gstr(std::string_view s) {
  return le64(s.size()) + std::string(s);
}

TEST(Gguf, HeaderErrors) {
  EXPECT_NE(parseError("GGU").find("too short"), std::string::npos);
  EXPECT_NE(parseError("GGML" + std::string(20, '\0')).find("bad magic \"GGML\""),
            std::string::npos);
  EXPECT_NE(parseError(header(1, 0, 0, "")).find("version 1 is not supported"), std::string::npos);
  EXPECT_NE(parseError(header(4, 0, 0, "")).find("unsupported GGUF version 4"), std::string::npos);
  EXPECT_NE(parseError(header(0x03000000, 0, 0, "")).find("big-endian"), std::string::npos);
  EXPECT_NE(parseError("GGUF" + u32(3) + "abc").find("tensor count at byte 8 needs 8 bytes"),
            std::string::npos);
  EXPECT_EQ(parseError(header(3, 0, 0, "")), "");  // an empty model is a valid file

  // Lying counts fail before any loop or allocation.
  EXPECT_NE(parseError(header(3, 0, UINT64_MAX, "")).find("metadata count"), std::string::npos);
  EXPECT_NE(parseError(header(3, UINT64_MAX, 0, "")).find("tensor count"), std::string::npos);
  EXPECT_NE(parseError(header(3, 1ull << 40, 0, std::string(100, '\0'))).find("tensor count"),
            std::string::npos);
  // A string longer than the file.
  EXPECT_NE(parseError(header(3, 0, 1, le64(1000) + std::string(20, 'x')))
                .find("past the end of the file"),
            std::string::npos);
  // A key beyond the key bound (even inside the file).
  EXPECT_NE(parseError(header(3, 0, 1, le64(100000) + std::string(100100, 'k')))
                .find("exceeds the limit"),
            std::string::npos);
  // An array claiming 2^60 u32 elements.
  EXPECT_NE(parseError(header(3, 0, 1, gstr("a") + u32(9) + u32(4) + le64(1ull << 60) + "xxxx"))
                .find("array of 1152921504606846976 uint32 needs at least"),
            std::string::npos);
  // An array claiming 2^62 strings (× 8 bytes overflows).
  EXPECT_NE(parseError(header(3, 0, 1, gstr("a") + u32(9) + u32(8) + le64(1ull << 62) + "xxxx"))
                .find("array of"),
            std::string::npos);
  // Unknown value types.
  EXPECT_NE(parseError(header(3, 0, 1, gstr("a") + u32(13) + "x")).find("unknown value type 13"),
            std::string::npos);
  EXPECT_NE(parseError(header(3, 0, 1, gstr("a") + u32(9) + u32(77) + le64(0)))
                .find("unknown array element type 77"),
            std::string::npos);
  // Arrays of arrays nested too deep.
  std::string nested = gstr("a") + u32(9);
  for (int i = 0; i < 6; ++i) nested += u32(9) + le64(1);
  nested += u32(4) + le64(0);
  EXPECT_NE(parseError(header(3, 0, 1, nested)).find("nested deeper"), std::string::npos);
  // Empty and duplicate keys.
  EXPECT_NE(parseError(header(3, 0, 1, gstr("") + u32(0) + "x")).find("is empty"),
            std::string::npos);
  EXPECT_NE(parseError(header(3, 0, 2, gstr("a") + u32(0) + "x" + gstr("a") + u32(0) + "y"))
                .find("metadata \"a\": duplicate key"),
            std::string::npos);
}

TEST(Gguf, TensorErrors) {
  const auto withTensors = [](std::vector<GgufSpecTensor> tensors) {
    GgufSpec spec;
    spec.tensors = std::move(tensors);
    return parseError(bytesOf(spec));
  };
  EXPECT_EQ(withTensors({{"a", {32}, 2}}), "");
  EXPECT_NE(withTensors({{"a", {33}, 2}}).find("not a multiple of the Q4_0 block size 32"),
            std::string::npos);
  EXPECT_NE(withTensors({{"a", {1}, 0}, {"a", {1}, 0}}).find("tensor \"a\": duplicate name"),
            std::string::npos);
  EXPECT_NE(withTensors({{"a", {1}, 0, 4}}).find("not a multiple of the alignment 32"),
            std::string::npos);
  EXPECT_NE(withTensors({{"a", {16}, 0, 0}, {"b", {16}, 0, 32}}).find("overlap"),
            std::string::npos);
  EXPECT_EQ(withTensors({{"a", {8}, 0, 0}, {"b", {8}, 0, 32}}), "");

  // Unknown and removed ggml types name the id; hand-written, since the writer refuses them.
  const auto tensorInfo = [](std::uint32_t nDims, std::vector<std::uint64_t> dims,
                             std::uint32_t type, std::uint64_t offset) {
    std::string s = gstr("t") + u32(nDims);
    for (auto d : dims) s += le64(d);
    return s + u32(type) + le64(offset);
  };
  const std::string pad(64, '\0');
  EXPECT_NE(
      parseError(header(3, 1, 0, tensorInfo(1, {32}, 4, 0) + pad)).find("unknown ggml type 4"),
      std::string::npos);
  EXPECT_NE(parseError(header(3, 1, 0, tensorInfo(1, {32}, 200, 0) + pad))
                .find("tensor \"t\": unknown ggml type 200"),
            std::string::npos);
  EXPECT_NE(parseError(header(3, 1, 0, tensorInfo(5, {1, 1, 1, 1, 1}, 0, 0) + pad))
                .find("5 dimensions, more than 4"),
            std::string::npos);
  EXPECT_NE(parseError(header(3, 1, 0, tensorInfo(2, {1ull << 40, 1ull << 40}, 0, 0) + pad))
                .find("element count overflows"),
            std::string::npos);
  // Data past the end of the file.
  EXPECT_NE(parseError(header(3, 1, 0, tensorInfo(1, {1024}, 0, 0) + pad)).find("run past the end"),
            std::string::npos);
  // The data section starts past the end (the header is not padded).
  EXPECT_NE(parseError(header(3, 1, 0, tensorInfo(1, {0}, 0, 0))).find("starts past the end"),
            std::string::npos);
  // Bad alignment values.
  GgufSpec spec;
  spec.metadata = {{"general.alignment", GgufSpecValue::u32(48)}};
  EXPECT_NE(parseError(bytesOf(spec)).find("power of two"), std::string::npos);
  spec.metadata = {{"general.alignment", GgufSpecValue::u32(0)}};
  EXPECT_NE(parseError(bytesOf(spec)).find("power of two"), std::string::npos);
}

TEST(Gguf, TruncatedAnywhere) {
  // Every prefix of a valid file is refused with a message, never a crash.
  const std::string bytes = bytesOf(llamaSpec());
  auto whole = parseGguf(bytes, bytes.size());
  ASSERT_TRUE(whole);
  for (std::size_t n = 0; n < whole->dataOffset; ++n) {
    const std::string_view prefix(bytes.data(), n);
    EXPECT_FALSE(parseGguf(prefix, n)) << n;
    // Given only part of a longer file: "truncated" until the header is complete.
    auto r = parseGguf(prefix, bytes.size());
    if (!r) {
      EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << n << r.error().message;
    } else {
      EXPECT_EQ(r->tensors.size(), 6u);
    }
  }
  // The whole header but no data: the tensors run past the end.
  auto r = parseGguf(std::string_view(bytes).substr(0, whole->dataOffset), whole->dataOffset);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("run past the end"), std::string::npos);
}

TEST(Gguf, GgmlTypeTable) {
  // Block sizes and bytes per block of ggml.c's type_traits.
  EXPECT_EQ(findGgmlType(10)->typeSize, 84u);   // Q2_K
  EXPECT_EQ(findGgmlType(11)->typeSize, 110u);  // Q3_K
  EXPECT_EQ(findGgmlType(13)->typeSize, 176u);  // Q5_K
  EXPECT_EQ(findGgmlType(15)->typeSize, 292u);  // Q8_K
  EXPECT_EQ(findGgmlType(23)->typeSize, 136u);  // IQ4_XS
  EXPECT_EQ(findGgmlType(30)->name, "BF16");
  EXPECT_EQ(findGgmlType(39)->blockSize, 32u);  // MXFP4
  EXPECT_FALSE(findGgmlType(4));
  EXPECT_FALSE(findGgmlType(31));
  EXPECT_FALSE(findGgmlType(1000));
}

}  // namespace
}  // namespace tessera::profile
