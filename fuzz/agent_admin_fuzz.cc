// Fuzz target: every route of the node agent's admin API (`tessera agent run`: /healthz,
// /readyz, /status, /drain, /leases, /models/{m}/stage, and the device pool's /models,
// /models/{m}/load, /cancel and DELETE /models/{m}), through the real Agent with a real model
// cache, a directory source and the device pool on the host backend (4 MiB in 1-MiB blocks),
// registered with a real control plane on loopback. The input is the same JSON request list
// as http_fuzz's ({"method", "path", "query", "body", "contentType"}, or {"requests": [...]},
// up to 8); each input gets a fresh control plane, agent and cache directory. The source holds
// `small@v1` (1 MiB), `small@v2` (2 MiB) and `huge@v1` (8 MiB, more than the pool).
//
// Checks beyond "no crash, no sanitizer report":
//  - every request is answered, never with a 5xx (but /readyz's 503 while not ready);
//  - a 4xx is a JSON {"error": {"code": ...}};
//  - /status answers after every request, and the pool never holds more blocks than it has;
//  - once draining, the agent never takes work again (/readyz stays 503);
//  - when a drain was asked for, the agent finishes it (the driver's timeout catches a hang)
//    with every block of the pool free.

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include <httplib.h>

#include "agent/agent.h"
#include "agent/control_client.h"
#include "agent/device_pool_host.h"
#include "agent/gpu_source.h"
#include "agent/model_cache.h"
#include "agent/model_source.h"
#include "api/control_plane.h"
#include "api/http_server.h"
#include "api/log.h"
#include "fuzz_support.h"
#include "http_request.h"
#include "profile/safetensors_writer.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;
namespace agent = tessera::agent;

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::size_t kMaxRequests = 8;

void must(bool ok, const std::string& error, const char* what) {
  if (!ok) tessera::fuzz::checkFailed(what, error, __FILE__, __LINE__);
}

// The model files, written once per process; every input reads them.
const fs::path& modelsDir() {
  static const fs::path dir = [] {
    char tmpl[] = "/tmp/tessera-agent-fuzz-models-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    must(made != nullptr, "mkdtemp failed", "models dir");
    const fs::path d(made);
    for (const auto& [entry, bytes] :
         {std::pair{"small@v1", 1 * kMiB}, {"small@v2", 2 * kMiB}, {"huge@v1", 8 * kMiB}}) {
      fs::create_directories(d / entry);
      auto w = tessera::profile::writeSyntheticModel((d / entry / "model.safetensors").string(),
                                                     bytes, 4);
      must(w.has_value(), w ? "" : w.error().message, entry);
    }
    std::atexit([] { std::error_code ec; fs::remove_all(modelsDir(), ec); });
    return d;
  }();
  return dir;
}

