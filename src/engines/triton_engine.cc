#include "engines/triton_engine.h"

#include <charconv>

#include "common/text.h"

namespace tessera::engines {
namespace {

using internal::Idempotent;
using internal::Reply;
using nlohmann::json;

std::string modelPath(const std::string& model) {
  return "/v2/repository/models/" + internal::urlEncode(model);
}

Result<ModelPhase> phaseFromState(const std::string& state) {
  if (state == "READY") return ModelPhase::kReady;
  if (state == "LOADING") return ModelPhase::kLoading;
  if (state == "UNLOADING") return ModelPhase::kUnloading;
  if (state == "UNAVAILABLE" || state == "UNKNOWN") return ModelPhase::kUnavailable;
  return fail(Error::internal("unknown model state '" + state + "'"));
}

}  // namespace

TritonEngine::TritonEngine(const EngineConfig& config, internal::Endpoint endpoint)
    : http_("triton", config.url, std::move(endpoint),
            {.retries = config.retries, .backoffMs = config.retryBackoffMs}),
      timeoutMs_(config.timeoutMs),
      loadTimeoutMs_(config.loadTimeoutMs) {}

Error TritonEngine::refusal(std::string_view method, const std::string& path,
                            const Reply& reply) const {
  // Triton words every failure as {"error": "..."}; anything else is quoted as it came.
  std::string message = internal::excerpt(reply.body);
  auto parsed = json::parse(reply.body, nullptr, false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
    message = parsed["error"].get<std::string>();
  }
  if (message.find("explicit model load / unload is not allowed") != std::string::npos) {
    return Error::precondition(http_.where(method, path) + ": HTTP " +
                               std::to_string(reply.status) + ": " + message +
                               " (start Triton with --model-control-mode=explicit)");
  }
  return internal::statusError(http_.where(method, path), reply.status, message);
}

Result<bool> TritonEngine::probe(const std::string& path) {
  auto reply = http_.send("GET", path, "", timeoutMs_, Idempotent::kYes);
  if (!reply) return fail(std::move(reply.error()));
  if (reply->status == 200) return true;
  // Triton answers "not ready" with 400 (404 for a model it has never heard of).
  if (reply->status == 400 || reply->status == 404) return false;
  return fail(refusal("GET", path, *reply));
}

Result<bool> TritonEngine::healthy() {
  return probe("/v2/health/ready");
}

Result<bool> TritonEngine::ready(const std::string& model, std::optional<std::int64_t> version) {
  std::string path = "/v2/models/" + internal::urlEncode(model);
  if (version) path += "/versions/" + std::to_string(*version);
  return probe(path + "/ready");
}

Result<std::vector<ModelState>> TritonEngine::list() {
  const std::string path = "/v2/repository/index";
  // Index changes nothing, so it is retried like a GET although it is a POST.
  auto reply = http_.send("POST", path, "{}", timeoutMs_, Idempotent::kYes);
  if (!reply) return fail(std::move(reply.error()));
  if (reply->status != 200) return fail(refusal("POST", path, *reply));
  auto body = internal::parseJsonBody(http_, "POST", path, *reply);
  if (!body) return fail(std::move(body.error()));
  const auto malformed = [&](const std::string& why) {
    return fail(Error::internal(http_.where("POST", path) + ": not a repository index (" + why +
                                "): '" + internal::excerpt(reply->body) + "'"));
  };
  if (!body->is_array()) return malformed("not a JSON array");
  std::vector<ModelState> out;
  for (const json& entry : *body) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string()) {
      return malformed("an entry has no string 'name'");
    }
    ModelState state;
    state.name = entry["name"].get<std::string>();
    if (entry.contains("version")) {
      if (!entry["version"].is_string()) return malformed("'version' is not a string");
      const auto text = entry["version"].get<std::string>();
      std::int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return malformed("version '" + text + "' is not a number");
      }
      state.version = v;
    }
    if (entry.contains("state")) {
      if (!entry["state"].is_string()) return malformed("'state' is not a string");
      auto phase = phaseFromState(entry["state"].get<std::string>());
      if (!phase) return malformed(phase.error().message);
      state.phase = *phase;
    }
    if (entry.contains("reason") && entry["reason"].is_string()) {
      state.reason = entry["reason"].get<std::string>();
    }
    out.push_back(std::move(state));
  }
  return out;
}

