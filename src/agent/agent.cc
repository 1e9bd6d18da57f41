#include "agent/agent.h"

#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "agent/admin_http.h"
#include "api/http_helpers.h"
#include "common/listen_socket.h"

namespace tessera::agent {

using admin::sendError;
using admin::sendJson;
using nlohmann::json;

const char* phaseName(AgentPhase phase) {
  switch (phase) {
    case AgentPhase::kRunning:
      return "running";
    case AgentPhase::kDraining:
      return "draining";
    case AgentPhase::kDrained:
      return "drained";
  }
  return "running";
}

Agent::Agent(AgentConfig config, AgentParts parts, AgentTimings timings)
    : config_(std::move(config)), parts_(std::move(parts)), timings_(timings) {}

Agent::~Agent() {
  stop();
  for (std::thread* t : {&drainThread_, &stageThread_, &heartbeatThread_, &adminThread_}) {
    if (t->joinable()) t->join();
  }
  stopComponents();
  removeAdminAddress();
}

void Agent::removeAdminAddress() {
  if (adminAddressWritten_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(adminAddressWritten_, ec);  // gone is as good as removed
  adminAddressWritten_.clear();
}

void Agent::stopComponents() {
  std::call_once(componentsStopped_, [this] {
    for (auto it = parts_.components.rbegin(); it != parts_.components.rend(); ++it) (*it)->stop();
  });
}

std::string adminAddressPath(const AgentConfig& config) {
  return (std::filesystem::path(config.cache.dir) / "admin-address").string();
}

void Agent::writeAdminAddress(const std::string& address) {
  // Written whole, then renamed: a reader never sees half an address.
  const std::string path = adminAddressPath(config_);
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << address << "\n";
    if (!out.flush()) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) std::filesystem::rename(tmp, path, ec);
  if (ec) {
    parts_.log->warn("admin address not written",
                     {{"path", path}, {"address", address}, {"error", ec.message()}});
    return;
  }
  adminAddressWritten_ = path;
}

Result<int> Agent::start() {
  if (parts_.gpus == nullptr || parts_.client == nullptr || parts_.log == nullptr) {
    return fail(
        Error::internal("agent: a GPU source, a control-plane client and a logger are required"));
  }
  auto address = parseAdminAddress(config_.admin);
  if (!address) return fail(address.error());
  auto first = parts_.gpus->sample();
  if (!first) return fail(first.error());
  lastGpus_ = std::move(*first);
  for (std::size_t i = 0; i < parts_.components.size(); ++i) {
    if (auto started = parts_.components[i]->start(lastGpus_); !started) {
      for (std::size_t j = i + 1; j-- > 0;) parts_.components[j]->stop();
      return fail(started.error());
    }
  }

  admin_ = std::make_unique<httplib::Server>();
  admin_->set_socket_options(exclusiveListenOptions);  // a busy admin port is an error
  admin_->new_task_queue = [] { return new httplib::ThreadPool(4); };
  admin_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    api::assumeNoBodyWithoutLength(req);  // `curl -X POST .../drain` is served at once
    return httplib::Server::HandlerResponse::Unhandled;
  });
  admin_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      sendError(res, Error::notFound("no route " + req.method + " " + req.path));
    } else if (res.status >= 400) {
      const int status = res.status;  // httplib's (400, 413, 414...): kept
      sendError(res, Error::invalid("the request could not be read (malformed HTTP)"));
      res.status = status;
    }
  });
  admin_->set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                   std::exception_ptr) {
    sendError(res, Error::internal("the agent failed on this request"));
  });
  adminRoutes();
  for (AgentComponent* c : parts_.components) c->adminRoutes(*admin_);
  int port = address->second;
  if (port == 0) {
    port = admin_->bind_to_any_port(address->first);
    if (port < 0) {
      stopComponents();
      return fail(Error::invalid("admin: cannot bind " + address->first));
    }
  } else if (!admin_->bind_to_port(address->first, port)) {
    stopComponents();
    return fail(
        Error::invalid("admin: cannot listen on " + config_.admin + " (in use, or not allowed)"));
  }
  // The cache directory is the agent's node-local state; without a cache there is nowhere.
  if (address->second == 0 && parts_.cache != nullptr) writeAdminAddress(address->first + ":" + std::to_string(port));
  adminThread_ = api::listenInBackground(*admin_);  // a stop right after start ends it
  heartbeatThread_ = std::thread([this] { heartbeatLoop(); });
  if (parts_.cache != nullptr) {
    {
      std::lock_guard lock(mu_);
      for (const std::string& model : config_.preload) enqueueStageLocked(model);
    }
    stageThread_ = std::thread([this] { stageLoop(); });
  }
  return port;
}

