#include "engines/testing/fake_triton.h"

#include <httplib.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/text.h"

namespace tessera::engines::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void tritonSendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// Triton's error body: {"error": "<message>"}.
void sendError(httplib::Response& res, int status, const std::string& message) {
  tritonSendJson(res, status, json{{"error", message}});
}

// Triton's answer to load and unload outside explicit mode (UNAVAILABLE, hence 503).
void refuseModelControl(httplib::Response& res) {
  sendError(res, 503, "explicit model load / unload is not allowed if polling is enabled");
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct Policy {
  enum Kind { kLatest, kAll, kSpecific } kind = kLatest;
  std::size_t latest = 1;
  std::set<std::int64_t> specific;
  json toJson() const {
    if (kind == kAll) return {{"all", json::object()}};
    if (kind == kSpecific) return {{"specific", {{"versions", specific}}}};
    return {{"latest", {{"num_versions", latest}}}};
  }
};

// The parts of a config.pbtxt the stand-in understands.
Policy policyFromPbtxt(const std::string& text) {
  Policy policy;
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"(version_policy\s*:?\s*\{\s*all\b)"))) {
    policy.kind = Policy::kAll;
  } else if (std::regex_search(text, m, std::regex(R"(specific\s*:?\s*\{([^}]*)\})"))) {
    policy.kind = Policy::kSpecific;
    const std::string inner = m[1].str();
    const std::regex number(R"(\d+)");
    for (auto it = std::sregex_iterator(inner.begin(), inner.end(), number);
         it != std::sregex_iterator(); ++it) {
      policy.specific.insert(std::stoll(it->str()));
    }
  } else if (std::regex_search(text, m, std::regex(R"(num_versions\s*:\s*(\d+))"))) {
    policy.latest = std::stoull(m[1].str());
  }
  return policy;
}

std::optional<std::int64_t> asVersion(const json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (!s.empty() && std::all_of(s.begin(), s.end(), ::isdigit)) return std::stoll(s);
  }
  return std::nullopt;
}

// A JSON configuration's version_policy, as Triton's ModelConfig JSON spells it.
std::optional<Policy> policyFromJson(const json& config, std::string& error) {
  Policy policy;
  if (!config.contains("version_policy")) return policy;
  const json& p = config["version_policy"];
  if (p.contains("all")) {
    policy.kind = Policy::kAll;
  } else if (p.contains("specific")) {
    policy.kind = Policy::kSpecific;
    const json& versions = p["specific"].value("versions", json::array());
    for (const json& v : versions) {
      auto n = asVersion(v);
      if (!n) {
        error = "version_policy.specific.versions holds a non-integer";
        return std::nullopt;
      }
      policy.specific.insert(*n);
    }
  } else if (p.contains("latest")) {
    policy.latest = p["latest"].value("num_versions", 1u);
  }
  return policy;
}

std::set<std::int64_t> numericDirs(const fs::path& dir) {
  std::set<std::int64_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (entry.is_directory() && !name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
      out.insert(std::stoll(name));
    }
  }
  return out;
}

}  // namespace

FakeTriton::FakeTriton(FakeTritonOptions options) : options_(std::move(options)) {}

FakeTriton::~FakeTriton() {
  stop();
  std::vector<std::thread> unloaders;
  {
    std::lock_guard lock(stateMu_);
    unloaders.swap(unloaders_);
  }
  for (auto& t : unloaders) t.join();
}

std::string FakeTriton::state(const std::string& model, std::int64_t version) const {
  std::lock_guard lock(stateMu_);
  auto it = models_.find(model);
  if (it == models_.end()) return "";
  auto v = it->second.versions.find(version);
  return v == it->second.versions.end() ? "" : v->second.state;
}

std::map<std::string, std::string> FakeTriton::overrideFiles(const std::string& model) const {
  std::lock_guard lock(stateMu_);
  auto it = models_.find(model);
  return it == models_.end() ? std::map<std::string, std::string>{} : it->second.files;
}

