// The agent's DRA driver host (dra_driver_host.h) and the draDriver section of the agent file:
// the GPU mode (device-plugin, dra, both), the pool the host publishes to the test API server
// through a start, a health change and a drain, a claim prepared on the driver it runs, and the
// health timeout it tells kubelet.

#include "agent/dra_driver_host.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "agent/agent_config.h"
#include "deviceplugin/test_support.h"
#include "dra/driver.h"
#include "k8s/testing/fake_apiserver.h"
#include "model/gpu_catalog.h"

namespace tessera::agent {
namespace {

using json = nlohmann::json;

std::vector<AgentGpu> virtualGpus(int n) {
  std::vector<AgentGpu> out;
  for (int i = 0; i < n; ++i) {
    AgentGpu g;
    g.id = std::to_string(i);
    g.uuid = "virtual-node-a-" + g.id;
    g.type = "H100-80GB";
    g.isVirtual = true;
    g.memoryMib = 81920;
    out.push_back(g);
  }
  return out;
}

TEST(DraDriverConfig, ReadsTheSectionAndDefaults) {
  auto c = parseAgentYaml("nodeName: a\n", "agent.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->draDriver.enabled);
  EXPECT_EQ(c->draDriver.registryDir, "/var/lib/kubelet/plugins_registry");
  EXPECT_EQ(c->draDriver.pluginDir, "/var/lib/kubelet/plugins");
  EXPECT_EQ(c->draDriver.cdiDir, "/var/run/cdi");
  c = parseAgentYaml(R"(draDriver:
  enabled: true
  registryDir: /r
  pluginDir: /p
  cdiDir: /c
  gpus: ["2", "3"]
  kubeApiServer: "http://127.0.0.1:8001"
  watchSeconds: 0.5
)",
                     "agent.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->draDriver.enabled);
  EXPECT_EQ(c->draDriver.registryDir, "/r");
  EXPECT_EQ(c->draDriver.gpus, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(c->draDriver.kubeApiServer, "http://127.0.0.1:8001");
  EXPECT_EQ(c->draDriver.watchMs, 500);
}

TEST(DraDriverConfig, BadValuesNameTheKey) {
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {"draDriver: {enabled: true, cdiDir: \"\"}\n", "cdiDir"},
           {"draDriver: {gpus: [\"1\", \"1\"]}\n", "duplicate GPU 1"},
           {"draDriver: {kubeApiServer: \"ftp://x\"}\n", "kubeApiServer"},
           {"draDriver: {socket: /x}\n", "socket"},
           {"devicePlugin: {enabled: true}\ndraDriver: {enabled: true}\n", "handed out by both"}}) {
    auto c = parseAgentYaml(text, "agent.yaml");
    ASSERT_FALSE(c) << text;
    EXPECT_NE(c.error().message.find(key), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("agent.yaml"), std::string::npos) << c.error().message;
  }
}

TEST(DraDriverConfig, TheGpuModeSplitsTheGpusBetweenDriverAndDevicePlugin) {
  const std::vector<AgentGpu> gpus = virtualGpus(4);
  AgentConfig c;
  c.devicePlugin.enabled = true;
  EXPECT_TRUE(draDriverGpus(c.draDriver, gpus).empty());  // device-plugin: the driver is off
  EXPECT_TRUE(devicePluginWanted(c));
  c.draDriver.enabled = true;
  c.devicePlugin.enabled.reset();
  EXPECT_EQ(draDriverGpus(c.draDriver, gpus).size(), 4u);  // dra: every GPU
  EXPECT_FALSE(devicePluginWanted(c));
  c.draDriver.gpus = {"2", "3"};  // both: the driver's two, the device plugin the rest
  EXPECT_EQ(draDriverGpus(c.draDriver, gpus), (std::vector<std::string>{"2", "3"}));
  c.devicePlugin.enabled = true;
  EXPECT_TRUE(devicePluginWanted(c));
}

TEST(DraDriverHost, PublishesThePoolFollowsHealthAndWithdrawsOnDrain) {
  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  deviceplugin::testing::SocketDir dir;
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  DraDriverHostOptions o;
  o.config.enabled = true;
  o.config.registryDir = dir.file("registry");
  o.config.pluginDir = dir.file("plugins");
  o.config.cdiDir = dir.file("cdi");
  o.config.gpus = {"1", "2"};
  o.config.kubeApiServer = api.url();
  o.nodeName = "node-a";
  o.catalog = &catalog;
  DraDriverHost host(o);
  std::vector<AgentGpu> gpus = virtualGpus(3);
  ASSERT_TRUE(host.start(gpus));
  EXPECT_TRUE(std::filesystem::exists(dir.file("registry") + "/gpu.tessera.io-reg.sock"));
  auto slices = api.list("resourceslices");
  ASSERT_EQ(slices.size(), 1u);
  const json devices = slices[0]["spec"]["devices"];
  ASSERT_EQ(devices.size(), 2u);  // GPU 0 is the device plugin's
  EXPECT_EQ(devices[0]["name"], "gpu-1");
  EXPECT_EQ(devices[0]["attributes"]["uuid"], json({{"string", "virtual-node-a-1"}}));
  EXPECT_EQ(devices[0]["attributes"]["architecture"], json({{"string", "Hopper"}}));
  EXPECT_EQ(host.status()["poolGeneration"], 1);
  // Kubelet is told three samples (heartbeats of 10 s by default), at least 30 s.
  EXPECT_EQ(host.status()["healthTimeoutSeconds"], 30);
  EXPECT_EQ(host.status()["healthStreams"], 0);

  gpus[2].healthy = false;
  host.gpusSampled(gpus);
  slices = api.list("resourceslices");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);
  EXPECT_TRUE(slices[0]["spec"]["devices"][1].contains("taints"));
  EXPECT_FALSE(slices[0]["spec"]["devices"][0].contains("taints"));
  host.gpusSampled(gpus);  // nothing changed: nothing written
  EXPECT_EQ(api.list("resourceslices")[0]["spec"]["pool"]["generation"], 2);