void Agent::wake() {
  std::lock_guard lock(mu_);
  wakeRequested_ = true;
  cv_.notify_all();
}

bool Agent::sleepFor(Millis ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_ || wakeRequested_; });
  wakeRequested_ = false;
  return !stopping_;
}

bool Agent::pauseFor(Millis ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
  return !stopping_;
}

void Agent::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    done_ = true;
    cv_.notify_all();
    stageCv_.notify_all();
  }
  if (admin_) admin_->stop();
}

int Agent::wait() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  stop();
  for (std::thread* t : {&drainThread_, &stageThread_, &heartbeatThread_, &adminThread_}) {
    if (t->joinable() && t->get_id() != std::this_thread::get_id()) t->join();
  }
  stopComponents();
  removeAdminAddress();
  return 0;
}

bool Agent::finished() const {
  std::lock_guard lock(mu_);
  return done_;
}

AgentPhase Agent::phase() const {
  std::lock_guard lock(mu_);
  return phase_;
}

json Agent::registrationBody(const std::vector<AgentGpu>& gpus) const {
  json node{{"name", config_.nodeName}};
  if (config_.cpuMilli > 0) node["cpuMilli"] = config_.cpuMilli;
  if (config_.hostMemoryMib > 0) node["hostMemoryMib"] = config_.hostMemoryMib;
  json labels = json::object();
  for (const auto& [k, v] : config_.labels) labels[k] = v;
  labels["tessera.io/gpu-source"] = parts_.gpus->kind();
  node["labels"] = labels;
  if (parts_.cache != nullptr) node["cachedModels"] = parts_.cache->models();
  json list = json::array();
  for (const AgentGpu& g : gpus) {
    json e{{"id", g.id}, {"uuid", g.uuid}, {"type", g.type}, {"healthy", g.healthy}};
    if (g.memoryMib > 0) e["memoryMib"] = g.memoryMib;
    if (g.numaNode >= 0) e["numaNode"] = g.numaNode;
    if (g.nvlinkGroup >= 0) e["nvlinkGroup"] = g.nvlinkGroup;
    if (g.migEnabled) {
      e["migEnabled"] = true;
      json instances = json::array();
      for (std::size_t i = 0; i < g.migProfiles.size(); ++i) {
        json instance{{"profile", g.migProfiles[i]}};
        if (i < g.migStarts.size() && g.migStarts[i] >= 0) instance["startSlot"] = g.migStarts[i];
        instances.push_back(std::move(instance));
      }
      if (!instances.empty()) e["migInstances"] = instances;
    }
    list.push_back(std::move(e));
  }
  node["gpus"] = list;
  return node;
}

json Agent::heartbeatBody(const std::vector<AgentGpu>& gpus) const {
  json body = json::object();
  json list = json::array();
  for (const AgentGpu& g : gpus) {
    // A virtual GPU measures nothing; reporting 0 MiB used would claim that it did.
    if (g.isVirtual) continue;
    json t{{"id", g.id}, {"usedMib", g.usedMib}, {"healthy", g.healthy}};
    if (g.utilization >= 0) t["utilization"] = std::clamp(g.utilization, 0.0, 1.0);
    list.push_back(std::move(t));
  }
  if (!list.empty()) body["gpus"] = list;
  if (parts_.cache != nullptr) body["cachedModels"] = parts_.cache->models();
  for (const AgentComponent* c : parts_.components) {
    const json fields = c->heartbeatFields();  // named: a temporary would die before the loop
    for (const auto& [key, value] : fields.items()) body[key] = value;
  }
  return body;
}