Result<std::string> TritonEngine::configJson(const std::string& model) {
  const std::string path = "/v2/models/" + internal::urlEncode(model) + "/config";
  auto reply = http_.send("GET", path, "", timeoutMs_, Idempotent::kYes);
  if (!reply) return fail(std::move(reply.error()));
  if (reply->status != 200) return fail(refusal("GET", path, *reply));
  auto body = internal::parseJsonBody(http_, "GET", path, *reply);
  if (!body) return fail(std::move(body.error()));
  if (!body->is_object()) {
    return fail(Error::internal(http_.where("GET", path) + ": model configuration is not a " +
                                "JSON object: '" + internal::excerpt(reply->body) + "'"));
  }
  return body->dump();
}

Result<void> TritonEngine::load(const LoadRequest& request) {
  if (request.model.empty()) return fail(Error::invalid("triton load: no model name"));
  if (!request.path.empty() || request.replace) {
    return fail(Error::invalid("triton load of '" + request.model +
                               "': path and replace are LoRA adapter fields (vllm only)"));
  }
  json config;
  if (!request.configJson.empty()) {
    config = json::parse(request.configJson, nullptr, false);
    if (!config.is_object()) {
      return fail(Error::invalid("triton load of '" + request.model +
                                 "': configJson is not a JSON object"));
    }
  }
  if (request.version) {
    if (*request.version < 1) {
      return fail(Error::invalid("triton load of '" + request.model + "': version " +
                                 std::to_string(*request.version) + " (versions start at 1)"));
    }
    if (config.is_null()) {
      auto current = configJson(request.model);
      if (!current) {
        return fail(Error::precondition(
            "triton load of '" + request.model + "' version " + std::to_string(*request.version) +
            ": the model is not loaded, so its configuration is unknown; pass configJson (" +
            current.error().message + ")"));
      }
      config = json::parse(*current);
    }
    config["version_policy"] = {{"specific", {{"versions", {*request.version}}}}};
  }
  if (!request.files.empty() && config.is_null()) {
    return fail(Error::invalid("triton load of '" + request.model +
                               "': override files need configJson as well"));
  }

  json parameters = json::object();
  if (!config.is_null()) parameters["config"] = config.dump();
  for (const auto& [file, bytes] : request.files) {
    parameters["file:" + file] = base64Encode(bytes);
  }
  const std::string body = parameters.empty() ? "" : json{{"parameters", parameters}}.dump();
  const std::string path = modelPath(request.model) + "/load";
  auto reply = http_.send("POST", path, body, loadTimeoutMs_, Idempotent::kNo);
  if (!reply) return fail(std::move(reply.error()));
  if (reply->status != 200) return fail(refusal("POST", path, *reply));

  if (request.version) {
    // Triton answers a load once it finished; check that it serves what was asked for.
    auto isReady = ready(request.model, request.version);
    if (!isReady) return fail(std::move(isReady.error()));
    if (!*isReady) {
      return fail(Error::internal(http_.where("POST", path) + ": load answered 200 but version " +
                                  std::to_string(*request.version) + " is not ready"));
    }
  }
  return {};
}

Result<void> TritonEngine::unload(const std::string& model) {
  if (model.empty()) return fail(Error::invalid("triton unload: no model name"));
  const std::string path = modelPath(model) + "/unload";
  auto reply = http_.send("POST", path, "", loadTimeoutMs_, Idempotent::kNo);
  if (!reply) return fail(std::move(reply.error()));
  if (reply->status != 200) return fail(refusal("POST", path, *reply));
  return {};
}

}  // namespace tessera::engines
