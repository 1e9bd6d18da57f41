#include "engines/vllm_engine.h"

namespace tessera::engines {
namespace {

using internal::Idempotent;
using internal::Reply;
using nlohmann::json;

constexpr const char* kLoraSetting =
    "runtime LoRA updating is off: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and "
    "--enable-lora";
constexpr const char* kSleepSetting =
    "the sleep endpoints are off: start vLLM with VLLM_SERVER_DEV_MODE=1 and "
    "--enable-sleep-mode";

// FastAPI's answer for a path with no route: 404 {"detail": "Not Found"}.
bool routeMissing(const Reply& reply) {
  if (reply.status != 404) return false;
  auto body = json::parse(reply.body, nullptr, false);
  return body.is_object() && body.contains("detail") && body["detail"] == "Not Found";
}

// vLLM's ErrorResponse is {"error": {"message", "type", "param", "code"}} (older releases:
// the same fields at the top level); FastAPI's own errors are {"detail": ...}.
std::string serverMessage(const Reply& reply) {
  auto body = json::parse(reply.body, nullptr, false);
  if (body.is_object()) {
    const json* holder = &body;
    if (body.contains("error") && body["error"].is_object()) holder = &body["error"];
    if (holder->contains("message") && (*holder)["message"].is_string()) {
      return (*holder)["message"].get<std::string>();
    }
    if (body.contains("error") && body["error"].is_string())
      return body["error"].get<std::string>();
    if (body.contains("detail")) {
      return body["detail"].is_string() ? body["detail"].get<std::string>() : body["detail"].dump();
    }
  }
  return internal::excerpt(reply.body);
}

const char* tagName(WakeTag tag) {
  return tag == WakeTag::kWeights ? "weights" : "kv_cache";
}

}  // namespace

VllmEngine::VllmEngine(const EngineConfig& config, internal::Endpoint endpoint)
    : http_("vllm", config.url, std::move(endpoint),
            {.retries = config.retries, .backoffMs = config.retryBackoffMs}),
      timeoutMs_(config.timeoutMs),
      loadTimeoutMs_(config.loadTimeoutMs) {}

Error VllmEngine::refusal(std::string_view method, const std::string& path,
                          const Reply& reply) const {
  const std::string message = serverMessage(reply);
  if (reply.status == 400 && message.find("has already been loaded") != std::string::npos) {
    return Error::exists(http_.where(method, path) + ": HTTP 400: " + message);
  }
  return internal::statusError(http_.where(method, path), reply.status, message);
}

Result<Reply> VllmEngine::post(const std::string& path, const std::string& body,
                               const char* missingSetting) {
  auto reply = http_.send("POST", path, body, loadTimeoutMs_, Idempotent::kNo);
  if (!reply) return fail(std::move(reply.error()));
  if (routeMissing(*reply)) {
    return fail(Error::precondition(http_.where("POST", path) + ": HTTP 404: " + missingSetting));
  }
  if (reply->status != 200) return fail(refusal("POST", path, *reply));
  return reply;
}

Result<bool> VllmEngine::healthy() {
  auto reply = http_.send("GET", "/health", "", timeoutMs_, Idempotent::kYes);
  if (!reply) return fail(std::move(reply.error()));
  if (reply->status == 200) return true;
  if (reply->status == 503) return false;  // the engine behind the server is dead
  return fail(refusal("GET", "/health", *reply));
}

Result<std::optional<bool>> VllmEngine::sleepingIfKnown() {
  const std::string path = "/is_sleeping";
  auto reply = http_.send("GET", path, "", timeoutMs_, Idempotent::kYes);
  if (!reply) return fail(std::move(reply.error()));
  if (routeMissing(*reply)) return std::optional<bool>();
  if (reply->status != 200) return fail(refusal("GET", path, *reply));
  auto body = internal::parseJsonBody(http_, "GET", path, *reply);
  if (!body) return fail(std::move(body.error()));
  if (!body->is_object() || !body->contains("is_sleeping") ||
      !(*body)["is_sleeping"].is_boolean()) {
    return fail(Error::internal(http_.where("GET", path) + ": no boolean 'is_sleeping' in '" +
                                internal::excerpt(reply->body) + "'"));
  }
  return std::optional<bool>((*body)["is_sleeping"].get<bool>());
}

Result<bool> VllmEngine::sleeping() {
  auto known = sleepingIfKnown();
  if (!known) return fail(std::move(known.error()));
  if (!*known) {
    return fail(
        Error::precondition(http_.where("GET", "/is_sleeping") + ": HTTP 404: " + kSleepSetting));
  }
  return **known;
}

Result<std::vector<ModelState>> VllmEngine::list() {
  const std::string path = "/v1/models";
  auto reply = http_.send("GET", path, "", timeoutMs_, Idempotent::kYes);
  if (!reply) return fail(std::move(reply.error()));
  if (reply->status != 200) return fail(refusal("GET", path, *reply));
  auto body = internal::parseJsonBody(http_, "GET", path, *reply);
  if (!body) return fail(std::move(body.error()));
  const auto malformed = [&](const std::string& why) {
    return fail(Error::internal(http_.where("GET", path) + ": not a model list (" + why + "): '" +
                                internal::excerpt(reply->body) + "'"));
  };
  if (!body->is_object() || !body->contains("data") || !(*body)["data"].is_array()) {
    return malformed("no 'data' array");
  }
  auto asleep = sleepingIfKnown();
  if (!asleep) return fail(std::move(asleep.error()));
  const bool engineAsleep = asleep->value_or(false);

  std::vector<ModelState> out;
  for (const json& card : (*body)["data"]) {
    if (!card.is_object() || !card.contains("id") || !card["id"].is_string()) {
      return malformed("a model card has no string 'id'");
    }
    ModelState state;
    state.name = card["id"].get<std::string>();
    if (card.contains("parent") && card["parent"].is_string()) {
      state.parent = card["parent"].get<std::string>();
    }
    state.phase = engineAsleep ? ModelPhase::kSleeping : ModelPhase::kReady;
    if (engineAsleep) state.reason = "engine is sleeping";
    out.push_back(std::move(state));
  }
  return out;
}

Result<bool> VllmEngine::ready(const std::string& model, std::optional<std::int64_t> version) {
  if (version) {
    return fail(Error::invalid("vllm ready('" + model + "'): vLLM models have no versions"));
  }
  auto models = list();
  if (!models) return fail(std::move(models.error()));
  for (const ModelState& m : *models) {
    if (m.name == model) return m.phase == ModelPhase::kReady;
  }
  return false;
}

Result<void> VllmEngine::load(const LoadRequest& request) {
  if (request.model.empty()) return fail(Error::invalid("vllm load: no adapter name"));
  if (request.path.empty()) {
    return fail(Error::invalid("vllm load of '" + request.model +
                               "': vLLM loads LoRA adapters only (its base model is fixed "
                               "when it starts); give the adapter's path"));
  }
  if (request.version || !request.configJson.empty() || !request.files.empty()) {
    return fail(Error::invalid("vllm load of '" + request.model +
                               "': version, configJson and files are Triton fields"));
  }
  json body = {{"lora_name", request.model}, {"lora_path", request.path}};
  if (request.replace) body["load_inplace"] = true;
  auto reply = post("/v1/load_lora_adapter", body.dump(), kLoraSetting);
  if (!reply) return fail(std::move(reply.error()));
  return {};
}

Result<void> VllmEngine::unload(const std::string& model) {
  if (model.empty()) return fail(Error::invalid("vllm unload: no adapter name"));
  auto reply = post("/v1/unload_lora_adapter", json{{"lora_name", model}}.dump(), kLoraSetting);
  if (!reply) return fail(std::move(reply.error()));
  return {};
}

Result<void> VllmEngine::sleep(SleepLevel level) {
  auto reply = post("/sleep?level=" + std::to_string(static_cast<int>(level)), "", kSleepSetting);
  if (!reply) return fail(std::move(reply.error()));
  return {};
}

Result<void> VllmEngine::wakeUp(const std::vector<WakeTag>& tags) {
  std::string path = "/wake_up";
  for (std::size_t i = 0; i < tags.size(); ++i) {
    path += (i == 0 ? "?tags=" : "&tags=") + std::string(tagName(tags[i]));
  }
  auto reply = post(path, "", kSleepSetting);
  if (!reply) return fail(std::move(reply.error()));
  return {};
}

}  // namespace tessera::engines
