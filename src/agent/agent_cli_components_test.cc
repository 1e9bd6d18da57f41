// `tessera agent run` (the real binary) with a devicePlugin and an engines section: the
// agent it starts registers tessera.io/gpus with a fake kubelet on a real unix socket, shows
// the plugin and the stand-in vLLM in its status, switches a LoRA adapter over its admin API,
// and `tessera agent drain` puts vLLM to sleep and removes the plugin's socket. With a
// draDriver section (GPU mode both) the same binary publishes its DRA GPUs as ResourceSlices
// to the test API server, registers with a fake kubelet built from kubelet's own protos, and
// the device plugin serves only the other GPUs.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "agent/testing/agent_process.h"
#include "agent/testing/agent_testing.h"
#include "deviceplugin/test_support.h"
#include "dra/testing/fake_kubelet.h"
#include "engines/testing/fake_vllm.h"
#include "engines/testing/scratch_dir.h"
#include "k8s/testing/fake_apiserver.h"

namespace tessera::agent {
namespace {

using nlohmann::json;

TEST(AgentCliComponents, RunHostsThePluginAndDrivesTheEngine) {
  testing::ControlPlaneServer server;
  server.start();
  deviceplugin::testing::SocketDir sockets;
  ASSERT_FALSE(sockets.path().empty());
  deviceplugin::testing::FakeKubelet kubelet(sockets.path());
  engines::testing::FakeVllm vllm{engines::testing::FakeVllmOptions{}};
  ASSERT_TRUE(vllm.start());
  engines::testing::ScratchDir dir;
  dir.write("lora-v1/adapter_config.json", R"({"r": 8})");

  const std::string config = (dir.path() / "agent.yaml").string();
  testing::writeFile(config,
                     "nodeName: cli-dp\n"
                     "server: " +
                         server.url() +
                         "\n"
                         "heartbeatSeconds: 0.05\n"
                         "gpuDiscovery: virtual\n"
                         "virtualGpus: [{type: L4, count: 2}]\n"
                         "cache: {dir: " +
                         (dir.path() / "cache").string() +
                         "}\n"
                         "admin: 127.0.0.1:0\n"
                         "drain: {stopNewWorkSeconds: 0, inFlightMaxSeconds: 5}\n"
                         "devicePlugin: {enabled: true, dir: " +
                         sockets.path() +
                         ", watchSeconds: 0.05}\n"
                         "engines:\n"
                         "  - {name: chat, kind: vllm, url: \"" +
                         vllm.url() + "\", timeoutMs: 3000}\n");
  testing::AgentProcess agent(TESSERA_BINARY, config);
  ASSERT_FALSE(agent.adminAddress().empty()) << agent.firstLine();

  ASSERT_TRUE(deviceplugin::testing::eventually([&] { return !kubelet.requests().empty(); }));
  EXPECT_EQ(kubelet.requests().front().resource_name(), "tessera.io/gpus");
  const std::string socket = sockets.file(kubelet.requests().front().endpoint());
  EXPECT_TRUE(std::filesystem::exists(socket));

  httplib::Client admin("http://" + agent.adminAddress());
  admin.set_connection_timeout(5);
  admin.set_read_timeout(30);
  json status;
  ASSERT_TRUE(testing::eventually([&] {
    auto r = admin.Get("/status");
    if (!r || r->status != 200) return false;
    status = json::parse(r->body, nullptr, false);
    return status.contains("engines") && status["engines"].size() == 1 &&
           status["engines"][0].contains("healthy");
  }));
  EXPECT_EQ(status["engines"][0]["name"], "chat");
  EXPECT_EQ(status["engines"][0]["healthy"], true);
  EXPECT_EQ(status["devicePlugin"]["state"], "serving");
  EXPECT_EQ(status["devicePlugin"]["resources"][0]["gpus"].size(), 2u);

  auto switched =
      admin.Post("/models/helper/switch", json{{"path", (dir.path() / "lora-v1").string()}}.dump(),
                 "application/json");
  ASSERT_TRUE(switched);
  EXPECT_EQ(switched->status, 200) << switched->body;
  EXPECT_EQ(vllm.adapters(), std::vector<std::string>{"helper"});

  const std::string drain = std::string(TESSERA_BINARY) + " agent drain --admin " +
                            agent.adminAddress() + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(drain.c_str()), 0);
  EXPECT_EQ(agent.wait(), 0);
  EXPECT_EQ(vllm.sleepLevel(), 1);
  EXPECT_FALSE(std::filesystem::exists(socket));
}

TEST(AgentCliComponents, RunAsADraDriverNextToTheDevicePlugin) {
  testing::ControlPlaneServer server;
  server.start();
  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  deviceplugin::testing::SocketDir sockets;
  ASSERT_FALSE(sockets.path().empty());
  deviceplugin::testing::FakeKubelet kubelet(sockets.path());
  engines::testing::ScratchDir dir;
  const std::string config = (dir.path() / "agent.yaml").string();
  testing::writeFile(config,
                     "nodeName: cli-dra\n"
                     "server: " +
                         server.url() +
                         "\n"
                         "heartbeatSeconds: 0.05\n"
                         "gpuDiscovery: virtual\n"
                         "virtualGpus: [{type: L4, count: 3}]\n"
                         "cache: {dir: " +
                         (dir.path() / "cache").string() +
                         "}\n"
                         "admin: 127.0.0.1:0\n"
                         "drain: {stopNewWorkSeconds: 0, inFlightMaxSeconds: 5}\n"
                         "devicePlugin: {enabled: true, dir: " +
                         sockets.path() +
                         ", watchSeconds: 0.05}\n"
                         "draDriver: {enabled: true, gpus: [\"1\", \"2\"], registryDir: " +
                         sockets.file("registry") + ", pluginDir: " + sockets.file("plugins") +
                         ", cdiDir: " + sockets.file("cdi") + ", kubeApiServer: \"" + api.url() +
                         "\", watchSeconds: 0.05}\n");
  testing::AgentProcess agent(TESSERA_BINARY, config);
  ASSERT_FALSE(agent.adminAddress().empty()) << agent.firstLine();

  // The driver's two GPUs in the node's pool, the device plugin's one through kubelet.
  ASSERT_TRUE(
      deviceplugin::testing::eventually([&] { return api.list("resourceslices").size() == 1; }));
  const json slice = api.list("resourceslices")[0];
  EXPECT_EQ(slice["spec"]["nodeName"], "cli-dra");
  ASSERT_EQ(slice["spec"]["devices"].size(), 2u);
  EXPECT_EQ(slice["spec"]["devices"][0]["name"], "gpu-1");
  EXPECT_EQ(slice["spec"]["devices"][1]["attributes"]["uuid"],
            json({{"string", "virtual-cli-dra-2"}}));
  dra::testing::FakeKubelet draKubelet;
  auto info = draKubelet.registerPlugin(sockets.file("registry") + "/gpu.tessera.io-reg.sock");
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ((*info)["endpoint"], sockets.file("plugins") + "/gpu.tessera.io/dra.sock");

  httplib::Client admin("http://" + agent.adminAddress());
  admin.set_connection_timeout(5);
  admin.set_read_timeout(30);
  json status;
  ASSERT_TRUE(testing::eventually([&] {
    auto r = admin.Get("/status");
    if (!r || r->status != 200) return false;
    status = json::parse(r->body, nullptr, false);
    return status.contains("draDriver") && status["draDriver"].value("registrations", 0) == 1 &&
           status.contains("devicePlugin");
  })) << status.dump();
  EXPECT_EQ(status["draDriver"]["state"], "serving");
  EXPECT_EQ(status["draDriver"]["poolGeneration"], 1);
  ASSERT_EQ(status["devicePlugin"]["resources"][0]["gpus"].size(), 1u);  // GPU 0 only
  EXPECT_EQ(status["devicePlugin"]["resources"][0]["gpus"][0]["id"], "0");

  // The drain withdraws the pool and the agent exits.
  const std::string drain = std::string(TESSERA_BINARY) + " agent drain --admin " +
                            agent.adminAddress() + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(drain.c_str()), 0);
  EXPECT_EQ(agent.wait(), 0);
  EXPECT_TRUE(api.list("resourceslices").empty());
  EXPECT_FALSE(std::filesystem::exists(sockets.file("registry") + "/gpu.tessera.io-reg.sock"));
}

}  // namespace
}  // namespace tessera::agent
