// The agent hosting the device memory pool: the real pool on the host backend, a real cache
// directory and a directory source holding safetensors files written by
// profile::writeSyntheticModel. Loads go through the admin API; the bytes in the pool are
// checked against the tensors' patterns; a hot switch keeps the old version serving until the
// new one is ready; a model too large is refused with 409 and changes nothing; a corrupt file
// ends the load failed with the pool fully free; the drain empties the pool.

#include "agent/device_pool_host.h"

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/testing/agent_testing.h"
#include "profile/safetensors_writer.h"

namespace tessera::agent {
namespace {

using nlohmann::json;
using testing::ControlPlaneServer;
using testing::eventually;
using testing::TempDir;
namespace fs = std::filesystem;

constexpr std::uint64_t kMiB = 1ull << 20;

class DevicePoolHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.start();
    config_.nodeName = "node-pool";
    config_.server = server_.url();
    config_.heartbeatMs = 50;
    config_.discovery = GpuDiscovery::kVirtual;
    config_.virtualGpus = {{"L4", 1, -1, -1, std::nullopt}};
    config_.admin = "127.0.0.1:0";
    config_.stopNewWorkMs = 0;
    config_.inFlightMaxMs = 20'000;
    config_.devicePlugin.enabled = false;
    config_.devicePool.backend = "host";
    config_.devicePool.sizeBytes = 16 * kMiB;
    config_.devicePool.blockBytes = 1 * kMiB;
    config_.devicePool.readerThreads = 2;
    timings_.backoffInitialMs = 20;
    timings_.backoffMaxMs = 200;
    timings_.drainPollMs = 10;
    timings_.lingerMs = 20;
  }
  void TearDown() override {
    lease_.release();
    agent_.reset();
    host_.reset();
  }

  void writeModel(const std::string& entry, std::uint64_t bytes) {
    fs::create_directories(dir_.path() / "models" / entry);
    auto written = profile::writeSyntheticModel(
        (dir_.path() / "models" / entry / "model.safetensors").string(), bytes, 8);
    ASSERT_TRUE(written) << written.error().message;
  }

  void startAgent() {
    ModelCacheOptions co;
    co.dir = (dir_.path() / "cache").string();
    co.diskCapacityBytes = 1ll << 30;
    auto cache = ModelCache::open(co, clock_);
    ASSERT_TRUE(cache) << cache.error().message;
    cache_ = std::move(*cache);
    source_ = makeDirectorySource("local", (dir_.path() / "models").string());
    DevicePoolHostOptions o;
    o.config = config_.devicePool;
    o.cache = cache_.get();
    o.sources = {source_.get()};
    o.drainTimeoutMs = 20'000;
    o.gpuSource = "virtual";
    o.beforeLoad = beforeLoad_;
    host_ = std::make_unique<DevicePoolHost>(std::move(o));
    std::vector<std::string> warnings;
    auto gpus = openGpuSource(config_, catalog_, config_.nodeName, warnings);
    ASSERT_TRUE(gpus) << gpus.error().message;
    gpus_ = std::move(*gpus);
    auto client = ControlClient::create({config_.server, std::nullopt, std::nullopt, 5});
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
    AgentParts parts;
    parts.gpus = gpus_.get();
    parts.client = client_.get();
    parts.cache = cache_.get();
    parts.sources = {source_.get()};
    parts.log = &log_;
    parts.components = {host_.get()};
    parts.trackers = {host_->work()};
    parts.device = host_->deviceMemory();
    agent_ = std::make_unique<Agent>(config_, parts, timings_);
    host_->setAcceptingWork([this] { return agent_->phase() == AgentPhase::kRunning; });
    auto port = agent_->start();
    ASSERT_TRUE(port) << port.error().message;
    ASSERT_TRUE(host_->active());
    admin_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    admin_->set_connection_timeout(5);
    admin_->set_read_timeout(30);
  }

