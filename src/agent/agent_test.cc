// The agent against the REAL control plane (ControlPlane + HttpServer) on a loopback port:
// registration with GPUs and cached models, heartbeats, re-registration after the server
// restarts without its state, backoff while it is down, and the drain sequence.

#include "agent/agent.h"

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "agent/testing/agent_testing.h"
#include "common/testing/raw_http.h"

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ControlPlaneServer;
using testing::eventually;
using testing::TempDir;
using testing::writeFile;

constexpr const char* kToken = "agent-test-token-0123";

// Device memory as the device pool would expose it; counts releases.
class CountingDeviceMemory final : public DeviceMemory {
 public:
  std::string name() const override { return "test pool"; }
  Result<void> releaseAll() override {
    ++releases;
    return {};
  }
  std::atomic<int> releases{0};
};

// A model source whose copies wait until the test lets them go: a stage of many GiB, on
// demand.
class GatedSource final : public ModelSource {
 public:
  explicit GatedSource(std::unique_ptr<ModelSource> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  Result<std::vector<SourceFile>> list(const std::string& model) override {
    return inner_->list(model);
  }
  Result<std::int64_t> fetch(const std::string& model, const SourceFile& file, int fd) override {
    {
      std::unique_lock lock(mu_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return open_; });
    }
    return inner_->fetch(model, file, fd);
  }
  bool waitUntilCopying() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [this] { return entered_; });
  }
  void release() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::unique_ptr<ModelSource> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false, open_ = false;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("FAKE_NVML_MODE");
    ::unsetenv("FAKE_NVML_XID");
    server_.start();
    writeFile(dir_.path() / "models" / "llama-8b" / "model.bin", std::string(4096, 'w'));
    writeFile(dir_.path() / "models" / "llama-8b" / "config.json", "{}");
    writeFile(dir_.path() / "models" / "qwen-7b" / "model.bin", std::string(2048, 'q'));
    config_.nodeName = "node-a";
    config_.server = server_.url();
    config_.heartbeatMs = 50;
    config_.cpuMilli = 32000;
    config_.hostMemoryMib = 256 * 1024;
    config_.labels = {{"pool", "test"}};
    config_.nvmlLibrary = "libnvidia-ml-not-installed.so.1";
    config_.virtualGpus = {{"L4", 2, -1, 0, std::nullopt}};
    config_.admin = "127.0.0.1:0";
    config_.preload = {"llama-8b"};
    config_.stopNewWorkMs = 100;
    config_.inFlightMaxMs = 20'000;
    timings_.backoffInitialMs = 20;
    timings_.backoffMaxMs = 200;
    timings_.drainPollMs = 10;
    timings_.lingerMs = 50;
  }

  void makeAgent() {
    std::ostringstream ignored;
    std::vector<std::string> warnings;
    auto gpus = openGpuSource(config_, catalog_, config_.nodeName, warnings);
    ASSERT_TRUE(gpus) << gpus.error().message;
    gpus_ = std::move(*gpus);
    auto client = ControlClient::create({config_.server, kToken, std::nullopt, 5});
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
    ModelCacheOptions o;
    o.dir = (dir_.path() / "cache").string();
    config_.cache.dir = o.dir;  // as tessera agent run opens it
    o.diskCapacityBytes = 1 << 20;
    auto cache = ModelCache::open(o, clock_);
    ASSERT_TRUE(cache) << cache.error().message;
    cache_ = std::move(*cache);
    source_ = makeDirectorySource("local", (dir_.path() / "models").string());
    if (gated_) {
      auto gated = std::make_unique<GatedSource>(std::move(source_));
      gate_ = gated.get();
      source_ = std::move(gated);
    }
    AgentParts parts;
    parts.gpus = gpus_.get();
    parts.client = client_.get();
    parts.cache = cache_.get();
    parts.sources = {source_.get()};
    parts.device = &device_;
    parts.log = &log_;
    agent_ = std::make_unique<Agent>(config_, parts, timings_);
    auto port = agent_->start();
    ASSERT_TRUE(port) << port.error().message;
    adminPort_ = *port;
    admin_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    admin_->set_connection_timeout(5);
    admin_->set_read_timeout(10);
  }

  bool nodeHasCached(const std::string& model) {
    const json n = server_.node("node-a");
    if (n.is_null()) return false;
    const auto& c = n["cachedModels"];
    return std::find(c.begin(), c.end(), model) != c.end();
  }

  ControlPlaneServer server_{kToken};
  int adminPort_ = 0;
  TempDir dir_;
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  SteadyClock clock_;
  std::ostringstream logText_;
  api::Logger log_{api::LogFormat::kText, logText_};
  AgentConfig config_;
  AgentTimings timings_;
  CountingDeviceMemory device_;
  std::unique_ptr<GpuSource> gpus_;
  std::unique_ptr<ControlClient> client_;
  std::unique_ptr<ModelCache> cache_;
  std::unique_ptr<ModelSource> source_;
  bool gated_ = false;          // set before makeAgent: copies wait for gate_->release()
  GatedSource* gate_ = nullptr;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<httplib::Client> admin_;
};

