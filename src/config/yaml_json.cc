#include "config/yaml_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::config {
namespace {

nlohmann::json plainScalarToJson(std::string_view text) {
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  std::string_view number = text;
  if (number.front() == '+') number.remove_prefix(1);
  if (number.empty()) return std::string(text);
  // from_chars alone would also take "inf" and "nan", which YAML spells .inf and .nan.
  const char first = number.front();
  const bool numeric = first == '-' || first == '.' || (first >= '0' && first <= '9');
  if (!numeric) return std::string(text);
  const char* begin = number.data();
  const char* end = begin + number.size();
  std::int64_t integer = 0;
  if (const auto [ptr, ec] = std::from_chars(begin, end, integer);
      ec == std::errc() && ptr == end) {
    return integer;
  }
  double real = 0;
  if (const auto [ptr, ec] = std::from_chars(begin, end, real);
      ec == std::errc() && ptr == end && std::isfinite(real)) {
    return real;
  }
  return std::string(text);
}

}  // namespace

Result<nlohmann::json> yamlToJson(const Field& field) {
  if (field.isNull()) return nlohmann::json(nullptr);
  if (field.isScalar()) {
    if (field.isQuoted()) return nlohmann::json(field.node().Scalar());
    return plainScalarToJson(field.node().Scalar());
  }
  if (field.isSequence()) {
    nlohmann::json array = nlohmann::json::array();
    for (std::size_t i = 0; i < field.size(); ++i) {
      auto value = yamlToJson(field.item(i));
      if (!value) return value;
      array.push_back(std::move(*value));
    }
    return array;
  }
  if (field.isMap()) {
    nlohmann::json object = nlohmann::json::object();
    for (const FieldEntry& entry : field.entries()) {
      if (entry.key.empty()) return fail(entry.value.error("keys must be non-empty plain names"));
      if (object.contains(entry.key)) return fail(entry.value.error("duplicate key"));
      auto value = yamlToJson(entry.value);
      if (!value) return value;
      object[entry.key] = std::move(*value);
    }
    return object;
  }
  return fail(field.error("unsupported YAML value"));
}

YAML::Node jsonToYaml(const nlohmann::json& value) {
  using Type = nlohmann::json::value_t;
  switch (value.type()) {
    case Type::null:
    case Type::discarded:
    case Type::binary:
      return YAML::Node(YAML::NodeType::Null);
    case Type::boolean:
      return YAML::Node(value.get<bool>() ? "true" : "false");
    case Type::number_integer:
      return YAML::Node(std::to_string(value.get<std::int64_t>()));
    case Type::number_unsigned:
      return YAML::Node(std::to_string(value.get<std::uint64_t>()));
    case Type::number_float:
      // nlohmann's own spelling: shortest round trip, and ".0" on whole values, so that a
      // float never passes for an integer and an error shows what the number reads as.
      return YAML::Node(value.dump());
    case Type::string: {
      YAML::Node text(value.get_ref<const std::string&>());
      text.SetTag("!");  // what a YAML parser gives a quoted scalar (Field::isQuoted)
      return text;
    }
    case Type::array: {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const nlohmann::json& item : value) list.push_back(jsonToYaml(item));
      return list;
    }
    case Type::object: {
      YAML::Node map(YAML::NodeType::Map);
      // Keys are unique in a json object; force_insert skips the lookup `map[key]` would do.
      for (const auto& [key, item] : value.items()) map.force_insert(key, jsonToYaml(item));
      return map;
    }
  }
  return YAML::Node(YAML::NodeType::Null);
}

}  // namespace tessera::config