struct Node {
  Node() {
    char tmpl[] = "/tmp/tessera-agent-fuzz-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    must(made != nullptr, "mkdtemp failed", "cache dir");
    dir = made;

    auto plane = tessera::api::ControlPlane::create(catalog, clock);
    must(plane.has_value(), plane ? "" : plane.error().message, "control plane");
    controlPlane = std::move(*plane);
    tessera::api::ServerConfig sc;
    sc.port = 0;
    sc.threads = 2;
    server = std::make_unique<tessera::api::HttpServer>(*controlPlane, sc);
    auto serverPort = server->start();
    must(serverPort.has_value(), serverPort ? "" : serverPort.error().message, "server");

    agent::AgentConfig config;
    config.nodeName = "node-fuzz";
    config.server = "http://127.0.0.1:" + std::to_string(*serverPort);
    config.heartbeatMs = 50;
    config.discovery = agent::GpuDiscovery::kVirtual;
    config.virtualGpus = {{"L4", 1, -1, -1, std::nullopt}};
    config.admin = "127.0.0.1:0";
    config.stopNewWorkMs = 0;
    config.inFlightMaxMs = 200;  // a lease the input never releases holds a drain this long
    config.devicePlugin.enabled = false;
    config.devicePool.backend = "host";
    config.devicePool.sizeBytes = 4 * kMiB;
    config.devicePool.blockBytes = 1 * kMiB;
    config.devicePool.readerThreads = 1;
    config.cache.dir = (dir / "cache").string();
    agent::AgentTimings timings;
    timings.backoffInitialMs = 20;
    timings.backoffMaxMs = 200;
    timings.drainPollMs = 5;
    timings.lingerMs = 0;

    agent::ModelCacheOptions co;
    co.dir = config.cache.dir;
    co.diskCapacityBytes = 64 * kMiB;
    auto opened = agent::ModelCache::open(co, steady);
    must(opened.has_value(), opened ? "" : opened.error().message, "cache");
    cache = std::move(*opened);
    source = agent::makeDirectorySource("local", modelsDir().string());
    agent::DevicePoolHostOptions po;
    po.config = config.devicePool;
    po.cache = cache.get();
    po.sources = {source.get()};
    po.drainTimeoutMs = 5'000;
    po.gpuSource = "virtual";
    pool = std::make_unique<agent::DevicePoolHost>(std::move(po));
    std::vector<std::string> warnings;
    auto gpuSource = agent::openGpuSource(config, catalog, config.nodeName, warnings);
    must(gpuSource.has_value(), gpuSource ? "" : gpuSource.error().message, "gpus");
    gpus = std::move(*gpuSource);
    auto c = agent::ControlClient::create({config.server, std::nullopt, std::nullopt, 5});
    must(c.has_value(), c ? "" : c.error().message, "client");
    client = std::move(*c);

    agent::AgentParts parts;
    parts.gpus = gpus.get();
    parts.client = client.get();
    parts.cache = cache.get();
    parts.sources = {source.get()};
    parts.log = &log;
    parts.components = {pool.get()};
    parts.trackers = {pool->work()};
    parts.device = pool->deviceMemory();
    instance = std::make_unique<agent::Agent>(config, parts, timings);
    pool->setAcceptingWork([this] { return instance->phase() == agent::AgentPhase::kRunning; });
    auto port = instance->start();
    must(port.has_value(), port ? "" : port.error().message, "agent start");
    admin = std::make_unique<httplib::Client>("127.0.0.1", *port);
    admin->set_connection_timeout(5);
    admin->set_read_timeout(10);
    admin->set_write_timeout(10);
  }
  ~Node() {
    instance.reset();
    pool.reset();
    server->stop();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  tessera::model::GpuCatalog catalog = tessera::model::GpuCatalog::builtin();
  tessera::ManualClock clock{0};
  tessera::SteadyClock steady;
  std::ostringstream logText;
  tessera::api::Logger log{tessera::api::LogFormat::kText, logText};
  fs::path dir;
  std::unique_ptr<tessera::api::ControlPlane> controlPlane;
  std::unique_ptr<tessera::api::HttpServer> server;
  std::unique_ptr<agent::ModelCache> cache;
  std::unique_ptr<agent::ModelSource> source;
  std::unique_ptr<agent::DevicePoolHost> pool;
  std::unique_ptr<agent::GpuSource> gpus;
  std::unique_ptr<agent::ControlClient> client;
  std::unique_ptr<agent::Agent> instance;
  std::unique_ptr<httplib::Client> admin;
  bool drainAsked = false;
};

void checkStatus(Node& n, const std::string& what) {
  auto r = n.admin->Get("/status");
  TESSERA_FUZZ_CHECK(r && r->status == 200, what + ": GET /status did not answer 200");
  const json s = json::parse(r->body, nullptr, false);
  TESSERA_FUZZ_CHECK(s.is_object(), what + ": /status is not a JSON object");
  const json pool = s.value("devicePool", json::object());
  if (pool.contains("blocks")) {
    const auto blocks = pool["blocks"].get<std::int64_t>();
    const auto free = pool["freeBlocks"].get<std::int64_t>();
    TESSERA_FUZZ_CHECK(free >= 0 && free <= blocks,
                       what + ": the pool reports " + std::to_string(free) + " free of " +
                           std::to_string(blocks) + " blocks");
  }
  if (n.drainAsked) {
    auto ready = n.admin->Get("/readyz");
    TESSERA_FUZZ_CHECK(ready && ready->status == 503,
                       what + ": the agent took work again after a drain");
  }
}

void send(Node& n, const json& request, std::size_t index) {
  const auto req = tessera::fuzz::readFuzzRequest(request);
  if (!req) return;  // the admin API takes no token: `auth` does not matter
  const std::string& path = req->path;
  const std::string& method = req->method;
  const std::string what = req->describe(index);
  const httplib::Result r = tessera::fuzz::sendFuzzRequest(*n.admin, *req, {}, index);
  // /readyz answers 503 until the agent has registered, and while it drains.
  const bool readiness = path == "/readyz" && r->status == 503;
  TESSERA_FUZZ_CHECK(r->status < 500 || readiness,
                     what + ": answered " + std::to_string(r->status) + " " + r->body);
  if (r->status >= 400 && path != "/readyz") {
    TESSERA_FUZZ_CHECK(tessera::fuzz::isErrorObject(r->body),
                       what + ": a " + std::to_string(r->status) +
                           " that is not a JSON error object: " + r->body);
  }
  if (method == "POST" && path == "/drain" && r->status == 202) n.drainAsked = true;
  checkStatus(n, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = tessera::fuzz::decodeBody(data, size);
  if (!input || !input->is_object()) return 0;
  Node n;
  if (const auto list = input->find("requests"); list != input->end() && list->is_array()) {
    for (std::size_t i = 0; i < list->size() && i < kMaxRequests; ++i) send(n, (*list)[i], i);
  } else {
    send(n, *input, 0);
  }
  if (n.drainAsked) {
    TESSERA_FUZZ_CHECK(n.instance->wait() == 0, "the drain did not end cleanly");
    const json pool = n.pool->status();
    if (pool.contains("blocks")) {
      TESSERA_FUZZ_CHECK(pool["freeBlocks"] == pool["blocks"],
                         "drained, but the pool still holds blocks: " + pool.dump());
    }
  }
  return 0;
}