bool FakeTriton::inRepository(const std::string& name) const {
  std::error_code ec;
  return fs::is_directory(options_.repository / name, ec);
}

void FakeTriton::routes(httplib::Server& server) {
  server.Get("/v2/health/live",
             [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.Get("/v2/health/ready",
             [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.Post("/v2/repository/index", [this](const httplib::Request& req, httplib::Response& res) {
    handleIndex(req, res);
  });
  server.Post(R"(/v2/repository/models/([^/]+)/load)",
              [this](const httplib::Request& req, httplib::Response& res) {
                handleLoad(req.matches[1].str(), req, res);
              });
  server.Post(R"(/v2/repository/models/([^/]+)/unload)",
              [this](const httplib::Request& req, httplib::Response& res) {
                handleUnload(req.matches[1].str(), req, res);
              });
  server.Get(R"(/v2/models/([^/]+)/ready)",
             [this](const httplib::Request& req, httplib::Response& res) {
               handleReady(req.matches[1].str(), std::nullopt, res);
             });
  server.Get(R"(/v2/models/([^/]+)/versions/(\d+)/ready)",
             [this](const httplib::Request& req, httplib::Response& res) {
               handleReady(req.matches[1].str(), std::stoll(req.matches[2].str()), res);
             });
  server.Get(R"(/v2/models/([^/]+)/config)",
             [this](const httplib::Request& req, httplib::Response& res) {
               handleConfig(req.matches[1].str(), res);
             });
}

void FakeTriton::handleIndex(const httplib::Request& req, httplib::Response& res) {
  noteBody(req);
  bool readyOnly = false;
  if (!req.body.empty()) {
    auto body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return sendError(res, 400, "failed to parse the request JSON buffer: not a JSON object");
    }
    if (body.contains("ready")) {
      if (!body["ready"].is_boolean()) {
        return sendError(res, 400, "Unable to parse 'ready': expected a boolean");
      }
      readyOnly = body["ready"].get<bool>();
    }
  }
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.repository, ec)) {
    if (entry.is_directory()) names.insert(entry.path().filename().string());
  }
  std::lock_guard lock(stateMu_);
  for (const auto& [name, _] : models_) names.insert(name);
  json out = json::array();
  for (const auto& name : names) {
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      if (!readyOnly) out.push_back({{"name", name}});
      continue;
    }
    for (const auto& [version, v] : it->second.versions) {
      if (readyOnly && v.state != "READY") continue;
      json entry = {{"name", name}, {"version", std::to_string(version)}, {"state", v.state}};
      if (!v.reason.empty()) entry["reason"] = v.reason;
      out.push_back(std::move(entry));
    }
  }
  tritonSendJson(res, 200, out);
}