void Agent::heartbeatLoop() {
  std::random_device seed;
  Backoff backoff(timings_.backoffInitialMs, timings_.backoffMaxMs, seed());
  api::Logger& log = *parts_.log;
  for (;;) {
    auto gpus = parts_.gpus->sample();
    std::vector<AgentGpu> snapshot;
    bool registered = false;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (gpus) lastGpus_ = *gpus;
      snapshot = lastGpus_;
      registered = registered_;
    }
    if (gpus) {
      for (AgentComponent* c : parts_.components) c->gpusSampled(snapshot);
    }
    Result<void> outcome;
    const bool registeringNow = !registered;
    if (!registered) {
      outcome = parts_.client->registerNode(registrationBody(snapshot));
      if (outcome) {
        log.info("registered", {{"node", config_.nodeName},
                                {"server", parts_.client->server()},
                                {"gpus", snapshot.size()},
                                {"gpuSource", parts_.gpus->kind()}});
        reconcileRegistration(snapshot);
        std::lock_guard lock(mu_);
        registered_ = true;
        ++registrations_;
        registered = true;
      }
    }
    if (registered) {
      outcome = parts_.client->heartbeat(config_.nodeName, heartbeatBody(snapshot));
      if (!outcome && outcome.error().code == ErrorCode::kNotFound) {
        log.warn(
            "the server does not know this node (restarted without its state?); registering again",
            {{"node", config_.nodeName}});
        std::lock_guard lock(mu_);
        registered_ = false;
        // Register at once, unless this very round registered: then the server accepts the
        // node but does not know it (a proxy in between?), and retrying in a loop would spin.
        if (!registeringNow) continue;
      }
    }
    Millis delay = config_.heartbeatMs;
    {
      std::lock_guard lock(mu_);
      if (outcome) {
        ++heartbeats_;
        lastError_.clear();
      } else {
        ++heartbeatFailures_;
        lastError_ = outcome.error().message;
      }
    }
    if (outcome) {
      if (backoff.attempts() > 0)
        log.info("control plane reachable again", {{"server", parts_.client->server()}});
      backoff.reset();
    } else {
      delay = backoff.next();
      log.warn("control plane call failed; retrying", {{"error", outcome.error().message},
                                                       {"retryInMs", delay},
                                                       {"attempt", backoff.attempts()}});
    }
    if (!sleepFor(delay)) return;
  }
}

void Agent::enqueueStageLocked(const std::string& model) {
  const auto it = stages_.find(model);
  if (it != stages_.end() && (it->second.state == "queued" || it->second.state == "staging")) {
    return;  // one copy at a time per model; a second request waits for the same one
  }
  stages_[model] = StageState{"queued", std::nullopt, 0};
  stageQueue_.push_back(model);
  stageCv_.notify_all();
}

json Agent::stageJsonLocked(const std::string& model) const {
  json out{{"model", model}};
  const auto it = stages_.find(model);
  if (it == stages_.end()) return out;
  out["state"] = it->second.state;
  if (it->second.state == "staged") out["diskBytes"] = it->second.diskBytes;
  if (it->second.error) out["error"] = it->second.error->message;
  return out;
}

void Agent::stageLoop() {
  while (true) {
    std::string model;
    {
      std::unique_lock lock(mu_);
      stageCv_.wait(lock, [this] {
        return stopping_ || phase_ != AgentPhase::kRunning || !stageQueue_.empty();
      });
      if (stopping_ || phase_ != AgentPhase::kRunning) {
        // A draining node stages nothing more: what was queued is answered, not dropped.
        for (const std::string& m : stageQueue_) {
          stages_[m] = StageState{"failed", Error::precondition("the agent is draining"), 0};
        }
        stageQueue_.clear();
        return;
      }
      model = std::move(stageQueue_.front());
      stageQueue_.pop_front();
      stages_[model].state = "staging";
    }
    auto staged = parts_.cache->stage(model, parts_.sources);
    const bool preloaded =
        std::find(config_.preload.begin(), config_.preload.end(), model) != config_.preload.end();
    {
      std::lock_guard lock(mu_);
      StageState& st = stages_[model];
      if (staged) {
        st = StageState{"staged", std::nullopt, staged->diskBytes};
      } else {
        st = StageState{"failed", staged.error(), 0};
        if (preloaded) preloadErrors_.push_back(staged.error().message);
      }
    }
    if (staged) {
      parts_.log->info("model staged", {{"model", model}, {"bytes", staged->diskBytes}});
      wake();  // report the new cache contents now
    } else {
      parts_.log->warn(preloaded ? "preload failed" : "stage failed",
                       {{"model", model}, {"error", staged.error().message}});
    }
  }
}

void Agent::drain(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (phase_ != AgentPhase::kRunning || stopping_) return;
  phase_ = AgentPhase::kDraining;
  drainReason_ = reason;
  stageCv_.notify_all();  // the stage worker answers what is queued and ends
  drainThread_ = std::thread([this, reason] { drainSequence(reason); });
}

