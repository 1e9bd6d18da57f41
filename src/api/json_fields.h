#pragma once
// Small helpers for reading API bodies that are not in a YAML file's shape (heartbeats,
// deployments, signals): errors name the field relative to the body, e.g.
// "gpus[0].utilization: expected a number from 0 to 1".

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tessera::api {

// obj[key], or nullptr when absent or null.
inline const nlohmann::json* member(const nlohmann::json& obj, std::string_view key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

inline Error fieldError(std::string_view path, std::string_view problem) {
  return Error::invalid(std::string(path) + ": " + std::string(problem));
}

// `obj` must be an object whose keys are all in `allowed`. `path` is where it sits ("" for
// the body itself, "gpus[0]", "autoscaling").
inline Result<void> onlyKeys(const nlohmann::json& obj, std::string_view path,
                             std::initializer_list<std::string_view> allowed) {
  if (!obj.is_object()) return fail(fieldError(path.empty() ? "body" : path, "expected an object"));
  for (const auto& [k, v] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string known;
      for (std::string_view a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
      const std::string where = path.empty() ? k : std::string(path) + "." + k;
      return fail(fieldError(where, "unknown field (known: " + known + ")"));
    }
  }
  return {};
}

// An optional integer member within [min, max]; `fallback` when absent.
inline Result<std::int64_t> intField(const nlohmann::json& obj, std::string_view key,
                                     std::string_view path, std::int64_t min, std::int64_t max,
                                     std::int64_t fallback) {
  const nlohmann::json* m = member(obj, key);
  if (m == nullptr) return fallback;
  const std::string where =
      path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
  if (!m->is_number_integer()) return fail(fieldError(where, "expected an integer"));
  const auto v = m->get<std::int64_t>();
  if (v < min || v > max) {
    return fail(fieldError(where, "must be between " + std::to_string(min) + " and " +
                                      std::to_string(max) + ", got " + std::to_string(v)));
  }
  return v;
}

}  // namespace tessera::api
