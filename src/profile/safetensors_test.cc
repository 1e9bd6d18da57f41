#include "profile/safetensors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "profile/safetensors_writer.h"
#include "profile/test_util.h"

namespace tessera::profile {
namespace {

using testing::le64;
using testing::readBytes;
using testing::safetensorsBytes;
using testing::TempDir;
using testing::writeBytes;

// The error of parsing `header` followed by `dataBytes` bytes ("" when it parses).
std::string headerError(std::string_view header, std::uint64_t dataBytes) {
  const std::string bytes = safetensorsBytes(header, dataBytes);
  auto r = parseSafetensorsHeader(bytes, bytes.size());
  return r ? "" : r.error().message;
}

TEST(Safetensors, WriterRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<TensorSpec> specs = {
      {"embed.weight", "BF16", {10, 16}}, {"norm.weight", "F32", {16}}, {"scale", "F64", {}},
      {"empty", "F16", {0, 4}},           {"mask", "BOOL", {3}},        {"q", "F8_E4M3", {5, 3}},
      {"packed", "F4", {2, 3}},
  };
  ASSERT_TRUE(writeSafetensors(path, specs, {{"format", "pt"}}));
  auto file = readSafetensors(path);
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->path, path);
  EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(file->dataOffset % 8, 0u);
  EXPECT_EQ(file->fileSize, std::filesystem::file_size(path));
  ASSERT_EQ(file->tensors.size(), specs.size());
  EXPECT_TRUE(file->holes.empty());
  EXPECT_EQ(file->tensorBytes(), 320u + 64 + 8 + 0 + 3 + 15 + 3);
  EXPECT_EQ(file->dataBytes(), file->tensorBytes());

  // Written in order, contiguous; the bytes are the tensor's pattern.
  const std::string bytes = readBytes(path);
  std::uint64_t expectBegin = 0;
  for (const TensorSpec& spec : specs) {
    const auto it = std::find_if(file->tensors.begin(), file->tensors.end(),
                                 [&](const TensorInfo& t) { return t.name == spec.name; });
    ASSERT_NE(it, file->tensors.end()) << spec.name;
    EXPECT_EQ(it->dtype, spec.dtype);
    EXPECT_EQ(it->shape, spec.shape);
    EXPECT_EQ(it->begin, expectBegin) << spec.name;
    expectBegin = it->end;
    const auto* data =
        reinterpret_cast<const std::byte*>(bytes.data() + file->dataOffset + it->begin);
    EXPECT_EQ(tensorPatternMismatch(tensorPatternSeed(spec.name), 0, data, it->bytes()), -1);
    if (it->bytes() > 3) {
      // Any sub-range matches too, and a flipped byte is found.
      EXPECT_EQ(tensorPatternMismatch(tensorPatternSeed(spec.name), 3, data + 3, it->bytes() - 3),
                -1);
      std::string copy(reinterpret_cast<const char*>(data), it->bytes());
      copy[it->bytes() - 1] ^= 1;
      EXPECT_EQ(tensorPatternMismatch(tensorPatternSeed(spec.name), 0,
                                      reinterpret_cast<const std::byte*>(copy.data()), copy.size()),
                static_cast<std::int64_t>(it->bytes() - 1));
    }
  }
}

TEST(Safetensors, PatternIsDocumentedFormula) {
  const std::uint64_t seed = tensorPatternSeed("a");
  EXPECT_EQ(seed, 0xaf63dc4c8601ec8cull);  // FNV-1a-64("a")
  std::byte out[16];
  tensorPatternFill(seed, 0, out, 16);
  std::uint64_t w0 = 0, w1 = 0;
  std::memcpy(&w0, out, 8);
  std::memcpy(&w1, out + 8, 8);
  EXPECT_EQ(w0, seed ^ 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(w1, seed ^ (2 * 0x9E3779B97F4A7C15ull));
  std::byte mid[5];
  tensorPatternFill(seed, 6, mid, 5);
  EXPECT_EQ(std::memcmp(mid, out + 6, 5), 0);
}

TEST(Safetensors, WriterRefusesBadSpecs) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  EXPECT_FALSE(writeSafetensors(path, {{"a", "F17", {1}}}));
  EXPECT_FALSE(writeSafetensors(path, {{"a", "F16", {-1}}}));
  EXPECT_FALSE(writeSafetensors(path, {{"a", "F16", {1}}, {"a", "F16", {1}}}));
  EXPECT_FALSE(writeSafetensors(path, {{"__metadata__", "F16", {1}}}));
  EXPECT_FALSE(writeSafetensors(path, {{"a", "F32", {INT64_MAX, 4}}}));
  EXPECT_FALSE(writeSafetensors(dir.file("no/such/dir/x.safetensors"), {{"a", "F16", {1}}}));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Safetensors, SyntheticModel) {
  TempDir dir;
  const std::string path = dir.file("synthetic.safetensors");
  const std::uint64_t total = (64ull << 20) + 6;
  ASSERT_TRUE(writeSyntheticModel(path, total));
  auto file = readSafetensors(path);
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->tensors.size(), 64u);
  EXPECT_EQ(file->tensorBytes(), total);
  EXPECT_EQ(file->metadata.at("tessera"), "synthetic");
  for (const TensorInfo& t : file->tensors) EXPECT_EQ(t.dtype, "BF16");
  EXPECT_EQ(file->tensors.front().shape, (std::vector<std::int64_t>{128, 4096}));

