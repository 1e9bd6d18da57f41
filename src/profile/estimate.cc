#include "profile/estimate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "common/names.h"
#include "profile/gguf.h"
#include "profile/hf_config.h"
#include "profile/json_util.h"
#include "profile/safetensors.h"

namespace tessera::profile {
namespace fs = std::filesystem;
namespace {

constexpr std::uint64_t kMib = 1 << 20;

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::optional<std::uint64_t> mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<std::uint64_t> add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

void addTensor(ModelFiles& m, const std::string& dtype, std::uint64_t bytes,
               std::uint64_t elements) {
  DtypeTotal& t = m.byDtype[dtype];
  t.bytes += bytes;
  t.parameters += elements;
  t.tensors += 1;
  m.weightBytes += bytes;
  m.parameters += elements;
  m.tensorCount += 1;
}

void addSafetensors(ModelFiles& m, const SafetensorsFile& file) {
  m.files.push_back(file.path);
  for (const TensorInfo& t : file.tensors) addTensor(m, t.dtype, t.bytes(), t.elements());
  if (!file.holes.empty()) {
    std::uint64_t bytes = 0;
    for (const ByteRange& h : file.holes) bytes += h.end - h.begin;
    m.notes.push_back(file.path + ": " + std::to_string(bytes) + " bytes of the data section in " +
                      std::to_string(file.holes.size()) + " range(s) belong to no tensor");
  }
}

Result<void> addGguf(ModelFiles& m, const std::string& path) {
  auto file = readGguf(path);
  if (!file) return fail(std::move(file.error()));
  m.format = ModelFormat::kGguf;
  m.files.push_back(path);
  for (const GgufTensor& t : file->tensors) addTensor(m, t.typeName, t.bytes, t.elements);
  auto shape = shapeFromGguf(*file);
  if (!shape) return fail(Error::invalid(path + ": " + shape.error().message));
  m.shape = std::move(*shape);
  if (!m.shape) m.notes.push_back(path + ": no general.architecture: KV cache not estimated");
  return {};
}

Result<void> addConfig(ModelFiles& m, const fs::path& dir) {
  const fs::path config = dir / "config.json";
  std::error_code ec;
  if (!fs::exists(config, ec)) {
    m.notes.push_back("no config.json in " + (dir.empty() ? std::string(".") : dir.string()) +
                      ": KV cache not estimated");
    return {};
  }
  auto shape = readHfConfig(config.string());
  if (!shape) return fail(std::move(shape.error()));
  m.configPath = config.string();
  m.shape = std::move(*shape);
  return {};
}

// The model's name from its path, made a valid model name (common/names.h): "Meta-Llama-3.1-8B"
// becomes "meta-llama-3.1-8b".
std::string pathName(const fs::path& path, bool directory);

std::string nameOf(const fs::path& path, bool directory) {
  return toSubdomain(pathName(path, directory));
}

std::string pathName(const fs::path& path, bool directory) {
  fs::path p = path;
  if (directory) {
    if (!p.has_filename()) p = p.parent_path();  // "dir/"
    std::string n = fs::absolute(p).lexically_normal().filename().string();
    if (n.empty()) n = fs::absolute(p).lexically_normal().parent_path().filename().string();
    return n.empty() ? "model" : n;
  }
  std::string stem = p.stem().string();
  if (stem == "model" || stem == "consolidated" || stem.starts_with("model-0")) {
    const std::string dir = fs::absolute(p).parent_path().filename().string();
    if (!dir.empty()) return dir;
  }
  return stem.empty() ? "model" : stem;
}

Result<void> inspectDirectory(ModelFiles& m, const fs::path& dir) {
  std::vector<std::string> indexes, safetensors, ggufs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string name = it->path().filename().string();
    if (endsWith(name, ".safetensors.index.json")) indexes.push_back(name);
    if (endsWith(name, ".safetensors")) safetensors.push_back(name);
    if (endsWith(name, ".gguf")) ggufs.push_back(name);
  }
  if (ec) return fail(Error::invalid(dir.string() + ": cannot list: " + ec.message()));
  std::sort(indexes.begin(), indexes.end());
  std::sort(safetensors.begin(), safetensors.end());
  std::sort(ggufs.begin(), ggufs.end());