  // A claim kube-scheduler allocated on GPU 1 is prepared by the driver the host runs.
  json claim = {{"metadata", {{"name", "c"}, {"namespace", "default"}}}, {"spec", json::object()}};
  auto made = api.create("resourceclaims", claim);
  ASSERT_TRUE(made);
  (*made)["status"] = {
      {"allocation",
       {{"devices",
         {{"results", json::array({{{"request", "r"},
                                    {"driver", "gpu.tessera.io"},
                                    {"pool", "node-a"},
                                    {"device", "gpu-1"},
                                    {"consumedCapacity", {{"memory", "10Gi"}}}}})}}}}}};
  ASSERT_TRUE(api.updateStatus("resourceclaims", *made));
  auto prepared =
      host.driver()->prepare({"default", (*made)["metadata"]["uid"].get<std::string>(), "c"});
  ASSERT_TRUE(prepared) << prepared.error().message;
  EXPECT_EQ(prepared->devices.at(0).device, "gpu-1");

  const std::vector<std::string> lines = host.drain(0);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("withdrawn"), std::string::npos);
  EXPECT_TRUE(api.list("resourceslices").empty());
  EXPECT_EQ(host.status()["state"], "withdrawn");
  host.stop();
  EXPECT_FALSE(std::filesystem::exists(dir.file("registry") + "/gpu.tessera.io-reg.sock"));
}

// A host on node-a with its sockets under `dir`, publishing to `api`.
DraDriverHostOptions hostOptions(const deviceplugin::testing::SocketDir& dir,
                                 k8s::testing::FakeApiServer& api) {
  DraDriverHostOptions o;
  o.config.enabled = true;
  o.config.registryDir = dir.file("registry");
  o.config.pluginDir = dir.file("plugins");
  o.config.cdiDir = dir.file("cdi");
  o.config.kubeApiServer = api.url();
  o.nodeName = "node-a";
  return o;
}

TEST(DraDriverHost, KubeletHearsOfAStalledAgentAfterThreeSamples) {
  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  deviceplugin::testing::SocketDir dir;
  DraDriverHostOptions o = hostOptions(dir, api);
  o.sampleIntervalMs = 25'500;
  DraDriverHost host(o);
  ASSERT_TRUE(host.start(virtualGpus(1)));
  EXPECT_EQ(host.status()["healthTimeoutSeconds"], 77);  // ceil(3 × 25.5 s)
  host.stop();
}

TEST(DraDriverHost, AnUnreachableApiServerIsRetriedAtTheNextSample) {
  deviceplugin::testing::SocketDir dir;
  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.start());
  api.refuseWrites([](const std::string&, const json&) { return 503; });
  DraDriverHostOptions o = hostOptions(dir, api);
  DraDriverHost host(o);
  const std::vector<AgentGpu> gpus = virtualGpus(1);
  ASSERT_TRUE(host.start(gpus));  // the agent runs on
  EXPECT_NE(host.status().value("error", "").find("503"), std::string::npos) << host.status();
  EXPECT_TRUE(api.list("resourceslices").empty());
  api.refuseWrites({});
  host.gpusSampled(gpus);
  EXPECT_EQ(api.list("resourceslices").size(), 1u);
  EXPECT_FALSE(host.status().contains("error"));
}

TEST(DraDriverHost, AGpuTheNodeDoesNotHaveIsAStartError) {
  DraDriverHostOptions o;
  o.config.enabled = true;
  o.config.gpus = {"7"};
  o.config.kubeApiServer = "http://127.0.0.1:1";
  DraDriverHost host(o);
  auto r = host.start(virtualGpus(2));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no GPU 7"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace tessera::agent