  // Small sizes: fewer tensors, odd byte counts rounded down, zero bytes still a valid file.
  ASSERT_TRUE(writeSyntheticModel(path, 7, 64));
  file = readSafetensors(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->tensors.size(), 3u);
  EXPECT_EQ(file->tensorBytes(), 6u);
  ASSERT_TRUE(writeSyntheticModel(path, 0));
  file = readSafetensors(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->tensorBytes(), 0u);
  EXPECT_FALSE(writeSyntheticModel(path, 100, 0));
}

TEST(Safetensors, SyntheticModelIsFast) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(writeSyntheticModel(dir.file("big.safetensors"), 256ull << 20));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // 256 MiB; generous for a slow disk and a sanitizer build, but catches byte-at-a-time code.
  EXPECT_LT(seconds, 20.0);
  auto file = readSafetensors(dir.file("big.safetensors"));
  ASSERT_TRUE(file);
  EXPECT_EQ(file->tensorBytes(), 256ull << 20);
}

TEST(Safetensors, HandWrittenHeader) {
  const std::string header =
      R"({"b":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}})";
  const std::string bytes = safetensorsBytes(header, 16);
  auto file = parseSafetensorsHeader(bytes, bytes.size());
  ASSERT_TRUE(file) << file.error().message;
  ASSERT_EQ(file->tensors.size(), 2u);
  EXPECT_EQ(file->tensors[0].name, "a");  // data order
  EXPECT_EQ(file->tensors[1].name, "b");
  EXPECT_EQ(file->tensors[1].elements(), 4u);
  EXPECT_EQ(file->dataOffset, 8 + header.size());
  EXPECT_EQ(file->metadata.at("k"), "v");
  EXPECT_TRUE(file->path.empty());
  // Bytes past the header are ignored: only the first 8 + N are needed.
  auto prefix =
      parseSafetensorsHeader(std::string_view(bytes).substr(0, 8 + header.size()), bytes.size());
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->tensors.size(), 2u);
}

TEST(Safetensors, HolesAreReported) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
                             R"("b":{"dtype":"U8","shape":[2],"data_offsets":[10,12]}})";
  const std::string bytes = safetensorsBytes(header, 20);
  auto file = parseSafetensorsHeader(bytes, bytes.size());
  ASSERT_TRUE(file) << file.error().message;
  ASSERT_EQ(file->holes.size(), 3u);
  EXPECT_EQ(file->holes[0].begin, 0u);
  EXPECT_EQ(file->holes[0].end, 4u);
  EXPECT_EQ(file->holes[1].begin, 8u);
  EXPECT_EQ(file->holes[1].end, 10u);
  EXPECT_EQ(file->holes[2].begin, 12u);
  EXPECT_EQ(file->holes[2].end, 20u);
}

