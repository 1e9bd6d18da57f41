#include "engines/engine_config.h"

#include <nlohmann/json.hpp>

namespace tessera::engines {
namespace {

using nlohmann::json;

Result<std::int64_t> readInt(const json& entry, const std::string& where, const char* key,
                             std::int64_t fallback) {
  if (!entry.contains(key)) return fallback;
  const json& v = entry[key];
  if (!v.is_number_integer()) {
    return fail(Error::invalid(where + "." + key + ": must be an integer"));
  }
  return v.get<std::int64_t>();
}

}  // namespace

Result<EngineConfig> engineConfigFromJson(const json& entry, const std::string& where) {
  if (!entry.is_object()) return fail(Error::invalid(where + ": must be an object"));
  for (const auto& [key, _] : entry.items()) {
    if (key != "kind" && key != "url" && key != "timeoutMs" && key != "loadTimeoutMs" &&
        key != "retries" && key != "retryBackoffMs") {
      return fail(Error::invalid(where + "." + key +
                                 ": unknown key (kind, url, timeoutMs, loadTimeoutMs, retries, "
                                 "retryBackoffMs)"));
    }
  }
  EngineConfig config;
  for (const char* key : {"kind", "url"}) {
    if (!entry.contains(key) || !entry[key].is_string()) {
      return fail(Error::invalid(where + "." + key + ": required string"));
    }
  }
  config.kind = entry["kind"].get<std::string>();
  config.url = entry["url"].get<std::string>();
  auto timeout = readInt(entry, where, "timeoutMs", config.timeoutMs);
  if (!timeout) return fail(std::move(timeout.error()));
  auto loadTimeout = readInt(entry, where, "loadTimeoutMs", config.loadTimeoutMs);
  if (!loadTimeout) return fail(std::move(loadTimeout.error()));
  auto retries = readInt(entry, where, "retries", config.retries);
  if (!retries) return fail(std::move(retries.error()));
  auto backoff = readInt(entry, where, "retryBackoffMs", config.retryBackoffMs);
  if (!backoff) return fail(std::move(backoff.error()));
  config.timeoutMs = *timeout;
  config.loadTimeoutMs = *loadTimeout;
  if (*retries < 0 || *retries > 10) {
    return fail(Error::invalid(where + ".retries: must be between 0 and 10"));
  }
  config.retries = static_cast<int>(*retries);
  config.retryBackoffMs = *backoff;
  // The same checks makeEngine applies, worded with the entry's place.
  if (config.kind != "triton" && config.kind != "vllm") {
    return fail(Error::invalid(where + ".kind: '" + config.kind + "' is not one of triton, vllm"));
  }
  if (config.timeoutMs <= 0) return fail(Error::invalid(where + ".timeoutMs: must be positive"));
  if (config.loadTimeoutMs <= 0) {
    return fail(Error::invalid(where + ".loadTimeoutMs: must be positive"));
  }
  if (config.retryBackoffMs < 0) {
    return fail(Error::invalid(where + ".retryBackoffMs: must not be negative"));
  }
  if (!config.url.starts_with("http://") && !config.url.starts_with("https://")) {
    return fail(Error::invalid(where + ".url: must start with http:// or https://"));
  }
  return config;
}

}  // namespace tessera::engines