void FakeTriton::handleLoad(const std::string& name, const httplib::Request& req,
                            httplib::Response& res) {
  noteBody(req);
  if (!options_.explicitMode) return refuseModelControl(res);
  const std::string failed = "failed to load '" + name + "'";
  json parameters = json::object();
  if (!req.body.empty()) {
    auto body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return sendError(res, 400, "failed to parse the request JSON buffer: not a JSON object");
    }
    if (body.contains("parameters")) {
      if (!body["parameters"].is_object()) {
        return sendError(res, 400, "Unable to parse 'parameters': expected an object");
      }
      parameters = body["parameters"];
    }
  }
  std::optional<json> configOverride;
  std::map<std::string, std::string> files;
  for (const auto& [key, value] : parameters.items()) {
    if (key == "config") {
      if (!value.is_string()) {
        return sendError(res, 400, "Unable to parse 'config', expecting string");
      }
      auto parsed = json::parse(value.get<std::string>(), nullptr, false);
      if (!parsed.is_object()) {
        // The stand-in's wording: Triton reports its protobuf parser's complaint here.
        return sendError(res, 400, failed + ", failed to parse the configuration override");
      }
      configOverride = std::move(parsed);
    } else if (key.starts_with("file:")) {
      if (!value.is_string()) {
        return sendError(res, 400, "Unable to parse '" + key + "', expecting string");
      }
      auto bytes = base64Decode(value.get<std::string>());
      if (!bytes) return sendError(res, 400, "'" + key + "' is not valid base64");
      files[key.substr(5)] = std::move(*bytes);
    }
  }
  if (!files.empty() && !configOverride) {
    return sendError(res, 400, failed + ", failed to poll from model repository");
  }

  std::lock_guard serial(loadMu_);
  // Which versions exist, and the configuration to load with.
  const fs::path dir = options_.repository / name;
  std::set<std::int64_t> available;
  json config;
  Policy policy;
  std::string policyError;
  if (!files.empty()) {
    for (const auto& [path, _] : files) {
      const auto slash = path.find('/');
      const std::string first = path.substr(0, slash);
      if (slash != std::string::npos && !first.empty() &&
          std::all_of(first.begin(), first.end(), ::isdigit)) {
        available.insert(std::stoll(first));
      }
    }
  } else {
    if (!inRepository(name)) {
      return sendError(res, 400, failed + ", failed to poll from model repository");
    }
    available = numericDirs(dir);
  }
  if (configOverride) {
    config = *configOverride;
    auto p = policyFromJson(config, policyError);
    if (!p) return sendError(res, 400, failed + ": " + policyError);
    policy = *p;
  } else {
    std::error_code ec;
    if (!fs::is_regular_file(dir / "config.pbtxt", ec)) {
      // The stand-in's wording; Triton may auto-complete some backends' configurations.
      return sendError(res, 400,
                       failed + ", failed to poll from model repository: no " +
                           "config.pbtxt in the model directory");
    }
    const std::string pbtxt = readFile(dir / "config.pbtxt");
    policy = policyFromPbtxt(pbtxt);
    std::smatch m;
    if (std::regex_search(pbtxt, m, std::regex(R"(backend\s*:\s*\"([^\"]*)\")"))) {
      config["backend"] = m[1].str();
    }
  }
  config["name"] = name;
  config["version_policy"] = policy.toJson();

  std::set<std::int64_t> wanted;
  if (policy.kind == Policy::kAll) {
    wanted = available;
  } else if (policy.kind == Policy::kSpecific) {
    for (std::int64_t v : policy.specific) {
      if (!available.contains(v)) {
        // The stand-in's wording.
        return sendError(res, 400,
                         failed + " version " + std::to_string(v) +
                             ": no such version directory in the model repository");
      }
    }
    wanted = policy.specific;
  } else {
    for (auto it = available.rbegin(); it != available.rend() && wanted.size() < policy.latest;
         ++it) {
      wanted.insert(*it);
    }
  }
  if (wanted.empty()) return sendError(res, 400, failed + ", no version is available");

  // Bring the new versions up beside the ones that serve now.
  {
    std::lock_guard lock(stateMu_);
    Model& model = models_[name];
    for (std::int64_t v : wanted) {
      auto it = model.versions.find(v);
      if (it == model.versions.end() || it->second.state != "READY") {
        model.versions[v] = {"LOADING", ""};
      }
    }
  }
  if ((options_.loadDelayMs > 0 && !pause(options_.loadDelayMs)) || !awaitWork()) {
    res.status = 503;
    return;
  }

  std::lock_guard lock(stateMu_);
  Model& model = models_[name];
  std::string failure;
  for (std::int64_t v : wanted) {
    const fs::path marker = dir / std::to_string(v) / "FAIL";
    std::error_code ec;
    if (files.empty() && fs::exists(marker, ec)) {
      std::string why = readFile(marker);
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      model.versions[v] = {"UNAVAILABLE", why};
      if (failure.empty()) failure = failed + " version " + std::to_string(v) + ": " + why;
    }
  }
  if (!failure.empty()) {
    // A failed reload leaves what served before as it was.
    for (std::int64_t v : wanted) {
      if (model.versions[v].state == "LOADING") model.versions[v] = {"UNAVAILABLE", "unloaded"};
    }
    return sendError(res, 400, failure);
  }
  for (auto& [v, version] : model.versions) {
    if (wanted.contains(v)) {
      version = {"READY", ""};
    } else if (version.state == "READY" || version.state == "LOADING") {
      version = {"UNAVAILABLE", "unloaded"};
    }
  }
  model.config = config;
  model.files = files;
  model.fromOverride = !files.empty();
  res.status = 200;
}

