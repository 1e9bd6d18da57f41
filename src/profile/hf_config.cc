#include "profile/hf_config.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include "profile/json_util.h"

namespace tessera::profile {
namespace {

using internal::describeJson;
using nlohmann::json;

struct Scope {
  const json& object;
  std::string prefix;  // "" or "text_config."
};

// The first of `keys` present (and not null) in the object; nullptr if none.
const json* findAny(const Scope& s, std::initializer_list<const char*> keys, std::string* name) {
  for (const char* k : keys) {
    const auto it = s.object.find(k);
    if (it != s.object.end() && !it->is_null()) {
      if (name != nullptr) *name = s.prefix + k;
      return &*it;
    }
  }
  return nullptr;
}

Result<std::int64_t> readCount(const json& v, const std::string& name, std::int64_t min,
                               std::int64_t max) {
  if (!v.is_number_integer()) {  // unsigned counts as integer in nlohmann
    return fail(Error::invalid(name + ": must be an integer, got " + describeJson(v)));
  }
  const bool unsignedBig =
      v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX);
  const std::int64_t n = unsignedBig ? INT64_MAX : v.get<std::int64_t>();
  if (n < min || n > max) {
    return fail(Error::invalid(name + ": must be in [" + std::to_string(min) + ", " +
                               std::to_string(max) + "], got " + v.dump()));
  }
  return n;
}

// A required count under one of `keys`.
Result<std::int64_t> required(const Scope& s, std::initializer_list<const char*> keys,
                              std::int64_t min, std::int64_t max) {
  std::string name;
  const json* v = findAny(s, keys, &name);
  if (v == nullptr) return fail(Error::invalid(s.prefix + *keys.begin() + ": missing"));
  return readCount(*v, name, min, max);
}

// An optional count: nullopt when absent or null.
Result<std::optional<std::int64_t>> optional(const Scope& s,
                                             std::initializer_list<const char*> keys,
                                             std::int64_t min, std::int64_t max) {
  std::string name;
  const json* v = findAny(s, keys, &name);
  if (v == nullptr) return std::optional<std::int64_t>();
  auto n = readCount(*v, name, min, max);
  if (!n) return fail(std::move(n.error()));
  return std::optional<std::int64_t>(*n);
}

Result<ModelShape> parseScope(const Scope& s, const json& top) {
  ModelShape shape;
  if (const auto a = top.find("architectures");
      a != top.end() && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    shape.architecture = internal::sanitized((*a)[0].get<std::string>());
  } else if (const json* m = findAny(s, {"model_type"}, nullptr); m && m->is_string()) {
    shape.architecture = internal::sanitized(m->get<std::string>());
  }
  auto layers =
      required(s, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, 1, kMaxLayers);
  if (!layers) return fail(std::move(layers.error()));
  shape.layers = *layers;
  auto heads = required(s, {"num_attention_heads", "n_head", "num_heads"}, 1, kMaxHeads);
  if (!heads) return fail(std::move(heads.error()));
  shape.attentionHeads = *heads;

  std::string kvName;
  if (const json* kv = findAny(s, {"num_key_value_heads", "num_kv_heads", "n_head_kv"}, &kvName)) {
    if (kv->is_array()) {
      if (static_cast<std::int64_t>(kv->size()) != shape.layers) {
        return fail(Error::invalid(kvName + ": a list must have one count per layer (" +
                                   std::to_string(shape.layers) + "), got " +
                                   std::to_string(kv->size())));
      }
      for (std::size_t i = 0; i < kv->size(); ++i) {
        auto n =
            readCount((*kv)[i], kvName + "[" + std::to_string(i) + "]", 0, shape.attentionHeads);
        if (!n) return fail(std::move(n.error()));
        shape.perLayerKvHeads.push_back(*n);
        shape.kvHeads = std::max(shape.kvHeads, *n);
      }
    } else {
      auto n = readCount(*kv, kvName, 1, shape.attentionHeads);
      if (!n) return fail(std::move(n.error()));
      shape.kvHeads = *n;
    }
  } else if (const json* mq = findAny(s, {"multi_query"}, nullptr);
             mq && mq->is_boolean() && mq->get<bool>()) {
    shape.kvHeads = 1;
  } else {
    shape.kvHeads = shape.attentionHeads;
  }

  auto hidden = optional(s, {"hidden_size", "n_embd", "d_model"}, 1, kMaxHiddenSize);
  if (!hidden) return fail(std::move(hidden.error()));
  shape.hiddenSize = hidden->value_or(0);
  auto headDim = optional(s, {"head_dim"}, 1, kMaxHeadDim);
  if (!headDim) return fail(std::move(headDim.error()));
  if (*headDim) {
    shape.headDim = **headDim;
  } else if (*hidden) {
    shape.headDim = shape.hiddenSize / shape.attentionHeads;
    if (shape.headDim < 1) {
      return fail(Error::invalid(s.prefix + "hidden_size " + std::to_string(shape.hiddenSize) +
                                 " is smaller than num_attention_heads " +
                                 std::to_string(shape.attentionHeads)));
    }
  } else {
    return fail(Error::invalid(s.prefix + "hidden_size: missing (needed for the head dimension "
                                          "when head_dim is not given)"));
  }
  shape.valueHeadDim = shape.headDim;
  auto vDim = optional(s, {"v_head_dim"}, 1, kMaxHeadDim);
  if (!vDim) return fail(std::move(vDim.error()));
  auto rank = optional(s, {"kv_lora_rank"}, 1, kMaxHeadDim);
  if (!rank) return fail(std::move(rank.error()));
  if (*rank) {
    auto rope = optional(s, {"qk_rope_head_dim"}, 0, kMaxHeadDim);
    if (!rope) return fail(std::move(rope.error()));
    shape.mlaCacheDim = **rank + rope->value_or(0);
  } else if (*vDim) {
    shape.valueHeadDim = **vDim;
  }

  auto context =
      optional(s, {"max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"},
               0, kMaxContext);
  if (!context) return fail(std::move(context.error()));
  shape.maxContext = context->value_or(0);

  std::string dtypeName;
  const json* dtype = findAny(s, {"torch_dtype", "dtype"}, &dtypeName);
  if (dtype == nullptr) dtype = findAny(Scope{top, ""}, {"torch_dtype", "dtype"}, &dtypeName);
  if (dtype != nullptr) {
    if (!dtype->is_string()) {
      return fail(Error::invalid(dtypeName + ": must be a string, got " + describeJson(*dtype)));
    }
    shape.dtype = torchDtypeToSafetensors(dtype->get<std::string>());
    if (shape.dtype.empty() && dtype->get<std::string>() != "auto") {
      return fail(Error::invalid(dtypeName + ": unknown dtype " +
                                 internal::printable(dtype->get<std::string>()) +
                                 " (known: float16, bfloat16, float32, float64, float8_e4m3fn, "
                                 "float8_e5m2, auto)"));
    }
  }
  auto ok = checkShape(shape);
  if (!ok) return fail(Error::invalid(s.prefix + ok.error().message));
  return shape;
}

}  // namespace

