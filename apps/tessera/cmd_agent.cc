#include "cmd_agent.h"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/control_client.h"
#include "agent/device_plugin_host.h"
#include "agent/device_pool_host.h"
#include "agent/dra_driver_host.h"
#include "agent/engines_host.h"
#include "agent/gpu_source.h"
#include "agent/model_cache.h"
#include "api/log.h"
#include "cli.h"
#include "common/names.h"
#include "model/gpu_catalog.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

constexpr std::string_view kAgentCommand = "agent";

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// Flags win over $TESSERA_* variables, which win over the file.
Result<agent::AgentConfig> resolveConfig(const AgentFlags& f) {
  agent::AgentConfig c;
  const std::optional<std::string> path = f.configPath ? f.configPath : env("TESSERA_AGENT_CONFIG");
  if (path) {
    auto loaded = agent::loadAgentFile(*path);
    if (!loaded) return fail(loaded.error());
    c = std::move(*loaded);
  }
  auto pick = [](const std::optional<std::string>& flag, const char* var) {
    return flag ? flag : env(var);
  };
  if (auto v = pick(f.nodeName, "TESSERA_NODE_NAME")) c.nodeName = *v;
  if (auto v = pick(f.server, "TESSERA_SERVER")) c.server = *v;
  if (auto v = pick(f.tokenFile, "TESSERA_TOKEN_FILE")) c.tokenFile = *v;
  if (auto v = pick(f.tlsCa, "TESSERA_TLS_CA")) c.tlsCa = *v;
  if (auto v = pick(f.admin, "TESSERA_AGENT_ADMIN")) c.admin = *v;
  if (auto v = pick(f.cacheDir, "TESSERA_CACHE_DIR")) c.cache.dir = *v;
  if (auto v = pick(f.nvmlLibrary, "TESSERA_NVML_LIBRARY")) c.nvmlLibrary = *v;
  if (auto v = pick(f.logFormat, "TESSERA_LOG_FORMAT")) {
    if (*v != "text" && *v != "json") {
      return fail(Error::invalid("log format: expected text or json, got \"" + *v + "\""));
    }
    c.logFormat = *v;
  }
  if (auto v = pick(f.gpuDiscovery, "TESSERA_GPU_DISCOVERY")) {
    auto d = agent::parseDiscovery(*v);
    if (!d) return fail(d.error());
    c.discovery = *d;
  }
  if (f.heartbeatSeconds) {
    c.heartbeatMs = agent::secondsToMillis(*f.heartbeatSeconds);
  } else if (auto v = env("TESSERA_HEARTBEAT_SECONDS")) {
    char* end = nullptr;
    const double s = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(s >= 0.01 && s <= 3600)) {
      return fail(Error::invalid(
          "TESSERA_HEARTBEAT_SECONDS: expected a number from 0.01 to 3600, got \"" + *v + "\""));
    }
    c.heartbeatMs = agent::secondsToMillis(s);
  }
  if (c.server.rfind("http://", 0) != 0 && c.server.rfind("https://", 0) != 0) {
    return fail(Error::invalid("server: expected http://HOST:PORT or https://HOST:PORT, got \"" +
                               c.server + "\""));
  }
  if (c.nodeName.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
      return fail(Error::invalid("node name: the host name is unknown; give --node-name"));
    }
    // As kubelet names its node: the host name, lowercased.
    c.nodeName = host;
    for (char& ch : c.nodeName) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  if (auto why = checkName(c.nodeName, NameKind::kSubdomain)) {
    return fail(Error::invalid("nodeName: " + *why +
                               "; set nodeName, --node-name or $TESSERA_NODE_NAME"));
  }
  return c;
}