TEST(Safetensors, ValidationErrors) {
  const auto t = [](std::string_view name, std::string_view dtype, std::string_view shape,
                    std::string_view offsets) {
    return "\"" + std::string(name) + "\":{\"dtype\":\"" + std::string(dtype) +
           "\",\"shape\":" + std::string(shape) + ",\"data_offsets\":" + std::string(offsets) + "}";
  };
  EXPECT_EQ(headerError("{" + t("a", "F16", "[2]", "[0,4]") + "}", 4), "");

  EXPECT_NE(headerError("{" + t("a", "F17", "[2]", "[0,4]") + "}", 4).find("unknown dtype \"F17\""),
            std::string::npos);
  EXPECT_NE(headerError("{" + t("a", "F16", "[3]", "[0,4]") + "}", 4)
                .find("shape [3] of F16 is 6 bytes, but data_offsets [0, 4] span 4"),
            std::string::npos);
  EXPECT_NE(headerError("{" + t("a", "F16", "[-2]", "[0,4]") + "}", 4).find("integers >= 0"),
            std::string::npos);
  EXPECT_NE(headerError("{" + t("a", "F16", "[2.5]", "[0,4]") + "}", 4).find("integers >= 0"),
            std::string::npos);
  EXPECT_NE(headerError("{" + t("a", "F16", "[2]", "[4,0]") + "}", 4).find("end before"),
            std::string::npos);
  EXPECT_NE(headerError("{" + t("a", "F16", "[2]", "[0]") + "}", 4).find("[begin, end]"),
            std::string::npos);
  EXPECT_NE(headerError("{" + t("a", "F16", "[2]", "[4,8]") + "}", 4).find("run past the end"),
            std::string::npos);
  // Element count × size overflows 64 bits.
  EXPECT_NE(headerError("{" + t("a", "F64", "[4294967296,4294967296]", "[0,0]") + "}", 0)
                .find("too large"),
            std::string::npos);
  EXPECT_NE(headerError("{" + t("a", "F16", "[18446744073709551615]", "[0,0]") + "}", 0)
                .find("integers >= 0"),
            std::string::npos);
  // F4 elements must fill whole bytes.
  EXPECT_NE(headerError("{" + t("a", "F4", "[3]", "[0,2]") + "}", 2).find("not whole bytes"),
            std::string::npos);
  // Overlap.
  EXPECT_NE(headerError(
                "{" + t("a", "F16", "[2]", "[0,4]") + "," + t("b", "F16", "[2]", "[2,6]") + "}", 6)
                .find("tensors \"a\" [0, 4) and \"b\" [2, 6) overlap"),
            std::string::npos);
  // Identical ranges overlap too; an empty tensor inside another does not.
  EXPECT_NE(headerError(
                "{" + t("a", "F16", "[2]", "[0,4]") + "," + t("b", "F16", "[2]", "[0,4]") + "}", 4),
            "");
  EXPECT_EQ(headerError(
                "{" + t("a", "F16", "[2]", "[0,4]") + "," + t("b", "F16", "[0]", "[2,2]") + "}", 4),
            "");
  // Duplicate names (JSON would keep only the last).
  EXPECT_NE(headerError(
                "{" + t("a", "F16", "[2]", "[0,4]") + "," + t("a", "F16", "[2]", "[4,8]") + "}", 8)
                .find("duplicate key \"a\""),
            std::string::npos);
  // Structure.
  EXPECT_NE(headerError("[1,2]", 0).find("does not start with '{'"), std::string::npos);
  EXPECT_NE(headerError("{\"a\": 1}", 0).find("expected an object"), std::string::npos);
  EXPECT_NE(
      headerError("{\"a\": {\"shape\": [], \"data_offsets\": [0,0]}}", 0).find("missing \"dtype\""),
      std::string::npos);
  EXPECT_NE(headerError("{\"__metadata__\": {\"k\": 1}}", 0).find("must be a string"),
            std::string::npos);
  EXPECT_NE(headerError("{\"__metadata__\": []}", 0).find("must be an object"), std::string::npos);
  EXPECT_NE(headerError("{\"a\": ", 0).find("invalid JSON"), std::string::npos);
  EXPECT_NE(headerError("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", 0)
                .find("nested deeper"),
            std::string::npos);
  EXPECT_EQ(headerError("{}", 0), "");
  EXPECT_EQ(headerError("{}      ", 0), "");  // padding
}

TEST(Safetensors, HeaderLengthErrors) {
  // Shorter than the length field.
  auto r = parseSafetensorsHeader("abc", 3);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("too short for the 8-byte header length"), std::string::npos);
  // Length past the end of the file.
  std::string bytes = le64(100) + "{}";
  r = parseSafetensorsHeader(bytes, bytes.size());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("header length 100 runs past the end of the file (10 bytes)"),
            std::string::npos);
  // Beyond the 100 MiB bound, even in a file that large.
  r = parseSafetensorsHeader(le64((100ull << 20) + 1), 1ull << 40);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exceeds the limit"), std::string::npos);
  r = parseSafetensorsHeader(le64(UINT64_MAX), UINT64_MAX);
  ASSERT_FALSE(r);
  // The file is long enough but the buffer holds less than the header.
  r = parseSafetensorsHeader(le64(10) + "{}", 100);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos);
}