// Issue 14, bug 9: a stage copies on the agent's own worker, never on an admin thread. With
// more stage requests than admin threads and the copy stuck, /status and /drain (the preStop
// hook) are still answered at once; the drain waits for nothing the stage holds, and a stage
// asked for while draining is refused.
TEST_F(AgentTest, StagingNeverStarvesTheAdminApi) {
  config_.preload.clear();
  gated_ = true;
  makeAgent();
  for (int i = 0; i < 6; ++i) {
    auto asked = admin_->Post("/models/qwen-7b/stage");
    ASSERT_TRUE(asked) << "request " << i;
    EXPECT_EQ(asked->status, 202) << asked->body;
  }
  ASSERT_TRUE(gate_->waitUntilCopying());
  auto staging = admin_->Get("/models/qwen-7b/stage");
  ASSERT_TRUE(staging);
  EXPECT_EQ(json::parse(staging->body)["state"], "staging") << staging->body;
  auto status = admin_->Get("/status");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, 200);
  auto drain = admin_->Post("/drain");
  ASSERT_TRUE(drain);
  EXPECT_EQ(drain->status, 202) << drain->body;
  auto refused = admin_->Post("/models/llama-8b/stage");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 409) << refused->body;
  gate_->release();
  EXPECT_TRUE(eventually([&] {
    auto s = admin_->Get("/models/qwen-7b/stage");
    return s && json::parse(s->body)["state"] == "staged";
  }));
  EXPECT_EQ(agent_->wait(), 0);
}

TEST_F(AgentTest, RegistersGpusAndCachedModelsAndComesBackAfterServerRestarts) {
  makeAgent();
  ASSERT_TRUE(eventually([&] { return nodeHasCached("llama-8b"); })) << logText_.str();
  const json node = server_.node("node-a");
  ASSERT_EQ(node["gpus"].size(), 2u) << node.dump();
  EXPECT_EQ(node["gpus"][0]["type"], "L4");
  EXPECT_EQ(node["cpuMilli"], 32000);
  EXPECT_EQ(node["labels"]["pool"], "test");
  EXPECT_EQ(node["labels"]["tessera.io/gpu-source"], "virtual");

  // Staged over the admin API: reported at the next heartbeat.
  auto staged = admin_->Post("/models/qwen-7b/stage");
  ASSERT_TRUE(staged);
  EXPECT_EQ(staged->status, 202) << staged->body;
  EXPECT_TRUE(eventually([&] { return nodeHasCached("qwen-7b"); }));
  auto done = admin_->Get("/models/qwen-7b/stage");
  ASSERT_TRUE(done);
  EXPECT_EQ(json::parse(done->body)["state"], "staged") << done->body;
  auto unknown = admin_->Post("/models/nope/stage");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);

  // The server goes away: heartbeats fail and back off.
  const int port = server_.port();
  const std::int64_t failuresBefore = agent_->status()["heartbeatFailures"];
  server_.stop();
  ASSERT_TRUE(
      eventually([&] { return agent_->status()["heartbeatFailures"] > failuresBefore + 1; }));
  EXPECT_TRUE(agent_->status().contains("lastError"));
  // It comes back on the same port with no state: the agent registers again, cache included.
  server_.start(port);
  ASSERT_TRUE(eventually([&] { return nodeHasCached("qwen-7b") && nodeHasCached("llama-8b"); }))
      << logText_.str();
  // The server has the registration before the agent has counted it: wait for the count.
  EXPECT_TRUE(eventually([&] { return agent_->status()["registrations"] >= 2; }))
      << agent_->status().dump();
  EXPECT_EQ(server_.node("node-a")["gpus"].size(), 2u);
  EXPECT_NE(logText_.str().find("registering again"), std::string::npos);

  // The admin status reports the GPUs as virtual and the cache contents.
  auto status = admin_->Get("/status");
  ASSERT_TRUE(status);
  const json s = json::parse(status->body);
  EXPECT_EQ(s["gpuSource"], "virtual");
  EXPECT_EQ(s["gpus"][0]["virtual"], true);
  EXPECT_EQ(s["cache"]["entries"].size(), 2u);
  EXPECT_EQ(s["state"], "running");
  agent_->stop();
  EXPECT_EQ(agent_->wait(), 0);
}