// "127.0.0.1:9190", "http://127.0.0.1:9190" or "localhost:9190" -> "http://HOST:PORT".
// An address with port 0 names no agent: the agent chose its port at start and wrote it to
// <cache.dir>/admin-address, found through the agent's file (or $TESSERA_CACHE_DIR).
Result<std::string> resolveAdminAddress(const std::string& address,
                                        const std::optional<agent::AgentConfig>& file) {
  if (!address.ends_with(":0")) return address;
  agent::AgentConfig config = file.value_or(agent::AgentConfig{});
  if (auto dir = env("TESSERA_CACHE_DIR")) config.cache.dir = *dir;
  const std::string path = agent::adminAddressPath(config);
  std::ifstream in(path);
  std::string bound;
  if (!(in >> bound) || bound.empty()) {
    return fail(Error::precondition(
        "the admin address " + address + " has port 0, chosen when the agent started; no " + path +
        " holds the port it chose (pass the agent's --config, or --admin HOST:PORT)"));
  }
  return bound;
}

std::string adminUrl(const std::string& address) {
  if (address.rfind("http://", 0) == 0 || address.rfind("https://", 0) == 0) return address;
  return "http://" + address;
}

}  // namespace

AgentCommand::AgentCommand(CLI::App& app) {
  command_ =
      app.add_subcommand("agent", "The node agent: GPU discovery, model cache, heartbeats, drain");
  command_->require_subcommand(1);
  runCmd_ = command_->add_subcommand("run", "Run the node agent until it is drained or signalled");
  AgentFlags& f = flags_;
  runCmd_
      ->add_option("--config", f.configPath, "Agent file (docs/agent.md); flags and $TESSERA_* win")
      ->check(CLI::ExistingFile);
  runCmd_->add_option("--node-name", f.nodeName, "Node name (default: the host name)");
  runCmd_->add_option("--server", f.server, "Control plane URL, http(s)://HOST:PORT");
  runCmd_
      ->add_option("--token-file", f.tokenFile, "Bearer token file (default: $TESSERA_API_TOKEN)")
      ->check(CLI::ExistingFile);
  runCmd_->add_option("--tls-ca", f.tlsCa, "CA certificate (PEM) to trust for an https:// server")
      ->check(CLI::ExistingFile);
  runCmd_->add_option("--admin", f.admin, "Admin API address, HOST:PORT on loopback (port 0: any)");
  runCmd_->add_option("--cache-dir", f.cacheDir, "Model cache directory");
  runCmd_->add_option("--gpu-discovery", f.gpuDiscovery, "auto, nvml or virtual")
      ->check(CLI::IsMember({"auto", "nvml", "virtual"}));
  runCmd_->add_option("--nvml-library", f.nvmlLibrary,
                      "NVML library to load (default libnvidia-ml.so.1)");
  runCmd_->add_option("--heartbeat-seconds", f.heartbeatSeconds, "Heartbeat period")
      ->check(CLI::Range(0.01, 3600.0));
  runCmd_->add_option("--log-format", f.logFormat, "Logs on stderr: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  runCmd_->footer(
      "Also from the environment: $TESSERA_AGENT_CONFIG, $TESSERA_NODE_NAME, $TESSERA_SERVER, "
      "$TESSERA_TOKEN_FILE, $TESSERA_API_TOKEN, $TESSERA_TLS_CA, $TESSERA_AGENT_ADMIN, "
      "$TESSERA_CACHE_DIR, $TESSERA_GPU_DISCOVERY, $TESSERA_NVML_LIBRARY, "
      "$TESSERA_HEARTBEAT_SECONDS, $TESSERA_LOG_FORMAT. SIGTERM drains, a second one stops.\n\n"
      "Exit codes: 0 success (drained), 1 internal error, 2 bad input. See docs/cli.md.");

  drainCmd_ = command_->add_subcommand(
      "drain", "Drain the running agent and wait until it is done (a Kubernetes preStop hook)");
  drainCmd_->add_option("--admin", adminTarget_,
                        "The agent's admin address (default 127.0.0.1:9190)");
  drainCmd_
      ->add_option("--config", adminConfig_,
                   "Take the admin address and timings from this agent file")
      ->check(CLI::ExistingFile);
  drainCmd_
      ->add_option("--timeout", drainTimeoutSeconds_,
                   "Seconds to wait (default: stop-new-work + in-flight limit + 30)")
      ->check(CLI::Range(0.0, 86400.0));

  statusCmd_ = command_->add_subcommand("status", "Print the running agent's status (JSON)");
  statusCmd_->add_option("--admin", adminTarget_,
                         "The agent's admin address (default 127.0.0.1:9190)");
  statusCmd_->add_option("--config", adminConfig_, "Take the admin address from this agent file")
      ->check(CLI::ExistingFile);
}

