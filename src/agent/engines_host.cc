#include "agent/engines_host.h"

#include <httplib.h>

#include <set>

#include "agent/admin_http.h"

namespace tessera::agent {

using nlohmann::json;

namespace {

void reply(httplib::Response& res, const Result<json>& r) {
  // 502 for a failure: the engine did not answer, or failed; the agent is a gateway here.
  if (r) {
    admin::sendJson(res, 200, *r);
  } else {
    admin::sendError(res, r.error(), 502);
  }
}

json modelJson(const engines::ModelState& m) {
  json e{{"name", m.name}, {"state", engines::modelPhaseName(m.phase)}};
  if (m.version) e["version"] = *m.version;
  if (!m.reason.empty()) e["reason"] = m.reason;
  if (!m.parent.empty()) e["parent"] = m.parent;
  return e;
}

bool resident(engines::ModelPhase p) {
  return p == engines::ModelPhase::kReady || p == engines::ModelPhase::kLoading;
}

}  // namespace

Result<std::unique_ptr<EnginesHost>> EnginesHost::create(std::vector<AgentEngineConfig> configs,
                                                         Millis refreshMs) {
  std::vector<Slot> slots;
  for (AgentEngineConfig& c : configs) {
    auto engine = engines::makeEngine(c.engine);
    if (!engine) {
      return fail(Error::invalid("engine " + c.name + ": " + engine.error().message));
    }
    slots.push_back({std::move(c), std::move(*engine), std::make_unique<std::mutex>()});
  }
  return std::unique_ptr<EnginesHost>(new EnginesHost(std::move(slots), refreshMs));
}

EnginesHost::EnginesHost(std::vector<Slot> slots, Millis refreshMs)
    : slots_(std::move(slots)), refreshMs_(refreshMs > 0 ? refreshMs : 1000) {}

EnginesHost::~EnginesHost() {
  stop();
}

void EnginesHost::setInFlight(std::function<std::size_t()> inFlight) {
  inFlight_ = std::move(inFlight);
}
void EnginesHost::setLog(std::function<void(const std::string&)> log) {
  log_ = std::move(log);
}
void EnginesHost::setAccepting(std::function<bool()> accepting) {
  accepting_ = std::move(accepting);
}

void EnginesHost::say(const std::string& line) const {
  if (log_) log_(line);
}

Result<void> EnginesHost::start(const std::vector<AgentGpu>&) {
  if (slots_.empty()) return {};
  refresher_ = std::thread([this] {
    for (;;) {
      refresh();
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(refreshMs_), [this] { return stopping_; });
      if (stopping_) return;
    }
  });
  return {};
}

void EnginesHost::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (refresher_.joinable() && refresher_.get_id() != std::this_thread::get_id()) {
    refresher_.join();
  }
}

json EnginesHost::probe(Slot& slot) {
  engines::Engine& e = *slot.engine;
  json v{{"name", slot.config.name},
         {"kind", std::string(e.kind())},
         {"url", e.url()},
         {"onDrain", engineDrainName(slot.config.onDrain)}};
  auto healthy = e.healthy();
  if (!healthy) {
    v["healthy"] = false;
    v["error"] = healthy.error().message;
    return v;
  }
  v["healthy"] = *healthy;
  if (e.capabilities().sleep) {
    if (auto asleep = e.sleeping(); asleep) v["sleeping"] = *asleep;
  }
  auto models = e.list();
  if (!models) {
    v["error"] = models.error().message;
    return v;
  }
  json list = json::array();
  {
    std::lock_guard lock(mu_);
    for (const engines::ModelState& m : *models) {
      json entry = modelJson(m);
      if (const auto tag = adapterTags_.find(slot.config.name + "/" + m.name);
          tag != adapterTags_.end() && !m.parent.empty()) {
        entry["version"] = tag->second;
      }
      list.push_back(std::move(entry));
    }
  }
  v["models"] = list;
  return v;
}

void EnginesHost::refresh() {
  for (Slot& slot : slots_) {
    json v = probe(slot);
    std::lock_guard lock(mu_);
    view_[slot.config.name] = std::move(v);
  }
}