  using Reply = testing::JsonReply;
  Reply post(const std::string& path, const json& body = json::object()) {
    return testing::postJson(*admin_, path, body);
  }
  json poolStatus() {
    auto r = admin_->Get("/status");
    if (!r || r->status != 200) return nullptr;
    return json::parse(r->body, nullptr, false)["devicePool"];
  }
  json modelEntry(const std::string& name) {
    auto r = admin_->Get("/models");
    if (!r || r->status != 200) return nullptr;
    const json s = json::parse(r->body, nullptr, false);
    for (const json& m : s["models"]) {
      if (m["model"] == name) return m;
    }
    return nullptr;
  }
  bool servingVersion(const std::string& name, const std::string& version) {
    const json m = modelEntry(name);
    return m.is_object() && m.contains("serving") && m["serving"]["version"] == version &&
           m["serving"]["state"] == "ready" && !m.contains("loading");
  }
  int pins(const std::string& entry) {
    for (const CacheEntry& e : cache_->status().entries) {
      if (e.model == entry) return e.pins;
    }
    return -1;
  }
  // Reads every tensor of the serving version back from the pool and compares it with the
  // pattern writeSyntheticModel wrote; returns the number of tensors checked.
  std::size_t verifyServing(const std::string& name, const std::string& version) {
    auto lease = host_->registry()->acquire(name);
    EXPECT_TRUE(lease) << lease.error().message;
    if (!lease) return 0;
    EXPECT_EQ(lease->version(), version);
    std::size_t checked = 0;
    for (const devpool::PlacedSource& s : lease->model().sources) {
      for (const profile::TensorInfo& t : s.tensors) {
        std::vector<std::byte> bytes(t.bytes());
        auto read = lease->model().readBack(*host_->backend(), s.logicalOffset + t.begin,
                                            bytes.data(), bytes.size());
        EXPECT_TRUE(read) << read.error().message;
        EXPECT_EQ(profile::tensorPatternMismatch(profile::tensorPatternSeed(t.name), 0,
                                                 bytes.data(), bytes.size()),
                  -1)
            << t.name;
        ++checked;
      }
    }
    return checked;
  }

  TempDir dir_;
  ControlPlaneServer server_;
  SteadyClock clock_;
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  std::ostringstream logText_;
  api::Logger log_{api::LogFormat::kText, logText_};
  AgentConfig config_;
  AgentTimings timings_;
  std::unique_ptr<ModelCache> cache_;
  std::unique_ptr<ModelSource> source_;
  std::unique_ptr<DevicePoolHost> host_;
  std::unique_ptr<GpuSource> gpus_;
  std::unique_ptr<ControlClient> client_;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<httplib::Client> admin_;
  devpool::ModelLease lease_;
  std::function<void(const std::string&)> beforeLoad_;
};

TEST_F(DevicePoolHostTest, PoolIsPreallocatedAndShownInStatus) {
  startAgent();
  const json pool = poolStatus();
  ASSERT_TRUE(pool.is_object());
  EXPECT_EQ(pool["enabled"], true);
  EXPECT_EQ(pool["backend"], "host");
  EXPECT_EQ(pool["capacityBytes"], 16 * kMiB);
  EXPECT_EQ(pool["freeBytes"], 16 * kMiB);
  EXPECT_EQ(pool["usedBytes"], 0);
  EXPECT_EQ(pool["blockBytes"], kMiB);
  EXPECT_EQ(pool["blocks"], 16);
  EXPECT_TRUE(pool["models"].empty());
}

