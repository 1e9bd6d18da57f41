// The drain with the real device pool: a model staged in the node cache is loaded into the
// pool (host backend) from the cache's file; a lease on it is in-flight work; the drain waits
// for it, then unloads the model and every block returns to the pool.

#include "agent/devpool_work.h"

#include <sstream>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/testing/agent_testing.h"
#include "devpool/backend.h"
#include "devpool/block_pool.h"
#include "devpool/loader.h"

namespace tessera::agent {
namespace {

using testing::ControlPlaneServer;
using testing::eventually;
using testing::TempDir;
using testing::writeFile;

TEST(DevpoolWork, DrainWaitsForRegistryLeasesThenFreesTheirBlocks) {
  TempDir dir;
  std::string weights(300'000, '\0');
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 7);
  writeFile(dir.path() / "models" / "llama-8b" / "weights.bin", weights);
  SteadyClock clock;
  ModelCacheOptions o;
  o.dir = (dir.path() / "cache").string();
  o.diskCapacityBytes = 1 << 20;
  auto cache = ModelCache::open(o, clock);
  ASSERT_TRUE(cache) << cache.error().message;
  auto source = makeDirectorySource("local", (dir.path() / "models").string());
  std::vector<ModelSource*> sources{source.get()};
  ASSERT_TRUE((*cache)->stage("llama-8b", sources));

  auto backend = devpool::makeHostBackend();
  constexpr std::uint64_t kBlock = 64 << 10;
  auto pool = devpool::BlockPool::create(*backend, {64 * kBlock, kBlock});
  ASSERT_TRUE(pool) << pool.error().message;
  auto loader = devpool::Loader::create(**pool);
  ASSERT_TRUE(loader) << loader.error().message;
  devpool::ModelRegistry registry(**loader);
  const std::string file = (*cache)->pathOf("llama-8b") + "/weights.bin";
  auto loaded = registry.loadVersion({"llama-8b", "v1", {devpool::LoadSource::file(file)}});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_GT((*pool)->stats().totalBlocks - (*pool)->stats().freeBlocks, 0u);
  auto lease = registry.acquire("llama-8b");
  ASSERT_TRUE(lease) << lease.error().message;

  RegistryWork work(registry);
  RegistryDeviceMemory memory(registry, 1'000);
  EXPECT_EQ(work.inFlight(), 1u);

  ControlPlaneServer server;
  server.start();
  AgentConfig config;
  config.nodeName = "pool-node";
  config.server = server.url();
  config.heartbeatMs = 50;
  config.discovery = GpuDiscovery::kVirtual;
  config.virtualGpus = {{"L4", 1, -1, -1, std::nullopt}};
  config.admin = "127.0.0.1:0";
  config.stopNewWorkMs = 10;
  config.inFlightMaxMs = 20'000;
  std::vector<std::string> warnings;
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  auto gpus = openGpuSource(config, catalog, config.nodeName, warnings);
  ASSERT_TRUE(gpus);
  auto client = ControlClient::create({config.server, std::nullopt, std::nullopt, 5});
  ASSERT_TRUE(client);
  std::ostringstream logText;
  api::Logger log(api::LogFormat::kText, logText);
  AgentParts parts;
  parts.gpus = gpus->get();
  parts.client = client->get();
  parts.cache = cache->get();
  parts.sources = sources;
  parts.trackers = {&work};
  parts.device = &memory;
  parts.log = &log;
  AgentTimings timings;
  timings.drainPollMs = 10;
  timings.lingerMs = 10;
  Agent agent(config, parts, timings);
  ASSERT_TRUE(agent.start());
  ASSERT_TRUE(eventually([&] { return !server.node("pool-node").is_null(); }));
  agent.drain("test");
  // Held by the registry lease: the drain waits past its stop-new-work window.
  ASSERT_TRUE(eventually([&] { return agent.status()["drain"]["steps"].size() >= 3; }));
  EXPECT_EQ(agent.phase(), AgentPhase::kDraining);
  EXPECT_EQ(agent.inFlight(), 1u);
  lease->release();
  EXPECT_EQ(agent.wait(), 0);
  const std::string steps = agent.status()["drain"]["steps"].dump();
  EXPECT_NE(steps.find("device memory released (device pool registry)"), std::string::npos)
      << steps;
  EXPECT_FALSE(registry.status("llama-8b").has_value());
  EXPECT_EQ((*pool)->stats().freeBlocks, (*pool)->stats().totalBlocks);
  EXPECT_EQ(work.inFlight(), 0u);
}

}  // namespace
}  // namespace tessera::agent