std::string Agent::drainMarkerPath() const {
  return (std::filesystem::path(config_.cache.dir) / ".tessera-agent-drained").string();
}

// A node the server already knew (409 on register) keeps the server's record: lift the
// cordon this node's previous agent set when it drained, and say when the record differs from
// what this agent discovered (the server does not replace a node's GPUs on register).
void Agent::reconcileRegistration(const std::vector<AgentGpu>& gpus) {
  api::Logger& log = *parts_.log;
  auto node = parts_.client->getNode(config_.nodeName);
  if (!node) return;  // the next heartbeat says what is wrong
  std::vector<std::string> warnings;
  std::error_code ec;
  std::unique_lock markerLock(markerMu_);
  bool draining = false;
  {
    std::lock_guard lock(mu_);
    draining = phase_ != AgentPhase::kRunning;
  }
  const bool drainedBefore = std::filesystem::exists(drainMarkerPath(), ec);
  if (draining) {
    // This agent's own drain began while it registered: the cordon and the marker are its own.
  } else if (node->value("cordoned", false)) {
    if (drainedBefore) {
      if (auto lifted = parts_.client->setCordoned(config_.nodeName, false); lifted) {
        std::filesystem::remove(drainMarkerPath(), ec);
        log.info("lifted the cordon this node's previous agent set when it drained",
                 {{"node", config_.nodeName}});
      } else {
        warnings.push_back("could not lift the drain's cordon: " + lifted.error().message);
      }
    } else {
      warnings.push_back(
          "the control plane has this node cordoned (not by this agent's "
          "drain): no new replicas land here until POST /api/v1/nodes/" +
          config_.nodeName + "/uncordon");
    }
  } else if (drainedBefore) {
    std::filesystem::remove(drainMarkerPath(), ec);
  }
  markerLock.unlock();
  std::vector<std::string> known, found;
  if (node->contains("gpus") && (*node)["gpus"].is_array()) {
    for (const auto& g : (*node)["gpus"]) known.push_back(g.value("type", ""));
  }
  for (const AgentGpu& g : gpus) found.push_back(g.type);
  std::sort(known.begin(), known.end());
  std::sort(found.begin(), found.end());
  if (known != found) {
    warnings.push_back("the control plane knows this node with " + std::to_string(known.size()) +
                       " GPU(s) but this agent found " + std::to_string(found.size()) +
                       " (or other types); the server keeps its record: remove the node "
                       "(DELETE /api/v1/nodes/" +
                       config_.nodeName +
                       ", once it holds no replicas) to register the new inventory");
  }
  for (const std::string& w : warnings) log.warn(w, {{"node", config_.nodeName}});
  std::lock_guard lock(mu_);
  registrationWarnings_ = std::move(warnings);
}

void Agent::drainSequence(std::string reason) {
  api::Logger& log = *parts_.log;
  const Millis started = clock_.nowMs();
  auto note = [&](const std::string& step) {
    log.info("drain: " + step,
             {{"node", config_.nodeName}, {"elapsedMs", clock_.nowMs() - started}});
    std::lock_guard lock(mu_);
    drainLog_.push_back(step);
  };
  note("stop taking new work (" + reason + ")");
  // 1. Cordon at the control plane so no new replica lands here; its deployments replace
  //    the replicas elsewhere. Best effort: the server may be down, and the drain goes on.
  std::unique_lock markerLock(markerMu_);
  if (auto cordoned = parts_.client->drainNode(config_.nodeName); cordoned) {
    // Remembered so that this node's next agent lifts the cordon this drain set (and only
    // that one: an operator's cordon stays).
    std::ofstream marker(drainMarkerPath());
    marker << config_.nodeName << "\n";
    note(marker ? "node cordoned and drained at the control plane"
                : "node cordoned and drained at the control plane (could not write " +
                      drainMarkerPath() + ": the next agent will not lift this cordon)");
  } else {
    note("could not cordon at the control plane: " + cordoned.error().message);
  }
  markerLock.unlock();
  // 2. The stop-new-work window: load balancers and endpoints see /readyz fail and move
  //    traffic away while requests already routed here still arrive.
  if (!pauseFor(config_.stopNewWorkMs)) return;
  note("stop-new-work window over");
  // 3. In-flight work, up to the limit.
  const Millis deadline = clock_.nowMs() + config_.inFlightMaxMs;
  std::size_t left = inFlight();
  while (left > 0 && clock_.nowMs() < deadline) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(timings_.drainPollMs),
                   [this] { return stopping_; });
      if (stopping_) return;
    }
    left = inFlight();
  }
  note(left == 0 ? "no work in flight"
                 : "in-flight limit reached with " + std::to_string(left) +
                       " item(s) still running; going on");
  // 4. The node's components: engines sleep or unload (vLLM's sleep aborts running
  //    requests, so each decides by `left`), the device plugin stops.
  for (AgentComponent* c : parts_.components) {
    for (const std::string& line : c->drain(left)) note(line);
  }
  // 5. Device memory.
  if (parts_.device != nullptr) {
    if (auto released = parts_.device->releaseAll(); released) {
      note("device memory released (" + parts_.device->name() + ")");
    } else {
      note("releasing device memory failed: " + released.error().message);
    }
  } else {
    note("no device memory pool attached; nothing to release");
  }
  {
    std::lock_guard lock(mu_);
    phase_ = AgentPhase::kDrained;
  }
  note("drained");
  pauseFor(timings_.lingerMs);
  std::lock_guard lock(mu_);
  done_ = true;
  cv_.notify_all();
}