std::string torchDtypeToSafetensors(std::string_view t) {
  if (t.starts_with("torch.")) t.remove_prefix(6);
  static const std::array<std::pair<std::string_view, std::string_view>, 12> kMap{{
      {"float16", "F16"},
      {"half", "F16"},
      {"fp16", "F16"},
      {"bfloat16", "BF16"},
      {"bf16", "BF16"},
      {"float32", "F32"},
      {"float", "F32"},
      {"fp32", "F32"},
      {"float64", "F64"},
      {"double", "F64"},
      {"float8_e4m3fn", "F8_E4M3"},
      {"float8_e5m2", "F8_E5M2"},
  }};
  for (const auto& [name, dtype] : kMap) {
    if (t == name) return std::string(dtype);
  }
  return "";
}

Result<ModelShape> parseHfConfig(std::string_view text) {
  auto parsed = internal::parseJson(text, 64, false);
  if (!parsed) return fail(std::move(parsed.error()));
  if (!parsed->is_object()) {
    return fail(Error::invalid("expected a JSON object, got " + describeJson(*parsed)));
  }
  const json& top = *parsed;
  const Scope topScope{top, ""};
  if (findAny(topScope, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, nullptr) ==
      nullptr) {
    for (const char* nested : {"text_config", "llm_config", "language_config"}) {
      const auto it = top.find(nested);
      if (it == top.end() || it->is_null()) continue;
      if (!it->is_object()) {
        return fail(
            Error::invalid(std::string(nested) + ": must be an object, got " + describeJson(*it)));
      }
      return parseScope(Scope{*it, std::string(nested) + "."}, top);
    }
  }
  return parseScope(topScope, top);
}

Result<ModelShape> readHfConfig(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return fail(Error::invalid(path + ": no such file"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fail(Error::invalid(path + ": " + ec.message()));
  if (size > kMaxConfigBytes) {
    return fail(Error::invalid(path + ": " + std::to_string(size) +
                               " bytes, more than the limit of " +
                               std::to_string(kMaxConfigBytes)));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in) return fail(Error::invalid(path + ": cannot read"));
  auto shape = parseHfConfig(text);
  if (!shape) return fail(Error::invalid(path + ": " + shape.error().message));
  return shape;
}

}  // namespace tessera::profile