  if (!indexes.empty()) {
    std::string index = indexes.front();
    if (indexes.size() > 1) {
      if (std::find(indexes.begin(), indexes.end(), "model.safetensors.index.json") ==
          indexes.end()) {
        return fail(Error::invalid(dir.string() + ": several safetensors indexes (" + indexes[0] +
                                   ", " + indexes[1] + "); name the model's file"));
      }
      index = "model.safetensors.index.json";
    }
    auto sharded = readSafetensorsIndex((dir / index).string());
    if (!sharded) return fail(std::move(sharded.error()));
    for (const SafetensorsFile& shard : sharded->shards) addSafetensors(m, shard);
    if (sharded->declaredTotalSize != 0 && sharded->declaredTotalSize != m.weightBytes) {
      m.notes.push_back(sharded->indexPath + ": metadata.total_size " +
                        std::to_string(sharded->declaredTotalSize) + " differs from the shards' " +
                        std::to_string(m.weightBytes) + " tensor bytes");
    }
    return addConfig(m, dir);
  }
  if (!safetensors.empty()) {
    std::map<std::string, std::string> seen;  // tensor → file
    for (const std::string& name : safetensors) {
      auto file = readSafetensors((dir / name).string());
      if (!file) return fail(std::move(file.error()));
      for (const TensorInfo& t : file->tensors) {
        const auto [it, inserted] = seen.emplace(t.name, file->path);
        if (!inserted) {
          return fail(Error::invalid(file->path + ": tensor " + internal::printable(t.name) +
                                     " is also in " + it->second +
                                     " (several safetensors files and no index)"));
        }
      }
      addSafetensors(m, *file);
    }
    return addConfig(m, dir);
  }
  if (ggufs.size() == 1) return addGguf(m, (dir / ggufs.front()).string());
  if (ggufs.size() > 1) {
    return fail(Error::invalid(dir.string() + ": several .gguf files (" + ggufs[0] + ", " +
                               ggufs[1] + "); name one"));
  }
  return fail(Error::invalid(dir.string() + ": no .safetensors, .safetensors.index.json or "
                                            ".gguf files"));
}

bool hasGgufMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string_view(magic, 4) == "GGUF";
}

}  // namespace

const char* modelFormatName(ModelFormat format) {
  return format == ModelFormat::kGguf ? "gguf" : "safetensors";
}

std::string ModelFiles::dominantFloatDtype() const {
  std::string best;
  std::uint64_t bytes = 0;
  for (const char* d : {"BF16", "F16", "F32"}) {
    const auto it = byDtype.find(d);
    if (it != byDtype.end() && it->second.bytes > bytes) {
      best = d;
      bytes = it->second.bytes;
    }
  }
  return best;
}

Result<ModelFiles> inspectModel(const std::string& path) {
  ModelFiles m;
  m.path = path;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return fail(Error::invalid(path + ": no such file or directory"));
  if (fs::is_directory(status)) {
    m.name = nameOf(path, true);
    TESSERA_RETURN_IF_ERROR(inspectDirectory(m, path));
    return m;
  }
  if (!fs::is_regular_file(status)) return fail(Error::invalid(path + ": not a regular file"));
  m.name = nameOf(path, false);
  if (endsWith(path, ".gguf") || hasGgufMagic(path)) {
    TESSERA_RETURN_IF_ERROR(addGguf(m, path));
    return m;
  }
  if (endsWith(path, ".json")) {
    return fail(Error::invalid(path + ": a JSON file; give the model's directory or a "
                                      ".safetensors or .gguf file"));
  }
  auto file = readSafetensors(path);
  if (!file) return fail(std::move(file.error()));
  addSafetensors(m, *file);
  TESSERA_RETURN_IF_ERROR(addConfig(m, fs::path(path).parent_path()));
  return m;
}