Result<std::string> Agent::acquireLease(const std::string& model) {
  {
    std::lock_guard lock(mu_);
    if (phase_ != AgentPhase::kRunning || stopping_) {
      return fail(Error::precondition("the node is " + std::string(phaseName(phase_)) +
                                      "; it takes no new work"));
    }
  }
  if (!model.empty()) {
    if (parts_.cache == nullptr) return fail(Error::precondition("this agent has no model cache"));
    TESSERA_RETURN_IF_ERROR(parts_.cache->pin(model));
  }
  // Checked again where the lease is granted: a drain that began while the model was being
  // pinned must not see a lease appear after it stopped new work.
  {
    std::lock_guard lock(mu_);
    if (phase_ == AgentPhase::kRunning && !stopping_) {
      const std::string id = "lease-" + std::to_string(++nextLease_);
      leases_.emplace(id, model);
      return id;
    }
  }
  if (!model.empty()) {
    if (auto undone = parts_.cache->unpin(model); !undone) {
      parts_.log->warn("unpin after a refused lease failed",
                       {{"model", model}, {"error", undone.error().message}});
    }
  }
  std::lock_guard lock(mu_);
  return fail(Error::precondition("the node is " + std::string(phaseName(phase_)) +
                                  "; it takes no new work"));
}

Result<void> Agent::releaseLease(const std::string& id) {
  std::string model;
  {
    std::lock_guard lock(mu_);
    const auto it = leases_.find(id);
    if (it == leases_.end()) return fail(Error::notFound("no lease " + id));
    model = it->second;
    leases_.erase(it);
    cv_.notify_all();
  }
  if (!model.empty() && parts_.cache != nullptr)
    TESSERA_RETURN_IF_ERROR(parts_.cache->unpin(model));
  return {};
}

std::size_t Agent::inFlight() const {
  std::size_t n = 0;
  {
    std::lock_guard lock(mu_);
    n = leases_.size();
  }
  for (const WorkTracker* t : parts_.trackers) n += t->inFlight();
  return n;
}

