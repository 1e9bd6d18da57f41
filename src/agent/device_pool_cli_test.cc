// `tessera agent run` hosting the device pool, as a user runs it: the real binary with a
// devicePool section (host backend), a model loaded over the admin API from a directory
// source, the pool in /status, then `tessera agent drain` empties it and the agent exits 0.
// A pool that cannot be created stops the start-up with exit 2 and says why.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "agent/testing/agent_process.h"
#include "agent/testing/agent_testing.h"
#include "profile/safetensors_writer.h"

namespace tessera::agent {
namespace {

using nlohmann::json;

std::string agentYaml(const testing::ControlPlaneServer& server, const testing::TempDir& dir,
                      const std::string& pool) {
  return "nodeName: cli-pool\n"
         "server: " +
         server.url() +
         "\n"
         "heartbeatSeconds: 0.05\n"
         "gpuDiscovery: virtual\n"
         "virtualGpus: [{type: L4, count: 1}]\n"
         "cache: {dir: " +
         (dir.path() / "cache").string() +
         ", diskCapacity: 1Gi, minFreeDisk: 0Mi}\n"
         "modelSources: [{name: local, path: " +
         (dir.path() / "models").string() +
         "}]\n"
         "admin: 127.0.0.1:0\n"
         "drain: {stopNewWorkSeconds: 0, inFlightMaxSeconds: 5}\n"
         "devicePlugin: {enabled: false}\n"
         "devicePool: " +
         pool + "\n";
}

TEST(DevicePoolCli, RunLoadsAModelIntoThePoolAndTheDrainEmptiesIt) {
  testing::ControlPlaneServer server;
  server.start();
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "models" / "qwen@r1");
  ASSERT_TRUE(profile::writeSyntheticModel(
      (dir.path() / "models" / "qwen@r1" / "model.safetensors").string(), 3 << 20, 4));
  const std::string config = dir.file("agent.yaml");
  testing::writeFile(config, agentYaml(server, dir, "{backend: auto, size: 8Mi, blockSize: 1Mi}"));
  testing::AgentProcess agent(TESSERA_BINARY, config);
  ASSERT_FALSE(agent.adminAddress().empty()) << agent.firstLine();
  httplib::Client admin("http://" + agent.adminAddress());
  admin.set_connection_timeout(5);
  admin.set_read_timeout(30);

  auto loaded = admin.Post("/models/qwen/load", R"({"version": "r1"})", "application/json");
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->status, 202) << loaded->body;
  json pool;
  ASSERT_TRUE(testing::eventually([&] {
    auto r = admin.Get("/status");
    if (!r || r->status != 200) return false;
    pool = json::parse(r->body, nullptr, false)["devicePool"];
    return pool.is_object() && pool.contains("models") && pool["models"].size() == 1 &&
           pool["models"][0]["state"] == "ready";
  })) << pool.dump();
  // Virtual GPUs: auto takes the host backend and says so.
  EXPECT_EQ(pool["backend"], "host");
  EXPECT_NE(pool["backendReason"].get<std::string>().find("virtual"), std::string::npos);
  EXPECT_EQ(pool["capacityBytes"], 8 << 20);
  EXPECT_EQ(pool["usedBytes"], 3 << 20);
  EXPECT_EQ(pool["models"][0]["serving"]["version"], "r1");

  const std::string drain =
      std::string(TESSERA_BINARY) + " agent drain --admin " + agent.adminAddress() + " 2>&1";
  std::string output;
  if (FILE* p = ::popen(drain.c_str(), "r"); p != nullptr) {
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, p) != nullptr) output += buffer;
    EXPECT_EQ(::pclose(p), 0) << output;
  }
  EXPECT_NE(output.find("device memory released (device pool)"), std::string::npos) << output;
  EXPECT_EQ(agent.wait(), 0);
}

TEST(DevicePoolCli, APoolThatCannotBeCreatedStopsTheStartWithExitTwo) {
  testing::ControlPlaneServer server;
  server.start();
  testing::TempDir dir;
  const std::string config = dir.file("agent.yaml");
  testing::writeFile(config, agentYaml(server, dir, "{backend: host, size: 1Mi, blockSize: 2Mi}"));
  std::string output;
  const std::string run =
      std::string(TESSERA_BINARY) + " agent run --config " + config + " 2>&1 </dev/null";
  FILE* p = ::popen(run.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, p) != nullptr) output += buffer;
  const int status = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << output;
  EXPECT_NE(output.find("device pool: 1048576 bytes is less than one block of 2097152"),
            std::string::npos)
      << output;
  // The same pool with enabled: auto: the agent runs without one.
  testing::writeFile(
      config, agentYaml(server, dir, "{enabled: auto, backend: host, size: 1Mi, blockSize: 2Mi}"));
  testing::AgentProcess lenient(TESSERA_BINARY, config);
  ASSERT_FALSE(lenient.adminAddress().empty()) << lenient.firstLine();
  httplib::Client admin("http://" + lenient.adminAddress());
  admin.set_connection_timeout(5);
  auto r = admin.Get("/status");
  ASSERT_TRUE(r);
  const json pool = json::parse(r->body, nullptr, false)["devicePool"];
  EXPECT_EQ(pool["enabled"], false);
  EXPECT_NE(pool["error"].get<std::string>().find("less than one block"), std::string::npos);
  auto load = admin.Post("/models/x/load", "{}", "application/json");
  ASSERT_TRUE(load);
  EXPECT_EQ(load->status, 409);
}

}  // namespace
}  // namespace tessera::agent