TEST_F(DevicePoolHostTest, LoadStagesFromTheSourceAndPlacesTheFileBytes) {
  writeModel("llama@v1", 3 * kMiB + 4096);
  startAgent();
  ASSERT_FALSE(cache_->contains("llama@v1"));
  const Reply r = post("/models/llama/load", {{"version", "v1"}});
  ASSERT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(r.body["cacheEntry"], "llama@v1");
  ASSERT_TRUE(eventually([&] { return servingVersion("llama", "v1"); }))
      << modelEntry("llama").dump() << logText_.str();
  EXPECT_TRUE(cache_->contains("llama@v1"));
  EXPECT_EQ(pins("llama@v1"), 1);  // pinned while resident
  const json m = modelEntry("llama");
  EXPECT_EQ(m["state"], "ready");
  EXPECT_EQ(m["serving"]["doneBytes"], m["serving"]["totalBytes"]);
  EXPECT_GT(m["serving"]["totalBytes"].get<std::uint64_t>(), 3 * kMiB);
  EXPECT_EQ(m["serving"]["blocks"], 4);
  EXPECT_GE(m["serving"]["bandwidthMBps"].get<double>(), 0.0);
  EXPECT_EQ(verifyServing("llama", "v1"), 8u);
  const json pool = poolStatus();
  EXPECT_EQ(pool["usedBytes"], 4 * kMiB);
  EXPECT_EQ(pool["freeBytes"], 12 * kMiB);
  // Issue 14, item 14: the heartbeat carries the pool to the control plane, where
  // GET /api/v1/nodes shows which version is resident in how many blocks.
  ASSERT_TRUE(eventually([&] {
    const json n = server_.node(config_.nodeName);
    const json& p = n.is_null() ? n : n["devicePool"];
    return p.is_object() && p["freeBlocks"] == 12 && p["resident"].size() == 1;
  })) << server_.node(config_.nodeName).dump();
  const json reported = server_.node(config_.nodeName)["devicePool"];
  EXPECT_EQ(reported["blocks"], 16);
  EXPECT_EQ(reported["blockBytes"], kMiB);
  EXPECT_EQ(reported["resident"][0]["model"], "llama");
  EXPECT_EQ(reported["resident"][0]["version"], "v1");
  EXPECT_EQ(reported["resident"][0]["blocks"], 4);
  EXPECT_TRUE(reported["loading"].empty());
  // The same version again: 409; an unknown model: 404; a bad body: 400.
  EXPECT_EQ(post("/models/llama/load", {{"version", "v1"}}).status, 409);
  const Reply unknown = post("/models/nothing/load", {{"version", "v1"}});
  EXPECT_EQ(unknown.status, 404) << unknown.body.dump();
  EXPECT_EQ(post("/models/llama/load", {{"version", 2}}).status, 400);
  EXPECT_EQ(post("/models/llama/cancel").status, 404);  // nothing loading
  EXPECT_TRUE(host_->pool()->checkInvariants());

  // DELETE drains and unloads; the cache entry is unpinned.
  auto d = admin_->Delete("/models/llama");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 202) << d->body;
  ASSERT_TRUE(eventually([&] { return poolStatus()["freeBytes"] == 16 * kMiB; }));
  ASSERT_TRUE(eventually([&] { return pins("llama@v1") == 0; }));
  auto again = admin_->Delete("/models/llama");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404);
}