json Agent::status() const {
  json s;
  std::vector<AgentGpu> gpus;
  {
    std::lock_guard lock(mu_);
    s["node"] = config_.nodeName;
    s["state"] = phaseName(phase_);
    s["server"] = parts_.client->server();
    s["registered"] = registered_;
    s["registrations"] = registrations_;
    s["heartbeats"] = heartbeats_;
    s["heartbeatFailures"] = heartbeatFailures_;
    if (!lastError_.empty()) s["lastError"] = lastError_;
    if (!registrationWarnings_.empty()) s["registrationWarnings"] = registrationWarnings_;
    s["leases"] = leases_.size();
    if (phase_ != AgentPhase::kRunning) {
      s["drain"] = {{"reason", drainReason_}, {"steps", drainLog_}};
    }
    if (!preloadErrors_.empty()) s["preloadErrors"] = preloadErrors_;
    gpus = lastGpus_;
  }
  s["inFlight"] = inFlight();
  s["gpuSource"] = parts_.gpus->kind();
  json list = json::array();
  for (const AgentGpu& g : gpus) {
    json e{{"id", g.id},
           {"uuid", g.uuid},
           {"type", g.type},
           {"virtual", g.isVirtual},
           {"memoryMib", g.memoryMib},
           {"healthy", g.healthy},
           {"numaNode", g.numaNode},
           {"nvlinkGroup", g.nvlinkGroup}};
    if (!g.isVirtual) {
      e["nvmlName"] = g.nvmlName;
      e["usedMib"] = g.usedMib;
      if (g.utilization >= 0) e["utilization"] = g.utilization;
      e["migEnabled"] = g.migEnabled;
      e["migInstances"] = g.migProfiles;
      e["cpuAffinity"] = g.cpuAffinity;
      e["processes"] = g.processes;
      e["xids"] = g.xids;
    }
    list.push_back(std::move(e));
  }
  s["gpus"] = list;
  for (const AgentComponent* c : parts_.components) s[c->name()] = c->status();
  if (parts_.cache != nullptr) {
    const CacheStatus c = parts_.cache->status();
    json entries = json::array();
    for (const CacheEntry& e : c.entries) {
      entries.push_back({{"model", e.model},
                         {"diskBytes", e.diskBytes},
                         {"hostBytes", e.hostBytes},
                         {"pins", e.pins}});
    }
    s["cache"] = {{"diskUsedBytes", c.diskUsedBytes},
                  {"diskCapacityBytes", c.diskCapacityBytes},
                  {"hostUsedBytes", c.hostUsedBytes},
                  {"hostCapacityBytes", c.hostCapacityBytes},
                  {"filesystemFreeBytes", c.filesystemFreeBytes},
                  {"evictions", c.evictions},
                  {"warnings", c.warnings},
                  {"entries", entries}};
  }
  return s;
}

void Agent::adminRoutes() {
  httplib::Server& s = *admin_;
  using Req = httplib::Request;
  using Res = httplib::Response;
  s.Get("/healthz", [](const Req&, Res& res) { sendJson(res, 200, {{"ok", true}}); });
  s.Get("/readyz", [this](const Req&, Res& res) {
    std::lock_guard lock(mu_);
    const bool ready = phase_ == AgentPhase::kRunning && registered_;
    sendJson(res, ready ? 200 : 503, {{"ready", ready}, {"state", phaseName(phase_)}});
  });
  s.Get("/status", [this](const Req&, Res& res) { sendJson(res, 200, status()); });
  s.Post("/drain", [this](const Req&, Res& res) {
    drain("requested over the admin API");
    sendJson(res, 202, {{"state", phaseName(phase())}});
  });
  s.Post(R"(/models/(.+)/stage)", [this](const Req& req, Res& res) {
    if (parts_.cache == nullptr) {
      return sendError(res, Error::precondition("this agent has no model cache"));
    }
    const std::string model = req.matches[1].str();
    // Only the listing happens here (to answer 404 at once); the copy is the stage worker's.
    bool anySource = false;
    for (ModelSource* source : parts_.sources) {
      auto files = source->list(model);
      if (files || files.error().code != ErrorCode::kNotFound) {
        anySource = true;
        break;
      }
    }
    if (!anySource) {
      return sendError(res, Error::notFound("no model source has " + model));
    }
    std::lock_guard lock(mu_);
    if (stopping_ || phase_ != AgentPhase::kRunning) {
      return sendError(res, Error::precondition("the agent is " + std::string(phaseName(phase_)) +
                                                "; it stages nothing new"));
    }
    enqueueStageLocked(model);
    sendJson(res, 202, stageJsonLocked(model));
  });
  s.Get(R"(/models/(.+)/stage)", [this](const Req& req, Res& res) {
    const std::string model = req.matches[1].str();
    std::lock_guard lock(mu_);
    if (!stages_.contains(model)) {
      return sendError(res, Error::notFound("no stage of " + model + " was asked for"));
    }
    sendJson(res, 200, stageJsonLocked(model));
  });
  s.Post("/leases", [this](const Req& req, Res& res) {
    std::string model;
    if (!req.body.empty()) {
      const json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || (body.contains("model") && !body["model"].is_string())) {
        return sendError(res, Error::invalid("body: expected {\"model\": \"name\"}"));
      }
      model = body.value("model", "");
    }
    auto id = acquireLease(model);
    if (!id) return sendError(res, id.error());
    sendJson(res, 201, {{"id", *id}, {"model", model}});
  });
  s.Delete(R"(/leases/([^/]+))", [this](const Req& req, Res& res) {
    auto released = releaseLease(req.matches[1].str());
    if (!released) return sendError(res, released.error());
    sendJson(res, 200, {{"released", req.matches[1].str()}});
  });
}

}  // namespace tessera::agent
