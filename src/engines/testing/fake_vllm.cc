#include "engines/testing/fake_vllm.h"

#include <httplib.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace tessera::engines::testing {
namespace {

using nlohmann::json;

void vllmSendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// vLLM's ErrorResponse.
void sendError(httplib::Response& res, int status, const std::string& type,
               const std::string& message) {
  vllmSendJson(
      res, status,
      json{
          {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}});
}

// FastAPI's answer for a path without a route.
void notFoundRoute(httplib::Response& res) {
  vllmSendJson(res, 404, json{{"detail", "Not Found"}});
}

// vLLM's validate_json_request.
bool requireJson(const httplib::Request& req, httplib::Response& res) {
  const std::string type = req.get_header_value("Content-Type");
  if (type.rfind("application/json", 0) != 0) {
    vllmSendJson(res, 415,
                 json{{"detail", "Unsupported Media Type: Only 'application/json' is allowed"}});
    return false;
  }
  return true;
}

// Pydantic's complaint about a missing or mistyped field, as FastAPI sends it.
void fieldError(httplib::Response& res, const std::string& field, const char* type,
                const char* msg) {
  vllmSendJson(
      res, 422,
      json{{"detail",
            json::array({{{"type", type}, {"loc", json::array({"body", field})}, {"msg", msg}}})}});
}

void internalError(httplib::Response& res) {
  res.status = 500;
  res.set_content("Internal Server Error", "text/plain; charset=utf-8");
}

}  // namespace

FakeVllm::FakeVllm(FakeVllmOptions options) : options_(std::move(options)) {}

FakeVllm::~FakeVllm() {
  stop();
}

int FakeVllm::sleepLevel() const {
  std::lock_guard lock(stateMu_);
  return sleepLevel_;
}

std::set<std::string> FakeVllm::asleepParts() const {
  std::lock_guard lock(stateMu_);
  return asleep_;
}

std::vector<std::string> FakeVllm::adapters() const {
  std::lock_guard lock(stateMu_);
  std::vector<std::string> out;
  for (const auto& a : adapters_) out.push_back(a.name);
  return out;
}

void FakeVllm::routes(httplib::Server& server) {
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.Get("/v1/models",
             [this](const httplib::Request&, httplib::Response& res) { handleModels(res); });
  server.Post("/v1/load_lora_adapter", [this](const httplib::Request& req, httplib::Response& res) {
    handleLoad(req, res);
  });
  server.Post(
      "/v1/unload_lora_adapter",
      [this](const httplib::Request& req, httplib::Response& res) { handleUnload(req, res); });
  server.Post("/sleep", [this](const httplib::Request& req, httplib::Response& res) {
    handleSleep(req, res);
  });
  server.Post("/wake_up", [this](const httplib::Request& req, httplib::Response& res) {
    handleWake(req, res);
  });
  server.Get("/is_sleeping", [this](const httplib::Request&, httplib::Response& res) {
    if (!options_.devMode) return notFoundRoute(res);
    std::lock_guard lock(stateMu_);
    vllmSendJson(res, 200, json{{"is_sleeping", !asleep_.empty()}});
  });
  // Every other path: FastAPI's 404.
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) notFoundRoute(res);
  });
}

void FakeVllm::handleModels(httplib::Response& res) {
  std::lock_guard lock(stateMu_);
  const json permission = json::array({{{"object", "model_permission"},
                                        {"allow_sampling", true},
                                        {"allow_logprobs", true},
                                        {"is_blocking", false}}});
  json data = json::array();
  data.push_back({{"id", options_.baseModel},
                  {"object", "model"},
                  {"created", 1700000000},
                  {"owned_by", "vllm"},
                  {"root", options_.baseRoot},
                  {"parent", nullptr},
                  {"max_model_len", options_.maxModelLen},
                  {"permission", permission}});
  for (const auto& a : adapters_) {
    data.push_back({{"id", a.name},
                    {"object", "model"},
                    {"created", 1700000000},
                    {"owned_by", "vllm"},
                    {"root", a.path},
                    {"parent", options_.baseModel},
                    {"max_model_len", nullptr},
                    {"permission", permission}});
  }
  vllmSendJson(res, 200, json{{"object", "list"}, {"data", data}});
}