json EnginesHost::status() const {
  json list = json::array();
  std::lock_guard lock(mu_);
  for (const Slot& slot : slots_) {
    json v;
    if (const auto it = view_.find(slot.config.name); it != view_.end()) {
      v = it->second;
    } else {
      v = {{"name", slot.config.name},
           {"kind", std::string(slot.engine->kind())},
           {"url", slot.engine->url()},
           {"onDrain", engineDrainName(slot.config.onDrain)},
           {"state", "not probed yet"}};
    }
    if (const auto it = lastSwitch_.find(slot.config.name); it != lastSwitch_.end()) {
      v["lastSwitch"] = it->second;
    }
    list.push_back(std::move(v));
  }
  return list;
}

EnginesHost::Slot* EnginesHost::find(const std::string& name) {
  for (Slot& s : slots_) {
    if (s.config.name == name) return &s;
  }
  return nullptr;
}

Result<EnginesHost::Slot*> EnginesHost::engineFor(const std::string& model, const json& body) {
  if (slots_.empty()) return fail(Error::precondition("this agent drives no engines"));
  if (body.contains("engine")) {
    if (!body["engine"].is_string()) return fail(Error::invalid("engine: expected a name"));
    Slot* s = find(body["engine"].get<std::string>());
    if (s == nullptr) {
      return fail(Error::notFound("no engine named " + body["engine"].get<std::string>()));
    }
    return s;
  }
  if (slots_.size() == 1) return &slots_.front();
  std::vector<Slot*> serving;
  std::vector<std::string> unreachable;
  for (Slot& s : slots_) {
    auto models = s.engine->list();
    if (!models) {
      unreachable.push_back(s.config.name);
      continue;
    }
    for (const engines::ModelState& m : *models) {
      if (m.name == model) {
        serving.push_back(&s);
        break;
      }
    }
  }
  if (serving.size() == 1) return serving.front();
  if (serving.empty()) {
    std::string message = "no engine lists model " + model + "; name one with \"engine\"";
    if (!unreachable.empty()) {
      message += " (not answering: ";
      for (std::size_t i = 0; i < unreachable.size(); ++i) {
        message += (i ? ", " : "") + unreachable[i];
      }
      message += ")";
    }
    return fail(Error::notFound(message));
  }
  return fail(Error::invalid("several engines list model " + model + "; name one with \"engine\""));
}