void FakeTriton::handleUnload(const std::string& name, const httplib::Request& req,
                              httplib::Response& res) {
  noteBody(req);
  if (!options_.explicitMode) return refuseModelControl(res);
  if (!req.body.empty()) {
    auto body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return sendError(res, 400, "failed to parse the request JSON buffer: not a JSON object");
    }
    if (body.contains("parameters")) {
      const json& p = body["parameters"];
      if (!p.is_object() ||
          (p.contains("unload_dependents") && !p["unload_dependents"].is_boolean())) {
        return sendError(res, 400, "Unable to parse 'unload_dependents', expecting boolean");
      }
    }
  }
  std::lock_guard serial(loadMu_);
  std::lock_guard lock(stateMu_);
  auto it = models_.find(name);
  if (it == models_.end() && !inRepository(name)) {
    // The stand-in's wording.
    return sendError(res, 400, "failed to unload '" + name + "', no model is found");
  }
  if (it == models_.end()) {
    res.status = 200;  // known but never loaded: nothing to do
    return;
  }
  bool any = false;
  for (auto& [v, version] : it->second.versions) {
    if (version.state == "READY" || version.state == "LOADING") {
      version = {"UNLOADING", ""};
      any = true;
    }
  }
  const auto finish = [this, name] {
    std::lock_guard lock(stateMu_);
    for (auto& [v, version] : models_[name].versions) {
      if (version.state == "UNLOADING") version = {"UNAVAILABLE", "unloaded"};
    }
  };
  if (any && options_.unloadDelayMs > 0) {
    // Triton acknowledges the unload and finishes it in the background.
    unloaders_.emplace_back([this, finish] {
      pause(options_.unloadDelayMs);
      finish();
    });
  } else if (any) {
    for (auto& [v, version] : it->second.versions) {
      if (version.state == "UNLOADING") version = {"UNAVAILABLE", "unloaded"};
    }
  }
  res.status = 200;
}

void FakeTriton::handleReady(const std::string& name, std::optional<std::int64_t> version,
                             httplib::Response& res) {
  std::lock_guard lock(stateMu_);
  bool ready = false;
  auto it = models_.find(name);
  if (it != models_.end()) {
    for (const auto& [v, state] : it->second.versions) {
      if ((!version || *version == v) && state.state == "READY") ready = true;
    }
  }
  // 200 with no body when ready; 400 otherwise (recent releases add this error body, older
  // ones sent the status alone).
  if (ready) {
    res.status = 200;
  } else {
    sendError(res, 400, "Model version not ready");
  }
}

void FakeTriton::handleConfig(const std::string& name, httplib::Response& res) {
  std::lock_guard lock(stateMu_);
  auto it = models_.find(name);
  if (it == models_.end() && !inRepository(name)) {
    return sendError(res, 400, "Request for unknown model: '" + name + "' is not found");
  }
  bool loaded = false;
  if (it != models_.end()) {
    for (const auto& [v, state] : it->second.versions) loaded |= state.state == "READY";
  }
  if (!loaded) {
    return sendError(res, 404,
                     "Request for unknown model: '" + name + "' has no available versions");
  }
  tritonSendJson(res, 200, it->second.config);
}

}  // namespace tessera::engines::testing