void FakeVllm::handleLoad(const httplib::Request& req, httplib::Response& res) {
  noteBody(req);
  if (!options_.runtimeLora) return notFoundRoute(res);
  if (!requireJson(req, res)) return;
  auto body = json::parse(req.body, nullptr, false);
  if (!body.is_object()) return fieldError(res, "body", "json_invalid", "JSON decode error");
  for (const char* field : {"lora_name", "lora_path"}) {
    if (!body.contains(field)) return fieldError(res, field, "missing", "Field required");
    if (!body[field].is_string()) {
      return fieldError(res, field, "string_type", "Input should be a valid string");
    }
  }
  const auto name = body["lora_name"].get<std::string>();
  const auto path = body["lora_path"].get<std::string>();
  const bool inplace = body.contains("load_inplace") && body["load_inplace"].is_boolean() &&
                       body["load_inplace"].get<bool>();
  if (name.empty() || path.empty()) {
    return sendError(res, 400, "InvalidUserInput",
                     "Both 'lora_name' and 'lora_path' must be provided.");
  }
  std::lock_guard lock(stateMu_);
  auto existing = std::find_if(adapters_.begin(), adapters_.end(),
                               [&](const Adapter& a) { return a.name == name; });
  if (existing != adapters_.end() && !inplace) {
    return sendError(res, 400, "InvalidUserInput",
                     "The lora adapter '" + name +
                         "' has already been loaded. If you want to load the adapter in "
                         "place, set 'load_inplace' to True.");
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(path) / "adapter_config.json", ec)) {
    return sendError(res, 404, "NotFoundError",
                     "Loading lora " + name + " failed: No adapter found for " + path);
  }
  if (existing != adapters_.end()) {
    existing->path = path;
  } else {
    adapters_.push_back({name, path, nextId_++});
  }
  res.status = 200;
  res.set_content("Success: LoRA adapter '" + name + "' added successfully.", "text/plain");
}

void FakeVllm::handleUnload(const httplib::Request& req, httplib::Response& res) {
  noteBody(req);
  if (!options_.runtimeLora) return notFoundRoute(res);
  if (!requireJson(req, res)) return;
  auto body = json::parse(req.body, nullptr, false);
  if (!body.is_object()) return fieldError(res, "body", "json_invalid", "JSON decode error");
  const std::string name = body.contains("lora_name") && body["lora_name"].is_string()
                               ? body["lora_name"].get<std::string>()
                               : "";
  if (name.empty()) {
    return sendError(res, 400, "InvalidUserInput",
                     "either 'lora_name' and 'lora_int_id' needs to be provided.");
  }
  std::lock_guard lock(stateMu_);
  auto it = std::find_if(adapters_.begin(), adapters_.end(),
                         [&](const Adapter& a) { return a.name == name; });
  if (it == adapters_.end()) {
    return sendError(res, 404, "NotFoundError", "The lora adapter '" + name + "' cannot be found.");
  }
  adapters_.erase(it);
  res.status = 200;
  res.set_content("Success: LoRA adapter '" + name + "' removed successfully.", "text/plain");
}

void FakeVllm::handleSleep(const httplib::Request& req, httplib::Response& res) {
  if (!options_.devMode) return notFoundRoute(res);
  const std::string text = req.has_param("level") ? req.get_param_value("level") : "1";
  if (text != "1" && text != "2") return internalError(res);
  std::lock_guard lock(stateMu_);
  sleepLevel_ = text == "1" ? 1 : 2;
  asleep_ = {"weights", "kv_cache"};
  res.status = 200;
}

void FakeVllm::handleWake(const httplib::Request& req, httplib::Response& res) {
  if (!options_.devMode) return notFoundRoute(res);
  std::vector<std::string> tags;
  const auto count = req.get_param_value_count("tags");
  for (std::size_t i = 0; i < count; ++i) tags.push_back(req.get_param_value("tags", i));
  for (const auto& tag : tags) {
    if (tag != "weights" && tag != "kv_cache") return internalError(res);
  }
  std::lock_guard lock(stateMu_);
  if (tags.empty()) {
    asleep_.clear();
  } else {
    for (const auto& tag : tags) asleep_.erase(tag);
  }
  if (asleep_.empty()) sleepLevel_ = 0;
  res.status = 200;
}

}  // namespace tessera::engines::testing