Result<json> EnginesHost::switchModel(const std::string& model, const json& body) {
  if (!body.is_object()) return fail(Error::invalid("body: expected a JSON object"));
  if (accepting_ && !accepting_()) {
    return fail(Error::precondition("the node is draining; it switches no models"));
  }
  auto found = engineFor(model, body);
  if (!found) return fail(found.error());
  Slot& slot = **found;
  engines::Engine& e = *slot.engine;
  const engines::Capabilities caps = e.capabilities();
  std::lock_guard one(*slot.switchMu);
  json result{{"engine", slot.config.name}, {"kind", std::string(e.kind())}, {"model", model}};
  if (caps.versions) {
    if (!body.contains("version") || !body["version"].is_number_integer() ||
        body["version"].get<std::int64_t>() < 1) {
      return fail(Error::invalid(std::string(e.kind()) + " engine " + slot.config.name +
                                 ": body needs \"version\": an integer from 1"));
    }
    engines::LoadRequest load;
    load.model = model;
    load.version = body["version"].get<std::int64_t>();
    if (body.contains("config")) {
      if (!body["config"].is_object()) {
        return fail(Error::invalid("config: expected a model configuration object"));
      }
      load.configJson = body["config"].dump();
    }
    say("engine " + slot.config.name + ": switching " + model + " to version " +
        std::to_string(*load.version));
    TESSERA_RETURN_IF_ERROR(e.load(load));
    auto ready = e.ready(model, load.version);
    if (!ready) return fail(ready.error());
    if (!*ready) {
      return fail(Error::internal(slot.config.name + ": " + model + " version " +
                                  std::to_string(*load.version) +
                                  " loaded but does not report ready"));
    }
    result["version"] = *load.version;
  } else if (caps.adapters) {
    if (!body.contains("path") || !body["path"].is_string() ||
        body["path"].get<std::string>().empty()) {
      return fail(Error::invalid(std::string(e.kind()) + " engine " + slot.config.name +
                                 ": body needs \"path\": the LoRA adapter's directory as the "
                                 "server sees it"));
    }
    if (caps.sleep) {
      if (auto asleep = e.sleeping(); asleep && *asleep) {
        return fail(Error::precondition(slot.config.name +
                                        " is asleep; wake it first (POST "
                                        "/engines/" +
                                        slot.config.name + "/wake)"));
      }
    }
    auto models = e.list();
    if (!models) return fail(models.error());
    bool present = false;
    for (const engines::ModelState& m : *models) {
      if (m.name == model && m.parent.empty()) {
        return fail(Error::invalid(model + " is " + slot.config.name +
                                   "'s base model, fixed when vLLM starts; only LoRA adapters "
                                   "switch at run time"));
      }
      present = present || m.name == model;
    }
    engines::LoadRequest load;
    load.model = model;
    load.path = body["path"].get<std::string>();
    load.replace = present;
    say("engine " + slot.config.name + ": " + (present ? "replacing" : "loading") + " adapter " +
        model + " from " + load.path);
    TESSERA_RETURN_IF_ERROR(e.load(load));
    auto ready = e.ready(model);
    if (!ready) return fail(ready.error());
    if (!*ready) {
      return fail(Error::internal(slot.config.name + ": adapter " + model +
                                  " loaded but is not listed as ready"));
    }
    result["path"] = load.path;
    result["replaced"] = present;
    if (body.contains("version")) result["version"] = body["version"];
    std::lock_guard lock(mu_);
    if (body.contains("version")) {
      adapterTags_[slot.config.name + "/" + model] = body["version"];
    } else {
      adapterTags_.erase(slot.config.name + "/" + model);
    }
  } else {
    return fail(Error::precondition(slot.config.name + " can switch neither versions nor "
                                                       "adapters"));
  }
  result["ready"] = true;
  {
    std::lock_guard lock(mu_);
    lastSwitch_[slot.config.name] = result;
  }
  json v = probe(slot);
  std::lock_guard lock(mu_);
  view_[slot.config.name] = std::move(v);
  return result;
}

Result<json> EnginesHost::sleepEngine(const std::string& name, int level, bool force) {
  Slot* slot = find(name);
  if (slot == nullptr) return fail(Error::notFound("no engine named " + name));
  if (!slot->engine->capabilities().sleep) {
    return fail(Error::precondition(name + " (" + std::string(slot->engine->kind()) +
                                    ") has no sleep mode"));
  }
  if (level != 1 && level != 2) return fail(Error::invalid("level: 1 or 2"));
  const std::size_t busy = inFlight_ ? inFlight_() : 0;
  if (busy > 0 && !force) {
    return fail(Error::precondition(
        std::to_string(busy) +
        " work item(s) in flight on this node; vLLM's sleep aborts running requests (pass "
        "\"force\": true to sleep anyway)"));
  }
  std::lock_guard one(*slot->switchMu);
  TESSERA_RETURN_IF_ERROR(slot->engine->sleep(level == 1 ? engines::SleepLevel::kOffloadWeights
                                                         : engines::SleepLevel::kDiscardWeights));
  json v = probe(*slot);
  std::lock_guard lock(mu_);
  view_[name] = v;
  return json{{"engine", name}, {"sleeping", true}, {"level", level}};
}

Result<json> EnginesHost::wakeEngine(const std::string& name) {
  if (accepting_ && !accepting_()) {
    return fail(Error::precondition("the node is draining; its engines stay asleep"));
  }
  Slot* slot = find(name);
  if (slot == nullptr) return fail(Error::notFound("no engine named " + name));
  if (!slot->engine->capabilities().sleep) {
    return fail(Error::precondition(name + " (" + std::string(slot->engine->kind()) +
                                    ") has no sleep mode"));
  }
  std::lock_guard one(*slot->switchMu);
  TESSERA_RETURN_IF_ERROR(slot->engine->wakeUp());
  json v = probe(*slot);
  std::lock_guard lock(mu_);
  view_[name] = v;
  return json{{"engine", name}, {"sleeping", false}};
}