int AgentCommand::run(std::ostream& out, std::ostream& err) {
  if (runCmd_->parsed()) return runAgent(out, err);
  if (drainCmd_->parsed()) return runDrain(out, err);
  return runStatus(out, err);
}

int AgentCommand::runAgent(std::ostream& out, std::ostream& err) {
  auto resolved = resolveConfig(flags_);
  if (!resolved) return reportError(err, kAgentCommand, resolved.error());
  agent::AgentConfig config = std::move(*resolved);
  api::Logger logger(config.logFormat == "json" ? api::LogFormat::kJson : api::LogFormat::kText,
                     err);

  std::optional<std::string> token;
  if (config.tokenFile) {
    auto t = agent::readTokenFile(*config.tokenFile);
    if (!t) return reportError(err, kAgentCommand, t.error());
    token = *t;
  } else if (auto v = env("TESSERA_API_TOKEN")) {
    token = *v;
  }
  auto client = agent::ControlClient::create({config.server, token, config.tlsCa, 5});
  if (!client) return reportError(err, kAgentCommand, client.error());

  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  std::vector<std::string> warnings;
  auto gpus = agent::openGpuSource(config, catalog, config.nodeName, warnings);
  for (const std::string& w : warnings) logger.warn(w);
  if (!gpus) return reportError(err, kAgentCommand, gpus.error());

  SteadyClock clock;
  agent::ModelCacheOptions cacheOptions;
  cacheOptions.dir = config.cache.dir;
  cacheOptions.diskCapacityBytes = config.cache.diskCapacityBytes;
  cacheOptions.hostCapacityBytes = config.cache.hostMemoryCapacityBytes;
  cacheOptions.warnAtFraction = config.cache.warnAtFraction;
  cacheOptions.minFreeDiskBytes = config.cache.minFreeDiskBytes;
  cacheOptions.onWarning = [&logger](const std::string& w) { logger.warn(w); };
  auto cache = agent::ModelCache::open(cacheOptions, clock);
  if (!cache) return reportError(err, kAgentCommand, cache.error());

  std::vector<std::unique_ptr<agent::ModelSource>> sources;
  for (const agent::ModelSourceConfig& s : config.modelSources) {
    if (!s.path.empty()) {
      sources.push_back(agent::makeDirectorySource(s.name, s.path));
    } else {
      agent::HttpSourceOptions options;
      options.caFile = config.tlsCa;
      auto http = agent::makeHttpSource(s.name, s.url, options);
      if (!http) return reportError(err, kAgentCommand, http.error());
      sources.push_back(std::move(*http));
    }
  }

  // The kubelet device plugin (on when kubelet's device-plugins directory exists, unless the
  // file says otherwise) and the engines the agent drives (docs/agent.md).
  std::unique_ptr<agent::DevicePluginHost> devicePlugin;
  // GPU mode (agent_config.h): device-plugin, dra, or both on different GPUs.
  std::vector<std::string> draGpus;
  if (config.draDriver.enabled) {
    auto first = (*gpus)->sample();
    if (!first) return reportError(err, kAgentCommand, first.error());
    draGpus = agent::draDriverGpus(config.draDriver, *first);
  }
  if (agent::devicePluginWanted(config)) {
    agent::DevicePluginHostOptions o;
    o.config = config.devicePlugin;
    o.nodeName = config.nodeName;
    o.server = config.server;
    o.token = token;
    o.caFile = config.tlsCa;
    if ((*gpus)->kind() == "nvml") o.controlDeviceNodes = agent::nvidiaControlNodes();
    o.log = [&logger](const std::string& line) { logger.info(line); };
    o.bestEffort = !config.devicePlugin.enabled.has_value();
    o.excludedGpus = draGpus;
    devicePlugin = std::make_unique<agent::DevicePluginHost>(std::move(o));
  } else {
    logger.info(config.devicePlugin.enabled ? "device plugin off (devicePlugin.enabled: false)"
                : config.draDriver.enabled
                    ? "device plugin off: the DRA driver serves every GPU (draDriver.gpus unset)"
                    : "device plugin off: " + config.devicePlugin.dir +
                          " does not exist (no kubelet on this node?)");
  }
  // Tessera's DRA driver (docs/dra.md), when draDriver.enabled.
  std::unique_ptr<agent::DraDriverHost> draDriver;
  if (config.draDriver.enabled) {
    agent::DraDriverHostOptions o;
    o.config = config.draDriver;
    o.nodeName = config.nodeName;
    o.mpsPipeDirectory = config.devicePlugin.mpsPipeDirectory;
    if ((*gpus)->kind() == "nvml") o.controlDeviceNodes = agent::nvidiaControlNodes();
    o.catalog = &catalog;
    o.sampleIntervalMs = config.heartbeatMs;
    o.log = [&logger](const std::string& line) { logger.info(line); };
    draDriver = std::make_unique<agent::DraDriverHost>(std::move(o));
  }
  auto engineHost = agent::EnginesHost::create(config.engines, config.heartbeatMs);
  if (!engineHost) return reportError(err, kAgentCommand, engineHost.error());
  (*engineHost)->setLog([&logger](const std::string& line) { logger.info(line); });
  // The device memory pool, pre-allocated by node.start() (docs/agent.md, "Device pool").
  agent::DevicePoolHostOptions poolOptions;
  poolOptions.config = config.devicePool;
  poolOptions.cache = cache->get();
  for (const auto& s : sources) poolOptions.sources.push_back(s.get());
  poolOptions.drainTimeoutMs = static_cast<int>(std::min<Millis>(config.inFlightMaxMs, 3'600'000));
  poolOptions.gpuSource = (*gpus)->kind();
  poolOptions.log = [&logger](const std::string& line) { logger.info(line); };
  agent::DevicePoolHost devicePool(std::move(poolOptions));

  // SIGINT and SIGTERM are taken synchronously below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  agent::AgentParts parts;
  parts.gpus = gpus->get();
  parts.client = client->get();
  parts.cache = cache->get();
  for (const auto& s : sources) parts.sources.push_back(s.get());
  parts.log = &logger;
  // Started first (a pool that cannot be created stops the start-up before anything else
  // runs); its loads and leases are work in flight, and the drain releases it last.
  parts.components.push_back(&devicePool);
  parts.trackers.push_back(devicePool.work());
  parts.device = devicePool.deviceMemory();
  // Drained in this order: the engines sleep or unload, then the device plugin stops.
  if (!config.engines.empty()) parts.components.push_back(engineHost->get());
  if (devicePlugin) parts.components.push_back(devicePlugin.get());
  if (draDriver) parts.components.push_back(draDriver.get());
  agent::Agent node(config, parts);
  devicePool.setAcceptingWork([&node] { return node.phase() == agent::AgentPhase::kRunning; });
  (*engineHost)->setInFlight([&node] { return node.inFlight(); });
  (*engineHost)->setAccepting([&node] { return node.phase() == agent::AgentPhase::kRunning; });
  auto port = node.start();
  if (!port) return reportError(err, kAgentCommand, port.error());
  const std::size_t gpuCount = node.status()["gpus"].size();
  out << "tessera agent: node " << config.nodeName << ", " << gpuCount << " GPU"
      << (gpuCount == 1 ? "" : "s") << " (" << (*gpus)->kind() << "), control plane "
      << config.server << ", admin on http://" << config.admin.substr(0, config.admin.rfind(':'))
      << ":" << *port << std::endl;

  const timespec tick{0, 200'000'000};
  int signalsSeen = 0;
  while (!node.finished()) {
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig != SIGINT && sig != SIGTERM) continue;
    if (++signalsSeen == 1) {
      out << "tessera agent: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", draining"
          << std::endl;
      node.drain(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    } else {
      out << "tessera agent: second signal, stopping without waiting" << std::endl;
      node.stop();
    }
  }
  const int code = node.wait();
  out << "tessera agent: stopped" << std::endl;
  return code;
}

