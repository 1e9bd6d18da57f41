#include "profile/model_shape.h"

#include <algorithm>

#include "profile/json_util.h"

namespace tessera::profile {
namespace {

std::uint64_t perGpuHeads(std::int64_t heads, int tp) {
  const auto t = static_cast<std::uint64_t>(tp < 1 ? 1 : tp);
  const auto h = static_cast<std::uint64_t>(heads);
  return (h + t - 1) / t * t;  // ceil(h / tp) heads on each of tp GPUs
}

Result<std::int64_t> ggufCount(const GgufFile& file, const std::string& key, std::int64_t min,
                               std::int64_t max) {
  const GgufValue* v = file.find(key);
  if (v == nullptr)
    return fail(Error::invalid("metadata " + internal::printable(key) + " is missing"));
  const auto n = v->asInt();
  if (!n || *n < min || *n > max) {
    return fail(Error::invalid("metadata " + internal::printable(key) + " must be an integer in [" +
                               std::to_string(min) + ", " + std::to_string(max) + "]"));
  }
  return *n;
}

// A head count stated once or per layer (an integer array of block_count items).
Result<void> ggufHeads(const GgufFile& file, const std::string& key, std::int64_t layers,
                       std::int64_t& uniform, std::vector<std::int64_t>& perLayer) {
  const GgufValue* v = file.find(key);
  if (v == nullptr)
    return fail(Error::invalid("metadata " + internal::printable(key) + " is missing"));
  if (v->type != GgufType::kArray) {
    auto n = ggufCount(file, key, 1, kMaxHeads);
    if (!n) return fail(std::move(n.error()));
    uniform = *n;
    return {};
  }
  if (!v->intsKept || static_cast<std::int64_t>(v->ints.size()) != layers) {
    return fail(Error::invalid("metadata " + internal::printable(key) +
                               ": an array must hold one integer per layer (" +
                               std::to_string(layers) + ")"));
  }
  for (const auto h : v->ints) {
    if (h < 0 || h > kMaxHeads) {
      return fail(Error::invalid("metadata " + internal::printable(key) +
                                 ": per-layer counts must be in [0, " + std::to_string(kMaxHeads) +
                                 "]"));
    }
  }
  perLayer = v->ints;
  uniform = *std::max_element(perLayer.begin(), perLayer.end());
  if (std::all_of(perLayer.begin(), perLayer.end(), [&](auto h) { return h == perLayer[0]; })) {
    perLayer.clear();
  }
  return {};
}

}  // namespace

std::uint64_t ModelShape::kvElementsPerToken(int tp) const {
  const auto l = static_cast<std::uint64_t>(layers);
  if (mlaCacheDim > 0) {
    return l * static_cast<std::uint64_t>(mlaCacheDim) *
           static_cast<std::uint64_t>(tp < 1 ? 1 : tp);
  }
  const auto dims = static_cast<std::uint64_t>(headDim + valueHeadDim);
  if (!perLayerKvHeads.empty()) {
    std::uint64_t heads = 0;
    for (const auto h : perLayerKvHeads) heads += perGpuHeads(h, tp);
    return heads * dims;
  }
  return l * perGpuHeads(kvHeads, tp) * dims;
}

std::string ModelShape::kvFormula(int tp) const {
  const std::string t = tp > 1 ? " × " + std::to_string(tp) + " GPUs" : "";
  if (mlaCacheDim > 0) {
    return std::to_string(layers) + " layers × " + std::to_string(mlaCacheDim) + " (MLA latent)" +
           t;
  }
  const std::string dims =
      "(" + std::to_string(headDim) + " + " + std::to_string(valueHeadDim) + ")";
  if (!perLayerKvHeads.empty()) {
    return "Σ per-layer KV heads × " + dims;
  }
  const std::uint64_t heads = perGpuHeads(kvHeads, tp);
  const std::string headText = heads == static_cast<std::uint64_t>(kvHeads)
                                   ? std::to_string(kvHeads) + " KV heads"
                                   : std::to_string(heads) + " KV heads (" +
                                         std::to_string(kvHeads) + " replicated over " +
                                         std::to_string(tp) + " GPUs)";
  return std::to_string(layers) + " layers × " + headText + " × " + dims;
}

Result<void> checkShape(const ModelShape& s) {
  const auto range = [](const char* what, std::int64_t v, std::int64_t min,
                        std::int64_t max) -> Result<void> {
    if (v < min || v > max) {
      return fail(Error::invalid(std::string(what) + " " + std::to_string(v) + " is not in [" +
                                 std::to_string(min) + ", " + std::to_string(max) + "]"));
    }
    return {};
  };
  TESSERA_RETURN_IF_ERROR(range("layers", s.layers, 1, kMaxLayers));
  TESSERA_RETURN_IF_ERROR(range("attention heads", s.attentionHeads, 1, kMaxHeads));
  TESSERA_RETURN_IF_ERROR(
      range("KV heads", s.kvHeads, s.perLayerKvHeads.empty() ? 1 : 0, s.attentionHeads));
  TESSERA_RETURN_IF_ERROR(range("head dim", s.headDim, 1, kMaxHeadDim));
  TESSERA_RETURN_IF_ERROR(range("value head dim", s.valueHeadDim, 1, kMaxHeadDim));
  TESSERA_RETURN_IF_ERROR(range("hidden size", s.hiddenSize, 0, kMaxHiddenSize));
  TESSERA_RETURN_IF_ERROR(range("context length", s.maxContext, 0, kMaxContext));
  TESSERA_RETURN_IF_ERROR(range("MLA cache dim", s.mlaCacheDim, 0, kMaxHeadDim));
  if (!s.perLayerKvHeads.empty() &&
      static_cast<std::int64_t>(s.perLayerKvHeads.size()) != s.layers) {
    return fail(Error::invalid("per-layer KV heads: " + std::to_string(s.perLayerKvHeads.size()) +
                               " values for " + std::to_string(s.layers) + " layers"));
  }
  return {};
}

Result<std::optional<ModelShape>> shapeFromGguf(const GgufFile& file) {
  const auto arch = file.getString("general.architecture");
  if (!arch) {
    if (file.find("general.architecture") != nullptr) {
      return fail(Error::invalid("metadata general.architecture must be a string"));
    }
    return std::optional<ModelShape>();
  }
  const bool isName =
      !arch->empty() && arch->size() <= 64 && std::all_of(arch->begin(), arch->end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-' || c == '.';
      });
  if (!isName) {
    return fail(Error::invalid("metadata general.architecture " + internal::printable(*arch) +
                               " is not a name (letters, digits, '_', '-', '.'; at most 64)"));
  }
  ModelShape s;
  s.architecture = *arch;
  const std::string p = *arch + ".";
  auto layers = ggufCount(file, p + "block_count", 1, kMaxLayers);
  if (!layers) return fail(std::move(layers.error()));
  s.layers = *layers;