TEST_F(AgentTest, HeartbeatsCarryNvmlTelemetry) {
  config_.nvmlLibrary = TESSERA_FAKE_NVML;
  config_.virtualGpus.clear();
  config_.preload.clear();
  makeAgent();
  ASSERT_TRUE(eventually([&] {
    const json n = server_.node("node-a");
    // Before the first heartbeat the server shows usedMib as null (nothing measured yet).
    return !n.is_null() && n["gpus"].size() == 3 && n["gpus"][1]["usedMib"].is_number() &&
           n["gpus"][1]["usedMib"] == 3072;
  })) << server_.node("node-a").dump()
      << logText_.str();
  const json n = server_.node("node-a");
  EXPECT_EQ(n["labels"]["tessera.io/gpu-source"], "nvml");
  EXPECT_EQ(n["gpus"][0]["type"], "H100-80GB");
  EXPECT_EQ(n["gpus"][2]["type"], "A100-80GB");
  EXPECT_EQ(n["gpus"][0]["usedMib"], 1024);
  agent_->stop();
  agent_->wait();
}

TEST_F(AgentTest, DrainStopsNewWorkWaitsForLeasesReleasesDeviceMemoryAndFinishes) {
  makeAgent();
  ASSERT_TRUE(eventually([&] { return nodeHasCached("llama-8b"); }));
  auto lease = admin_->Post("/leases", R"({"model": "llama-8b"})", "application/json");
  ASSERT_TRUE(lease);
  ASSERT_EQ(lease->status, 201) << lease->body;
  const std::string id = json::parse(lease->body)["id"];
  EXPECT_EQ(cache_->status().entries[0].pins, 1);
  EXPECT_EQ(admin_->Get("/readyz")->status, 200);

  auto drain = admin_->Post("/drain");
  ASSERT_TRUE(drain);
  EXPECT_EQ(drain->status, 202);
  EXPECT_EQ(admin_->Get("/readyz")->status, 503);
  auto refused = admin_->Post("/leases", R"({})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 409) << refused->body;
  // Cordoned at the control plane.
  ASSERT_TRUE(eventually([&] { return server_.node("node-a").value("cordoned", false); }));
  // The lease keeps it draining past the stop-new-work window; releasing it finishes.
  ASSERT_TRUE(eventually([&] {
    const json s = agent_->status();
    return s["drain"]["steps"].size() >= 3;  // ..., "stop-new-work window over"
  }));
  EXPECT_FALSE(agent_->finished());
  EXPECT_EQ(agent_->phase(), AgentPhase::kDraining);
  EXPECT_EQ(device_.releases, 0);
  auto released = admin_->Delete("/leases/" + id);
  ASSERT_TRUE(released);
  EXPECT_EQ(released->status, 200);
  EXPECT_EQ(agent_->wait(), 0);
  EXPECT_EQ(device_.releases, 1);
  EXPECT_EQ(agent_->phase(), AgentPhase::kDrained);
  const json steps = agent_->status()["drain"]["steps"];
  EXPECT_EQ(steps.back(), "drained");
  EXPECT_NE(steps.dump().find("no work in flight"), std::string::npos) << steps.dump();
  EXPECT_NE(steps.dump().find("device memory released (test pool)"), std::string::npos);
  EXPECT_EQ(cache_->status().entries[0].pins, 0);
}

// A SIGTERM during start-up: the agent is stopped right after start() returns. httplib's
// stop() does nothing until the admin accept loop runs, so start() waits for it; before, the
// destructor could join that loop forever (found by fuzz/agent_admin_fuzz.cc).
TEST_F(AgentTest, StopRightAfterStartEnds) {
  config_.preload.clear();
  for (int i = 0; i < 30; ++i) {
    makeAgent();
    agent_->stop();
    EXPECT_EQ(agent_->wait(), 0);
    agent_.reset();
  }
}

// The preStop hook may be `curl -X POST http://127.0.0.1:PORT/drain`: no Content-Length, no
// body. It is served at once (not read until the connection's 5-s timeout and refused), and a
// route the agent does not have is a JSON 404 like the control plane's.
TEST_F(AgentTest, AdminPostWithoutContentLengthIsServedAndUnknownRoutesAreJson) {
  config_.preload.clear();
  makeAgent();
  EXPECT_EQ(tessera::testing::rawRequest(
                adminPort_, "POST /drain HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\r\n", 3),
            202);
  EXPECT_NE(agent_->phase(), AgentPhase::kRunning);
  auto missing = admin_->Get("/no-such-route");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  const json body = json::parse(missing->body, nullptr, false);
  EXPECT_EQ(body["error"]["code"], "not_found") << missing->body;
  EXPECT_EQ(agent_->wait(), 0);
}

// A restarted agent finds the server's record of its node: it lifts the cordon its own
// drain set, but leaves an operator's cordon and says so, as it says when the GPUs differ.
TEST_F(AgentTest, TheNextAgentLiftsItsDrainsCordonButNotAnOperators) {
  config_.preload.clear();
  makeAgent();
  ASSERT_TRUE(eventually([&] { return !server_.node("node-a").is_null(); }));
  ASSERT_EQ(admin_->Post("/drain")->status, 202);
  EXPECT_EQ(agent_->wait(), 0);
  ASSERT_TRUE(server_.node("node-a").value("cordoned", false));

  agent_.reset();
  makeAgent();  // the same node and cache directory: a new agent process would see this
  ASSERT_TRUE(eventually([&] { return !server_.node("node-a").value("cordoned", true); }))
      << logText_.str();
  EXPECT_NE(logText_.str().find("lifted the cordon"), std::string::npos);
  EXPECT_FALSE(agent_->status().contains("registrationWarnings"));
  agent_->stop();
  agent_->wait();

  // An operator cordons the node; the agent comes back with another GPU inventory.
  httplib::Client http("127.0.0.1", server_.port());
  const httplib::Headers auth{{"Authorization", std::string("Bearer ") + kToken}};
  ASSERT_EQ(http.Post("/api/v1/nodes/node-a/cordon", auth, "{}", "application/json")->status, 200);
  agent_.reset();
  config_.virtualGpus = {{"L4", 3, -1, 0, std::nullopt}};
  makeAgent();
  ASSERT_TRUE(eventually([&] { return agent_->status().contains("registrationWarnings"); }))
      << logText_.str();
  const std::string warnings = agent_->status()["registrationWarnings"].dump();
  EXPECT_NE(warnings.find("cordoned (not by this agent's drain)"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("2 GPU(s) but this agent found 3"), std::string::npos) << warnings;
  EXPECT_TRUE(server_.node("node-a").value("cordoned", false));
  agent_->stop();
  agent_->wait();
}

// Another part of the node (the device pool's registry) holding work that never ends: the
// drain gives up on it at the in-flight limit and still finishes.
class StuckWork final : public WorkTracker {
 public:
  std::string name() const override { return "stuck"; }
  std::size_t inFlight() const override { return 2; }
};

TEST_F(AgentTest, DrainGoesOnAfterTheInFlightLimit) {
  config_.inFlightMaxMs = 100;
  config_.preload.clear();
  StuckWork stuck;
  // makeAgent() with a tracker: build the parts by hand.
  std::vector<std::string> warnings;
  auto gpus = openGpuSource(config_, catalog_, config_.nodeName, warnings);
  ASSERT_TRUE(gpus);
  auto client = ControlClient::create({config_.server, kToken, std::nullopt, 5});
  ASSERT_TRUE(client);
  AgentParts parts;
  parts.gpus = gpus->get();
  parts.client = client->get();
  parts.trackers = {&stuck};
  parts.log = &log_;
  Agent node(config_, parts, timings_);
  ASSERT_TRUE(node.start());
  EXPECT_EQ(node.inFlight(), 2u);
  node.drain("test");
  EXPECT_EQ(node.wait(), 0);
  const std::string steps = node.status()["drain"]["steps"].dump();
  EXPECT_NE(steps.find("in-flight limit reached with 2 item(s) still running"), std::string::npos)
      << steps;
  EXPECT_NE(steps.find("no device memory pool attached"), std::string::npos);
}

TEST_F(AgentTest, AdminAddressMustBeLoopback) {
  config_.admin = "0.0.0.0:9190";
  std::vector<std::string> warnings;
  auto gpus = openGpuSource(config_, catalog_, config_.nodeName, warnings);
  ASSERT_TRUE(gpus);
  auto client = ControlClient::create({config_.server, kToken, std::nullopt, 5});
  ASSERT_TRUE(client);
  AgentParts parts;
  parts.gpus = gpus->get();
  parts.client = client->get();
  parts.log = &log_;
  Agent node(config_, parts, timings_);
  auto started = node.start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("not a loopback address"), std::string::npos);
}

// A self-signed certificate for 127.0.0.1 made with the openssl command line.
bool makeCertificate(const fs::path& dir, const std::string& name) {
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=" + name +
                          " -addext subjectAltName=IP:127.0.0.1 -keyout " +
                          (dir / (name + ".key")).string() + " -out " +
                          (dir / (name + ".crt")).string() + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// TLS with the configured CA and the bearer token: registers. A CA that did not sign the
// server's certificate, or a wrong token, is refused and said in the status, and retried.
TEST(AgentTls, RegistersOverHttpsWithTheTokenAndRefusesAStrangersCertificate) {
  TempDir dir;
  if (!makeCertificate(dir.path(), "server") || !makeCertificate(dir.path(), "stranger")) {
    GTEST_SKIP() << "the openssl command is not installed (scripts/install-deps.sh installs it)";
  }
  ControlPlaneServer server(kToken, (dir.path() / "server.crt").string(),
                            (dir.path() / "server.key").string());
  server.start();
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  std::ostringstream logText;
  api::Logger log(api::LogFormat::kText, logText);
  struct Case {
    std::string node, ca, token, error;
  };
  for (const Case& c : {Case{"tls-good", "server", kToken, ""},
                        Case{"tls-stranger", "stranger", kToken, "does not chain to the CA in"},
                        Case{"tls-badtoken", "server", "wrong-token-0123456789", "HTTP 401"}}) {
    AgentConfig config;
    config.nodeName = c.node;
    config.server = server.url();
    config.tlsCa = (dir.path() / (c.ca + ".crt")).string();
    config.heartbeatMs = 50;
    config.discovery = GpuDiscovery::kVirtual;
    config.virtualGpus = {{"T4", 1, -1, -1, std::nullopt}};
    config.admin = "127.0.0.1:0";
    std::vector<std::string> warnings;
    auto gpus = openGpuSource(config, catalog, config.nodeName, warnings);
    ASSERT_TRUE(gpus);
    auto client = ControlClient::create({config.server, c.token, config.tlsCa, 5});
    ASSERT_TRUE(client) << client.error().message;
    AgentParts parts;
    parts.gpus = gpus->get();
    parts.client = client->get();
    parts.log = &log;
    AgentTimings timings;
    timings.backoffInitialMs = 20;
    timings.backoffMaxMs = 100;
    Agent agent(config, parts, timings);
    ASSERT_TRUE(agent.start());
    if (c.error.empty()) {
      EXPECT_TRUE(eventually([&] { return !server.node(c.node).is_null(); })) << logText.str();
      EXPECT_TRUE(eventually([&] { return agent.status()["heartbeats"] > 0; }));
    } else {
      ASSERT_TRUE(eventually([&] { return agent.status()["heartbeatFailures"] > 1; }));
      const std::string error = agent.status().value("lastError", "");
      EXPECT_NE(error.find(c.error), std::string::npos) << c.node << ": " << error;
      EXPECT_TRUE(server.node(c.node).is_null()) << c.node;
      EXPECT_FALSE(agent.status()["registered"].get<bool>());
    }
    agent.stop();
    agent.wait();
  }
}

TEST(Backoff, GrowsWithJitterUpToTheCapAndResets) {
  Backoff b(100, 1000, 42);
  const Millis bases[] = {100, 200, 400, 800, 1000, 1000};
  for (Millis base : bases) {
    const Millis d = b.next();
    EXPECT_GE(d, base / 2);
    EXPECT_LE(d, base);
  }
  b.reset();
  EXPECT_LE(b.next(), 100);
}

}  // namespace
}  // namespace tessera::agent