TEST_F(DevicePoolHostTest, HotSwitchKeepsTheOldVersionServingUntilTheNewOneIsReady) {
  writeModel("llama@v1", 3 * kMiB);
  writeModel("llama@v2", 5 * kMiB);
  startAgent();
  ASSERT_EQ(post("/models/llama/load", {{"version", "v1"}}).status, 202);
  ASSERT_TRUE(eventually([&] { return servingVersion("llama", "v1"); })) << logText_.str();

  // The order of transitions, and readers acquiring all through the switch.
  std::mutex mu;
  std::vector<std::string> transitions;
  host_->registry()->setTransitionListener(
      [&](const std::string&, const std::string& version, devpool::VersionState state) {
        std::lock_guard lock(mu);
        transitions.push_back(version + " " + devpool::versionStateName(state));
      });
  auto held = host_->registry()->acquire("llama");
  ASSERT_TRUE(held);
  lease_ = std::move(*held);  // a request on v1 during the switch
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, backwards{0};
  std::thread reader([&] {
    bool sawV2 = false;
    while (!done.load()) {
      auto l = host_->registry()->acquire("llama");
      if (!l) {
        ++failures;
        continue;
      }
      if (l->version() == "v2") sawV2 = true;
      if (sawV2 && l->version() == "v1") ++backwards;
    }
  });
  struct Join {
    std::atomic<bool>& done;
    std::thread& t;
    ~Join() {
      done = true;
      if (t.joinable()) t.join();
    }
  } join{done, reader};
  const Reply r = post("/models/llama/load", {{"version", "v2"}});
  ASSERT_EQ(r.status, 202) << r.body.dump();
  // v2 serves; v1 is draining behind its lease and keeps its blocks.
  ASSERT_TRUE(eventually([&] {
    const json m = modelEntry("llama");
    return servingVersion("llama", "v2") && m.contains("retiring") &&
           m["retiring"][0]["version"] == "v1" && m["retiring"][0]["state"] == "draining";
  })) << modelEntry("llama").dump();
  EXPECT_EQ(lease_.version(), "v1");
  EXPECT_EQ(poolStatus()["usedBytes"], (3 + 5) * kMiB);
  EXPECT_GT(agent_->inFlight(), 0u);  // the lease is work in flight
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(backwards.load(), 0);
  {
    std::lock_guard lock(mu);
    const auto at = [&](const std::string& t) {
      return std::find(transitions.begin(), transitions.end(), t) - transitions.begin();
    };
    ASSERT_LT(at("v2 ready"), static_cast<long>(transitions.size()))
        << ::testing::PrintToString(transitions);
    EXPECT_LT(at("v2 ready"), at("v1 draining")) << ::testing::PrintToString(transitions);
  }
  lease_.release();
  ASSERT_TRUE(eventually([&] { return poolStatus()["usedBytes"] == 5 * kMiB; }));
  ASSERT_TRUE(eventually([&] { return pins("llama@v1") == 0; }));
  EXPECT_EQ(pins("llama@v2"), 1);
  EXPECT_EQ(verifyServing("llama", "v2"), 8u);
  host_->registry()->setTransitionListener({});
}

TEST_F(DevicePoolHostTest, TooLargeForThePoolIs409AndChangesNothing) {
  writeModel("small", 2 * kMiB);
  writeModel("big", 20 * kMiB);
  startAgent();
  ASSERT_EQ(post("/models/small/load").status, 202);
  ASSERT_TRUE(eventually([&] { return servingVersion("small", "default"); }));
  const json before = poolStatus();
  const Reply r = post("/models/big/load", {{"version", "v1"}});
  EXPECT_EQ(r.status, 409) << r.body.dump();
  const std::string message = r.body["error"]["message"];
  // Not cached yet: the source's file sizes (20 MiB of data and the header) count.
  EXPECT_NE(message.find("needs " + std::to_string(21 * kMiB)), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(14 * kMiB) + " free"), std::string::npos) << message;
  EXPECT_EQ(poolStatus(), before);
  EXPECT_FALSE(cache_->contains("big"));  // not even staged
  EXPECT_TRUE(modelEntry("big").is_null());
}

TEST_F(DevicePoolHostTest, CorruptFileEndsTheLoadFailedWithThePoolFree) {
  writeModel("broken", 3 * kMiB);
  startAgent();
  ASSERT_TRUE(cache_->stage("broken", std::vector<ModelSource*>{source_.get()}));
  // The cached copy loses its tail after staging (a disk error, a truncation).
  const fs::path file = fs::path(cache_->pathOf("broken")) / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100'000);
  const Reply r = post("/models/broken/load", {{"version", "v1"}});
  ASSERT_EQ(r.status, 202) << r.body.dump();
  ASSERT_TRUE(eventually([&] { return modelEntry("broken")["state"] == "failed"; }))
      << modelEntry("broken").dump();
  const json m = modelEntry("broken");
  EXPECT_FALSE(m.contains("serving"));
  const std::string message = m["lastFailure"]["message"];
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  const json pool = poolStatus();
  EXPECT_EQ(pool["freeBytes"], 16 * kMiB);
  EXPECT_TRUE(host_->pool()->checkInvariants());
  EXPECT_EQ(pins("broken"), 0);
}