Result<std::optional<KvDtype>> parseKvDtype(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "auto") return std::optional<KvDtype>();
  static const std::array<std::pair<std::string_view, KvDtype>, 15> kNames{{
      {"fp16", {"F16", 64}},
      {"f16", {"F16", 64}},
      {"float16", {"F16", 64}},
      {"bf16", {"BF16", 64}},
      {"bfloat16", {"BF16", 64}},
      {"fp32", {"F32", 128}},
      {"f32", {"F32", 128}},
      {"float32", {"F32", 128}},
      {"fp8", {"F8_E4M3", 32}},
      {"fp8_e4m3", {"F8_E4M3", 32}},
      {"fp8_e5m2", {"F8_E5M2", 32}},
      {"int8", {"I8", 32}},
      {"q8_0", {"Q8_0", 34}},
      {"q4_0", {"Q4_0", 18}},
      {"i8", {"I8", 32}},
  }};
  for (const auto& [name, dtype] : kNames) {
    if (t == name) return std::optional<KvDtype>(dtype);
  }
  return fail(Error::invalid("--kv-dtype " + internal::printable(text) +
                             ": not one of auto, fp16, bf16, fp32, fp8, fp8_e4m3, fp8_e5m2, "
                             "int8, q8_0, q4_0"));
}

Result<void> checkEstimateOptions(const EstimateOptions& o) {
  if (o.tensorParallel < 1 || o.tensorParallel > kMaxTensorParallel) {
    return fail(Error::invalid("--tp " + std::to_string(o.tensorParallel) + ": must be in [1, " +
                               std::to_string(kMaxTensorParallel) + "]"));
  }
  if (o.context < 0 || o.context > kMaxContext) {
    return fail(Error::invalid("--context " + std::to_string(o.context) + ": must be in [1, " +
                               std::to_string(kMaxContext) + "]"));
  }
  if (o.concurrency < 1 || o.concurrency > 1'000'000) {
    return fail(Error::invalid("--concurrency " + std::to_string(o.concurrency) +
                               ": must be in [1, 1000000]"));
  }
  if (o.overheadPerGpuMib < 0 || o.overheadPerGpuMib > (1 << 20)) {
    return fail(Error::invalid("--overhead-per-gpu " + std::to_string(o.overheadPerGpuMib) +
                               ": must be in [0, 1048576] MiB"));
  }
  if (!std::isfinite(o.activationFraction) || o.activationFraction < 0 ||
      o.activationFraction > 10) {
    return fail(Error::invalid("--activation-fraction must be in [0, 10]"));
  }
  auto dtype = parseKvDtype(o.kvDtype);
  if (!dtype) return fail(std::move(dtype.error()));
  return {};
}