TEST(Safetensors, ReadErrorsNameTheFile) {
  TempDir dir;
  auto r = readSafetensors(dir.file("missing.safetensors"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("missing.safetensors: no such file"), std::string::npos);
  r = readSafetensors(dir.path());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos);

  // A valid file cut short: the header length now runs past the end, or the data does.
  const std::string path = dir.file("model.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {{"a", "F32", {1024}}}));
  const std::string full = readBytes(path);
  writeBytes(path, full.substr(0, 20));
  r = readSafetensors(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind(path + ": header length", 0), 0u) << r.error().message;
  writeBytes(path, full.substr(0, full.size() - 1));
  r = readSafetensors(path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("tensor \"a\": data_offsets [0, 4096] run past the end"),
            std::string::npos)
      << r.error().message;
  writeBytes(path, full.substr(0, 5));
  r = readSafetensors(path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("5 bytes, too short"), std::string::npos);
}

// ---- sharded models ------------------------------------------------------------------------

std::string indexJson(const std::map<std::string, std::string>& map, std::uint64_t total = 0) {
  nlohmann::json j;
  j["metadata"] = {{"total_size", total}};
  j["weight_map"] = map;
  return j.dump();
}

TEST(SafetensorsIndex, Sharded) {
  TempDir dir;
  ASSERT_TRUE(writeSafetensors(dir.file("model-00001-of-00002.safetensors"),
                               {{"a", "BF16", {4, 4}}, {"b", "BF16", {4}}}));
  ASSERT_TRUE(writeSafetensors(dir.file("model-00002-of-00002.safetensors"), {{"c", "F32", {8}}}));
  writeBytes(dir.file("model.safetensors.index.json"),
             indexJson({{"a", "model-00001-of-00002.safetensors"},
                        {"b", "model-00001-of-00002.safetensors"},
                        {"c", "model-00002-of-00002.safetensors"}},
                       72));
  auto index = readSafetensorsIndex(dir.file("model.safetensors.index.json"));
  ASSERT_TRUE(index) << index.error().message;
  ASSERT_EQ(index->shards.size(), 2u);
  EXPECT_EQ(index->shards[0].tensors.size(), 2u);
  EXPECT_EQ(index->shards[1].tensors.size(), 1u);
  EXPECT_EQ(index->declaredTotalSize, 72u);
  EXPECT_EQ(index->shards[0].tensorBytes() + index->shards[1].tensorBytes(), 72u);
}

TEST(SafetensorsIndex, Errors) {
  TempDir dir;
  ASSERT_TRUE(
      writeSafetensors(dir.file("s1.safetensors"), {{"a", "BF16", {4}}, {"b", "BF16", {4}}}));
  const std::string indexPath = dir.file("model.safetensors.index.json");
  const auto error = [&](const std::string& text) {
    writeBytes(indexPath, text);
    auto r = readSafetensorsIndex(indexPath);
    return r ? std::string() : r.error().message;
  };
  EXPECT_EQ(error(indexJson({{"a", "s1.safetensors"}, {"b", "s1.safetensors"}})), "");
  // A shard that does not exist.
  EXPECT_NE(
      error(indexJson({{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}}))
          .find("shard \"s2.safetensors\" (holding tensor \"c\") does not exist"),
      std::string::npos);
  // A tensor the shard does not hold.
  ASSERT_TRUE(writeSafetensors(dir.file("s2.safetensors"), {{"d", "BF16", {4}}}));
  EXPECT_NE(error(indexJson({{"a", "s1.safetensors"},
                             {"b", "s1.safetensors"},
                             {"c", "s2.safetensors"},
                             {"d", "s2.safetensors"}}))
                .find("tensor \"c\" is mapped to shard \"s2.safetensors\", which does not hold it"),
            std::string::npos);
  // A tensor of a shard the index does not list, or lists elsewhere.
  EXPECT_NE(error(indexJson({{"a", "s1.safetensors"}})).find("\"b\" is not in the index"),
            std::string::npos);
  EXPECT_NE(
      error(indexJson({{"a", "s1.safetensors"}, {"b", "s2.safetensors"}, {"d", "s2.safetensors"}}))
          .find("tensor \"b\" is mapped to shard \"s2.safetensors\" by the index"),
      std::string::npos);
  // Shard names may not leave the directory.
  EXPECT_NE(error(indexJson({{"a", "../s1.safetensors"}})).find("plain file name"),
            std::string::npos);
  EXPECT_NE(error(indexJson({{"a", "/etc/passwd"}})).find("plain file name"), std::string::npos);
  // Structure.
  EXPECT_NE(error("{}").find("missing \"weight_map\""), std::string::npos);
  EXPECT_NE(error("{\"weight_map\": {}}").find("empty"), std::string::npos);
  EXPECT_NE(error("{\"weight_map\": {\"a\": 3}}").find("must be a file name"), std::string::npos);
  EXPECT_NE(error("{\"weight_map\": []}").find("must be an object"), std::string::npos);
  EXPECT_NE(error("not json").find("invalid JSON"), std::string::npos);
  EXPECT_NE(
      error("{\"metadata\": {\"total_size\": -1}, \"weight_map\": {\"a\": \"s1.safetensors\"}}")
          .find("total_size"),
      std::string::npos);
  // A corrupt shard: the error names the shard.
  writeBytes(dir.file("s3.safetensors"), le64(2) + "[]");
  const std::string e = error(indexJson({{"x", "s3.safetensors"}}));
  EXPECT_NE(e.find("s3.safetensors: header"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessera::profile