TEST_F(DevicePoolHostTest, CancelStopsALoadAndLeavesTheServingVersion) {
  writeModel("llama@v1", 2 * kMiB);
  writeModel("llama@v2", 3 * kMiB);
  // The v2 load waits at a gate (after its pin) until the test has cancelled it.
  std::mutex mu;
  std::condition_variable cv;
  bool atGate = false, open = false;
  beforeLoad_ = [&](const std::string&) {
    std::unique_lock lock(mu);
    atGate = true;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  };
  startAgent();
  {
    std::unique_lock lock(mu);
    open = true;  // v1 goes straight through
  }
  ASSERT_EQ(post("/models/llama/load", {{"version", "v1"}}).status, 202);
  ASSERT_TRUE(eventually([&] { return servingVersion("llama", "v1"); }));
  {
    std::unique_lock lock(mu);
    open = false;
    atGate = false;
  }
  ASSERT_EQ(post("/models/llama/load", {{"version", "v2"}}).status, 202);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return atGate; }));
  }
  EXPECT_EQ(modelEntry("llama")["state"], "loading");
  EXPECT_EQ(post("/models/llama/load", {{"version", "v2"}}).status, 409);  // one load at a time
  const Reply c = post("/models/llama/cancel");
  EXPECT_EQ(c.status, 202) << c.body.dump();
  {
    std::unique_lock lock(mu);
    open = true;
    cv.notify_all();
  }
  ASSERT_TRUE(eventually([&] {
    const json m = modelEntry("llama");
    return m.contains("lastFailure") && m["lastFailure"]["version"] == "v2" &&
           !m.contains("loading");
  })) << modelEntry("llama").dump();
  const json m = modelEntry("llama");
  EXPECT_NE(m["lastFailure"]["message"].get<std::string>().find("cancel"), std::string::npos)
      << m.dump();
  EXPECT_TRUE(servingVersion("llama", "v1"));
  EXPECT_EQ(poolStatus()["usedBytes"], 2 * kMiB);
  EXPECT_EQ(pins("llama@v2"), 0);
  EXPECT_EQ(pins("llama@v1"), 1);
  EXPECT_TRUE(host_->pool()->checkInvariants());
}

TEST_F(DevicePoolHostTest, DrainEmptiesThePool) {
  writeModel("llama", 3 * kMiB);
  writeModel("mistral", 4 * kMiB);
  startAgent();
  ASSERT_EQ(post("/models/llama/load").status, 202);
  ASSERT_TRUE(eventually([&] { return servingVersion("llama", "default"); }));
  ASSERT_EQ(post("/models/mistral/load", {{"version", "7b"}}).status, 202);
  ASSERT_TRUE(eventually([&] { return servingVersion("mistral", "7b"); }));
  EXPECT_EQ(poolStatus()["usedBytes"], 7 * kMiB);
  agent_->drain("test");
  ASSERT_TRUE(eventually([&] { return agent_->phase() == AgentPhase::kDrained; }));
  const json status = agent_->status();
  const std::string steps = status["drain"]["steps"].dump();
  EXPECT_NE(steps.find("device memory released (device pool)"), std::string::npos) << steps;
  const devpool::BlockPoolStats st = host_->pool()->stats();
  EXPECT_EQ(st.freeBlocks, st.totalBlocks);
  EXPECT_EQ(pins("llama"), 0);
  EXPECT_EQ(pins("mistral"), 0);
  // No new loads on a drained node.
  EXPECT_EQ(post("/models/llama/load").status, 409);
}