Result<Estimate> estimateMemory(const ModelFiles& model, const EstimateOptions& o) {
  TESSERA_RETURN_IF_ERROR(checkEstimateOptions(o));
  auto dtype = parseKvDtype(o.kvDtype);
  if (!dtype) return fail(std::move(dtype.error()));

  Estimate e;
  e.weightBytes = model.weightBytes;
  e.tensorParallel = o.tensorParallel;
  e.concurrency = o.concurrency;
  const ModelShape* shape = model.shape ? &*model.shape : nullptr;

  if (*dtype) {
    e.kvDtype = **dtype;
  } else {
    // auto: the activations' dtype. llama.cpp caches F16; otherwise the config's dtype, else
    // the weights' dominant float type; 8-bit and quantized checkpoints compute in BF16/F16.
    std::string d = model.format == ModelFormat::kGguf ? "F16" : "";
    if (d.empty() && shape != nullptr) d = shape->dtype;
    if (d.empty()) d = model.dominantFloatDtype();
    if (d == "F32" || d == "F64") {
      e.kvDtype = {"F32", 128};
    } else if (d == "F16") {
      e.kvDtype = {"F16", 64};
    } else {
      e.kvDtype = {"BF16", 64};
    }
  }

  if (o.context > 0) {
    e.context = o.context;
  } else {
    e.context = shape != nullptr && shape->maxContext > 0 ? shape->maxContext : kDefaultContext;
  }
  if (shape != nullptr && shape->maxContext > 0 && e.context > shape->maxContext) {
    e.notes.push_back("context " + std::to_string(e.context) + " is beyond the model's maximum " +
                      std::to_string(shape->maxContext));
  }
  if (shape != nullptr && shape->attentionHeads % o.tensorParallel != 0) {
    e.notes.push_back(std::to_string(shape->attentionHeads) + " attention heads do not split " +
                      "evenly over " + std::to_string(o.tensorParallel) +
                      " GPUs (vLLM and SGLang refuse such a tensor-parallel degree)");
  }

  const std::string tooLarge = "; lower --context or --concurrency";
  if (shape != nullptr) {
    const auto bits = mul(shape->kvElementsPerToken(o.tensorParallel), e.kvDtype.bytesPer32);
    if (!bits) return fail(Error::invalid("KV cache per token overflows"));
    e.kvBytesPerToken = (*bits + 31) / 32;
    const auto perSeq = mul(e.kvBytesPerToken, static_cast<std::uint64_t>(e.context));
    const auto all = perSeq ? mul(*perSeq, static_cast<std::uint64_t>(e.concurrency)) : perSeq;
    if (!all || *all / kMib > kMaxProfileMib) {
      return fail(Error::invalid(
          "a KV cache of " + std::to_string(e.kvBytesPerToken) + " bytes per token × " +
          std::to_string(e.context) + " tokens × " + std::to_string(e.concurrency) +
          " sequences is more than the 16 TiB a model profile may state" + tooLarge));
    }
    e.kvCacheBytes = *all;
  }
  e.overheadBytes = static_cast<std::uint64_t>(o.overheadPerGpuMib) * kMib *
                        static_cast<std::uint64_t>(o.tensorParallel) +
                    static_cast<std::uint64_t>(
                        std::ceil(o.activationFraction * static_cast<double>(e.weightBytes)));
  const auto total = add(e.weightBytes, e.kvCacheBytes);
  const auto all = total ? add(*total, e.overheadBytes) : total;
  if (!all || e.weightBytes / kMib > kMaxProfileMib || e.overheadBytes / kMib > kMaxProfileMib) {
    return fail(Error::invalid("the model needs more than the 16 TiB a model profile may state"));
  }
  e.totalBytes = *all;
  const auto tp = static_cast<std::uint64_t>(o.tensorParallel);
  e.perGpuBytes = e.totalBytes / tp + (e.totalBytes % tp != 0 ? 1 : 0);
  return e;
}

std::int64_t toMib(std::uint64_t bytes) {
  return static_cast<std::int64_t>(bytes / kMib + (bytes % kMib != 0 ? 1 : 0));
}

model::ModelProfile toModelProfile(const Estimate& e, std::string name) {
  model::ModelProfile p;
  p.name = std::move(name);
  p.weightsMib = toMib(e.weightBytes);
  p.kvCacheMib = toMib(e.kvCacheBytes);
  p.overheadMib = toMib(e.overheadBytes);
  p.gpusPerReplica = e.tensorParallel;
  return p;
}

nlohmann::ordered_json modelRequestBody(const model::ModelProfile& p) {
  nlohmann::ordered_json body;
  body["name"] = p.name;
  body["weightsMib"] = p.weightsMib;
  body["kvCacheMib"] = p.kvCacheMib;
  body["overheadMib"] = p.overheadMib;
  body["gpusPerReplica"] = p.gpusPerReplica;
  return body;
}

}  // namespace tessera::profile