  std::vector<std::int64_t> perLayerHeads;
  TESSERA_RETURN_IF_ERROR(
      ggufHeads(file, p + "attention.head_count", s.layers, s.attentionHeads, perLayerHeads));
  if (file.find(p + "attention.head_count_kv") != nullptr) {
    TESSERA_RETURN_IF_ERROR(
        ggufHeads(file, p + "attention.head_count_kv", s.layers, s.kvHeads, s.perLayerKvHeads));
  } else {
    s.kvHeads = s.attentionHeads;
    s.perLayerKvHeads = perLayerHeads;
  }
  if (s.attentionHeads == 0) {
    return fail(Error::invalid("metadata " + p + "attention.head_count: no layer has heads"));
  }
  if (file.find(p + "embedding_length") != nullptr) {
    auto hidden = ggufCount(file, p + "embedding_length", 1, kMaxHiddenSize);
    if (!hidden) return fail(std::move(hidden.error()));
    s.hiddenSize = *hidden;
  }
  if (file.find(p + "attention.key_length") != nullptr) {
    auto k = ggufCount(file, p + "attention.key_length", 1, kMaxHeadDim);
    if (!k) return fail(std::move(k.error()));
    s.headDim = *k;
  } else if (s.hiddenSize > 0) {
    s.headDim = s.hiddenSize / s.attentionHeads;
  } else {
    return fail(Error::invalid("metadata " + p + "embedding_length (or " + p +
                               "attention.key_length) is missing"));
  }
  s.valueHeadDim = s.headDim;
  if (file.find(p + "attention.value_length") != nullptr) {
    auto v = ggufCount(file, p + "attention.value_length", 1, kMaxHeadDim);
    if (!v) return fail(std::move(v.error()));
    s.valueHeadDim = *v;
  }
  if (file.find(p + "context_length") != nullptr) {
    auto ctx = ggufCount(file, p + "context_length", 0, kMaxContext);
    if (!ctx) return fail(std::move(ctx.error()));
    s.maxContext = *ctx;
  }
  if (file.find(p + "attention.kv_lora_rank") != nullptr) {
    auto rank = ggufCount(file, p + "attention.kv_lora_rank", 1, kMaxHeadDim);
    if (!rank) return fail(std::move(rank.error()));
    auto rope = ggufCount(file, p + "rope.dimension_count", 0, kMaxHeadDim);
    if (!rope) return fail(std::move(rope.error()));
    s.mlaCacheDim = *rank + *rope;
  }
  if (s.headDim < 1) {
    return fail(Error::invalid("metadata " + p + "embedding_length " +
                               std::to_string(s.hiddenSize) + " is smaller than head_count " +
                               std::to_string(s.attentionHeads)));
  }
  auto ok = checkShape(s);
  if (!ok) return fail(Error::invalid("metadata of " + *arch + ": " + ok.error().message));
  return std::optional<ModelShape>(std::move(s));
}

}  // namespace tessera::profile