TEST(DevicePoolConfig, SectionIsReadAndUnknownKeysAreNamed) {
  auto c = parseAgentYaml(
      "devicePool: {enabled: auto, backend: host, size: 8Gi, blockSize: 4Mi, "
      "readerThreads: 3}\n",
      "a.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->devicePool.enabled.has_value());
  EXPECT_EQ(c->devicePool.backend, "host");
  EXPECT_EQ(c->devicePool.sizeBytes, 8ll << 30);
  EXPECT_EQ(c->devicePool.blockBytes, 4ll << 20);
  EXPECT_EQ(c->devicePool.readerThreads, 3);
  auto defaults = parseAgentYaml("nodeName: x\n", "b.yaml");
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->devicePool.enabled, std::optional<bool>(true));
  EXPECT_EQ(defaults->devicePool.backend, "auto");
  EXPECT_EQ(defaults->devicePool.blockBytes, 2ll << 20);
  auto typo = parseAgentYaml("devicePool:\n  sise: 8Gi\n", "c.yaml");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().message.find("c.yaml:2"), std::string::npos) << typo.error().message;
  EXPECT_NE(typo.error().message.find("devicePool.sise"), std::string::npos)
      << typo.error().message;
  auto backend = parseAgentYaml("devicePool: {backend: tpu}\n", "d.yaml");
  ASSERT_FALSE(backend);
  EXPECT_NE(backend.error().message.find("auto, host or cuda"), std::string::npos);
}

// deploy/ keeps the pool small and best effort: engines share the GPU and do not use it yet.
TEST(DevicePoolConfig, ShippedFilesKeepThePoolSmall) {
  auto base = loadAgentFile(std::string(TESSERA_SOURCE_DIR) + "/deploy/base/agent-config.yaml");
  ASSERT_TRUE(base) << base.error().message;
  EXPECT_FALSE(base->devicePool.enabled.has_value());
  EXPECT_EQ(base->devicePool.backend, "auto");
  EXPECT_EQ(base->devicePool.sizeBytes, 1ll << 30);
  auto dev =
      loadAgentFile(std::string(TESSERA_SOURCE_DIR) + "/deploy/overlays/dev/agent-config.yaml");
  ASSERT_TRUE(dev) << dev.error().message;
  EXPECT_EQ(dev->devicePool.backend, "host");
  EXPECT_EQ(dev->devicePool.sizeBytes, 64ll << 20);
}

TEST(DevicePoolDefaults, SizeIsAShareOfTheMemory) {
  EXPECT_EQ(defaultHostPoolBytes(4ull << 30), 256ull << 20);
  EXPECT_EQ(defaultHostPoolBytes(256ull << 30), 512ull << 20);
  EXPECT_EQ(defaultCudaPoolBytes(100ull << 30), 90ull << 30);
}

TEST(DevicePoolHostStart, EnabledFailsTheStartAutoRunsWithoutAPool) {
  DevicePoolHostOptions o;
  o.config.backend = "host";
  o.config.sizeBytes = 1 << 20;
  o.config.blockBytes = 2 << 20;  // larger than the pool
  o.gpuSource = "virtual";
  DevicePoolHost strict(o);
  auto started = strict.start({});
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().message.find("less than one block"), std::string::npos);
  EXPECT_EQ(started.error().code, ErrorCode::kFailedPrecondition);
  o.config.enabled.reset();
  DevicePoolHost lenient(o);
  ASSERT_TRUE(lenient.start({}));
  EXPECT_FALSE(lenient.active());
  EXPECT_NE(lenient.status()["error"].get<std::string>().find("less than one block"),
            std::string::npos);
  auto load = lenient.startLoad("x", "");
  ASSERT_FALSE(load);
  EXPECT_EQ(load.error().code, ErrorCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tessera::agent