std::vector<std::string> EnginesHost::drain(std::size_t workLeft) {
  std::vector<std::string> lines;
  for (Slot& slot : slots_) {
    engines::Engine& e = *slot.engine;
    const engines::Capabilities caps = e.capabilities();
    const std::string who = "engine " + slot.config.name + " (" + std::string(e.kind()) + ")";
    EngineDrain mode = slot.config.onDrain;
    if (mode == EngineDrain::kAuto) {
      mode = caps.sleep ? EngineDrain::kSleep
                        : (caps.repository ? EngineDrain::kUnload : EngineDrain::kNone);
    }
    std::lock_guard one(*slot.switchMu);
    if (mode == EngineDrain::kNone) {
      lines.push_back(who + ": left serving (onDrain: none)");
      continue;
    }
    if (mode == EngineDrain::kSleep && !caps.sleep) {
      lines.push_back(who + ": has no sleep mode; left serving");
      continue;
    }
    // Triton finishes running requests before it unloads; vLLM's sleep aborts them, and an
    // adapter unloaded under a request fails it.
    if (caps.sleep && workLeft > 0) {
      lines.push_back(who + ": not " + (mode == EngineDrain::kSleep ? "put to sleep" : "unloaded") +
                      ": " + std::to_string(workLeft) +
                      " work item(s) still in flight (vLLM would abort them)");
      continue;
    }
    if (mode == EngineDrain::kSleep) {
      auto slept = e.sleep(engines::SleepLevel::kOffloadWeights);
      lines.push_back(slept ? who + ": asleep (level 1: weights in host memory)"
                            : who + ": sleep failed: " + slept.error().message);
      continue;
    }
    auto models = e.list();
    if (!models) {
      lines.push_back(who + ": cannot list models to unload: " + models.error().message);
      continue;
    }
    std::set<std::string> names;
    for (const engines::ModelState& m : *models) {
      // vLLM: adapters only (the base model stays); Triton: every resident model.
      if (caps.adapters && m.parent.empty()) continue;
      if (resident(m.phase)) names.insert(m.name);
    }
    std::vector<std::string> failed;
    for (const std::string& n : names) {
      if (auto unloaded = e.unload(n); !unloaded) failed.push_back(unloaded.error().message);
    }
    std::string line =
        who + ": unloaded " + std::to_string(names.size() - failed.size()) + " model(s)";
    for (const std::string& f : failed) line += "; failed: " + f;
    lines.push_back(line);
  }
  if (!slots_.empty()) refresh();
  return lines;
}

void EnginesHost::adminRoutes(httplib::Server& s) {
  using Req = httplib::Request;
  using Res = httplib::Response;
  auto parse = [](const Req& req) {
    return req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
  };
  s.Post(R"(/models/(.+)/switch)", [this, parse](const Req& req, Res& res) {
    const json body = parse(req);
    if (!body.is_object()) return reply(res, fail(Error::invalid("body: expected JSON")));
    reply(res, switchModel(req.matches[1].str(), body));
  });
  s.Get("/engines", [this](const Req&, Res& res) { reply(res, status()); });
  s.Post(R"(/engines/([^/]+)/sleep)", [this, parse](const Req& req, Res& res) {
    const json body = parse(req);
    if (!body.is_object()) return reply(res, fail(Error::invalid("body: expected JSON")));
    const json level = body.value("level", json(1));
    const json force = body.value("force", json(false));
    if (!level.is_number_integer() || !force.is_boolean()) {
      return reply(res, fail(Error::invalid("body: {\"level\": 1|2, \"force\": bool}")));
    }
    reply(res, sleepEngine(req.matches[1].str(), level.get<int>(), force.get<bool>()));
  });
  s.Post(R"(/engines/([^/]+)/wake)",
         [this](const Req& req, Res& res) { reply(res, wakeEngine(req.matches[1].str())); });
}

}  // namespace tessera::agent