int AgentCommand::runDrain(std::ostream& out, std::ostream& err) {
  std::string address = "127.0.0.1:9190";
  Millis budgetMs = 10'000 + 60'000 + 30'000;
  std::optional<agent::AgentConfig> file;
  if (adminConfig_) {
    auto c = agent::loadAgentFile(*adminConfig_);
    if (!c) return reportError(err, kAgentCommand, c.error());
    address = c->admin;
    budgetMs = c->stopNewWorkMs + c->inFlightMaxMs + 30'000;
    file = std::move(*c);
  }
  if (auto v = env("TESSERA_AGENT_ADMIN")) address = *v;
  if (adminTarget_) address = *adminTarget_;
  if (drainTimeoutSeconds_ > 0) budgetMs = agent::secondsToMillis(drainTimeoutSeconds_);
  auto resolved = resolveAdminAddress(address, file);
  if (!resolved) return reportError(err, kAgentCommand, resolved.error());
  const std::string url = adminUrl(*resolved);
  httplib::Client client(url);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  auto started = client.Post("/drain");
  if (!started) {
    return reportError(err, kAgentCommand,
                       Error::precondition("drain: no agent answers at " + url + " (" +
                                           httplib::to_string(started.error()) + ")"));
  }
  if (started->status != 202) {
    return reportError(
        err, kAgentCommand,
        Error::internal("drain: " + url + " answered " + std::to_string(started->status)));
  }
  out << "tessera agent drain: draining the agent at " << url << std::endl;
  SteadyClock clock;
  const Millis deadline = clock.nowMs() + budgetMs;
  std::string state = "draining";
  std::size_t stepsShown = 0;
  while (clock.nowMs() < deadline) {
    auto r = client.Get("/status");
    if (!r) {
      // The agent exits shortly after it drained.
      if (state == "drained") break;
      return reportError(
          err, kAgentCommand,
          Error::internal("drain: the agent stopped answering before it reported drained"));
    }
    const json s = json::parse(r->body, nullptr, false);
    if (s.is_object()) {
      state = s.value("state", state);
      if (s.contains("drain") && s["drain"].contains("steps")) {
        const json& steps = s["drain"]["steps"];
        for (; stepsShown < steps.size(); ++stepsShown) {
          out << "  " << steps[stepsShown].get<std::string>() << std::endl;
        }
      }
    }
    if (state == "drained") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (state != "drained") {
    return reportError(
        err, kAgentCommand,
        Error::internal("drain: not drained after " + std::to_string(budgetMs / 1000) +
                        " s (state " + state + ")"));
  }
  out << "tessera agent drain: drained" << std::endl;
  return kExitOk;
}

int AgentCommand::runStatus(std::ostream& out, std::ostream& err) {
  std::string address = "127.0.0.1:9190";
  std::optional<agent::AgentConfig> file;
  if (adminConfig_) {
    auto c = agent::loadAgentFile(*adminConfig_);
    if (!c) return reportError(err, kAgentCommand, c.error());
    address = c->admin;
    file = std::move(*c);
  }
  if (auto v = env("TESSERA_AGENT_ADMIN")) address = *v;
  if (adminTarget_) address = *adminTarget_;
  auto resolved = resolveAdminAddress(address, file);
  if (!resolved) return reportError(err, kAgentCommand, resolved.error());
  const std::string url = adminUrl(*resolved);
  httplib::Client client(url);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  auto r = client.Get("/status");
  if (!r) {
    return reportError(err, kAgentCommand,
                       Error::precondition("status: no agent answers at " + url + " (" +
                                           httplib::to_string(r.error()) + ")"));
  }
  const json s = json::parse(r->body, nullptr, false);
  out << (s.is_discarded() ? r->body : s.dump(2)) << std::endl;
  return r->status == 200 ? kExitOk : kExitInternal;
}

}  // namespace tessera::cli
