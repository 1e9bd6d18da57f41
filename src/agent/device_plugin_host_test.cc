// The agent hosting the kubelet device plugin, end to end: the Agent in-process with virtual
// GPUs, the REAL control plane on a loopback port, and a fake kubelet (Registration on a
// real unix socket, a gRPC DevicePlugin client playing kubelet's device manager). A pod is
// booked through the control plane's extender; kubelet's Allocate gets that booking's GPUs
// and the control plane sees the allocation confirmed. Also: GPU health from discovery
// reaches ListAndWatch, the drain stops the plugin, and the inventory mapping.

#include "agent/device_plugin_host.h"

#include <atomic>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "agent/agent.h"
#include "agent/testing/agent_testing.h"
#include "deviceplugin/test_support.h"

namespace tessera::agent {
namespace {

using nlohmann::json;
using testing::ControlPlaneServer;

constexpr const char* kPluginHostToken = "device-plugin-host-token";

// The configured virtual GPUs, with a switch that makes GPU "1" report unhealthy (as an
// XID would on a real card).
class SwitchableGpus final : public GpuSource {
 public:
  explicit SwitchableGpus(std::unique_ptr<GpuSource> inner) : inner_(std::move(inner)) {}
  std::string kind() const override { return inner_->kind(); }
  Result<std::vector<AgentGpu>> sample() override {
    auto gpus = inner_->sample();
    if (gpus && sick_) {
      for (AgentGpu& g : *gpus) {
        if (g.id == "1") g.healthy = false;
      }
    }
    return gpus;
  }
  std::atomic<bool> sick_{false};

 private:
  std::unique_ptr<GpuSource> inner_;
};

class DevicePluginHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(sockets_.path().empty());
    server_.start();
    config_.nodeName = "node-dp";
    config_.server = server_.url();
    config_.heartbeatMs = 30;
    config_.nvmlLibrary = "libnvidia-ml-not-installed.so.1";
    config_.discovery = GpuDiscovery::kVirtual;
    config_.virtualGpus = {{"L4", 2, -1, 0, std::nullopt}};
    config_.admin = "127.0.0.1:0";
    config_.stopNewWorkMs = 0;
    config_.inFlightMaxMs = 1'000;
    config_.devicePlugin.enabled = true;
    config_.devicePlugin.dir = sockets_.path();
    config_.devicePlugin.watchMs = 50;
    timings_.backoffInitialMs = 20;
    timings_.backoffMaxMs = 200;
    timings_.drainPollMs = 10;
    timings_.lingerMs = 20;
  }
  void TearDown() override {
    agent_.reset();
    host_.reset();
  }

  void startAgent() {
    std::vector<std::string> warnings;
    auto gpus = openGpuSource(config_, catalog_, config_.nodeName, warnings);
    ASSERT_TRUE(gpus) << gpus.error().message;
    gpus_ = std::make_unique<SwitchableGpus>(std::move(*gpus));
    auto client = ControlClient::create({config_.server, kPluginHostToken, std::nullopt, 5});
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
    DevicePluginHostOptions o;
    o.config = config_.devicePlugin;
    o.nodeName = config_.nodeName;
    o.server = config_.server;
    o.token = kPluginHostToken;
    host_ = std::make_unique<DevicePluginHost>(std::move(o));
    AgentParts parts;
    parts.gpus = gpus_.get();
    parts.client = client_.get();
    parts.log = &log_;
    parts.components = {host_.get()};
    agent_ = std::make_unique<Agent>(config_, parts, timings_);
    auto port = agent_->start();
    ASSERT_TRUE(port) << port.error().message;
  }

  struct Reply {
    int status = 0;
    json body;
  };
  Reply call(const std::string& method, const std::string& path, const json& body = nullptr) {
    httplib::Client c("127.0.0.1", server_.port());
    c.set_connection_timeout(5);
    c.set_read_timeout(10);
    const httplib::Headers auth{{"Authorization", std::string("Bearer ") + kPluginHostToken}};
    auto r =
        method == "GET" ? c.Get(path, auth) : c.Post(path, auth, body.dump(), "application/json");
    if (!r) return {};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // kube-scheduler's filter and bind for a pod asking one shared GPU; bind's Error.
  std::string schedule(const std::string& name) {
    const json requests = {{"tessera.io/gpus", "1"},
                           {"tessera.io/gpu-memory", "8192"},
                           {"tessera.io/gpu-compute", "250"}};
    const json pod = {
        {"metadata", {{"name", name}, {"namespace", "serving"}, {"uid", "uid-" + name}}},
        {"spec",
         {{"containers",
           json::array({{{"name", "engine"}, {"resources", {{"requests", requests}}}}})}}}};
    const Reply f =
        call("POST", "/scheduler/filter", {{"Pod", pod}, {"NodeNames", {config_.nodeName}}});
    EXPECT_EQ(f.status, 200) << f.body.dump();
    const Reply b = call("POST", "/scheduler/bind",
                         {{"PodName", name},
                          {"PodNamespace", "serving"},
                          {"PodUID", "uid-" + name},
                          {"Node", config_.nodeName}});
    EXPECT_EQ(b.status, 200) << b.body.dump();
    return b.body.value("Error", std::string("no answer"));
  }

  deviceplugin::testing::SocketDir sockets_;
  ControlPlaneServer server_{kPluginHostToken};
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  std::ostringstream logText_;
  api::Logger log_{api::LogFormat::kText, logText_};
  AgentConfig config_;
  AgentTimings timings_;
  std::unique_ptr<SwitchableGpus> gpus_;
  std::unique_ptr<ControlClient> client_;
  std::unique_ptr<DevicePluginHost> host_;
  std::unique_ptr<Agent> agent_;
};

std::map<std::string, std::string> deviceHealth(const ::v1beta1::ListAndWatchResponse& r) {
  std::map<std::string, std::string> out;
  for (const auto& d : r.devices()) out[d.id()] = d.health();
  return out;
}

TEST_F(DevicePluginHostTest, RegistersAdvertisesSlotsAndHandsOutTheControlPlanesBooking) {
  deviceplugin::testing::FakeKubelet kubelet(sockets_.path());
  ASSERT_TRUE(kubelet.serving());
  startAgent();

  // kubelet hears of tessera.io/gpus on the plugin's socket.
  ASSERT_TRUE(deviceplugin::testing::eventually([&] { return !kubelet.requests().empty(); }));
  const auto reg = kubelet.requests().front();
  EXPECT_EQ(reg.version(), "v1beta1");
  EXPECT_EQ(reg.resource_name(), "tessera.io/gpus");
  ASSERT_EQ(host_->plugins().size(), 1u);
  EXPECT_EQ(reg.endpoint(), host_->plugins()[0]->endpoint());
  const std::string socket = host_->plugins()[0]->socketPath();
  EXPECT_EQ(socket.rfind(sockets_.path(), 0), 0u) << socket;

  // ListAndWatch: 2 virtual GPUs x 4 slots, all healthy.
  auto stub = deviceplugin::testing::pluginClient(socket);
  grpc::ClientContext watchCtx;
  watchCtx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->ListAndWatch(&watchCtx, ::v1beta1::Empty());
  ::v1beta1::ListAndWatchResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  auto health = deviceHealth(listed);
  ASSERT_EQ(health.size(), 8u);
  for (int g = 0; g < 2; ++g) {
    for (int s = 0; s < 4; ++s) {
      const std::string id = deviceplugin::slotId(std::to_string(g), s);
      ASSERT_TRUE(health.contains(id)) << id;
      EXPECT_EQ(health[id], "Healthy");
    }
  }

  // A pod booked through the control plane (the extender's filter and bind).
  ASSERT_TRUE(testing::eventually([&] { return !server_.node(config_.nodeName).is_null(); }));
  ASSERT_EQ(schedule("chat"), "");
  const Reply replica = call("GET", "/api/v1/replicas/serving/chat");
  ASSERT_EQ(replica.status, 200) << replica.body.dump();
  const std::string bookedGpu = replica.body["gpus"][0]["id"].get<std::string>();
  Reply pending = call("GET", "/api/v1/nodes/node-dp/allocations");
  ASSERT_EQ(pending.status, 200);
  ASSERT_EQ(pending.body["allocations"].size(), 1u);
  EXPECT_EQ(pending.body["allocations"][0]["confirmed"], false);

  // kubelet admits the container: preferred slots on the booked GPU, then Allocate.
  ::v1beta1::PreferredAllocationRequest preq;
  auto* c = preq.add_container_requests();
  for (const auto& [id, _] : health) c->add_available_deviceids(id);
  c->set_allocation_size(1);
  ::v1beta1::PreferredAllocationResponse pres;
  grpc::ClientContext pctx;
  ASSERT_TRUE(stub->GetPreferredAllocation(&pctx, preq, &pres).ok());
  ASSERT_EQ(pres.container_responses_size(), 1);
  ASSERT_EQ(pres.container_responses(0).deviceids_size(), 1);
  const std::string slot = pres.container_responses(0).deviceids(0);
  EXPECT_EQ(deviceplugin::gpuOfSlot(slot), bookedGpu);

  ::v1beta1::AllocateRequest areq;
  areq.add_container_requests()->add_devices_ids(slot);
  ::v1beta1::AllocateResponse ares;
  grpc::ClientContext actx;
  const grpc::Status allocated = stub->Allocate(&actx, areq, &ares);
  ASSERT_TRUE(allocated.ok()) << allocated.error_message();
  ASSERT_EQ(ares.container_responses_size(), 1);
  const auto& envs = ares.container_responses(0).envs();
  ASSERT_TRUE(envs.contains("TESSERA_REPLICA_ID"));
  EXPECT_EQ(envs.at("TESSERA_REPLICA_ID"), "serving/chat");
  // A virtual GPU has no UUID: the plugin names it by index, which is its id here.
  ASSERT_TRUE(envs.contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(envs.at("CUDA_VISIBLE_DEVICES"), bookedGpu);
  EXPECT_EQ(envs.at("TESSERA_SHARING_MODE"), "shared");
  EXPECT_EQ(envs.at("TESSERA_GPU_MEMORY_LIMIT_MIB"),
            std::to_string(replica.body["gpus"][0]["reservedMib"].get<std::int64_t>()));
  // Virtual GPUs have no device nodes, and there are no control nodes without a driver.
  EXPECT_EQ(ares.container_responses(0).devices_size(), 0);

  // The control plane has the allocation confirmed.
  ASSERT_TRUE(testing::eventually([&] {
    const Reply r = call("GET", "/api/v1/nodes/node-dp/allocations");
    return r.status == 200 && r.body["allocations"].size() == 1 &&
           r.body["allocations"][0]["confirmed"] == true;
  }));

  // Discovery says GPU 1 turned unhealthy: its slots follow in ListAndWatch.
  gpus_->sick_ = true;
  bool seen = false;
  while (!seen && stream->Read(&listed)) {
    health = deviceHealth(listed);
    seen = health[deviceplugin::slotId("1", 0)] == "Unhealthy";
  }
  ASSERT_TRUE(seen);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(health[deviceplugin::slotId("1", s)], "Unhealthy");
    EXPECT_EQ(health[deviceplugin::slotId("0", s)], "Healthy");
  }
  const json status = agent_->status();
  ASSERT_TRUE(status.contains("devicePlugin")) << status.dump();
  EXPECT_EQ(status["devicePlugin"]["state"], "serving");
  EXPECT_EQ(status["devicePlugin"]["resources"][0]["resource"], "tessera.io/gpus");
  EXPECT_EQ(status["devicePlugin"]["resources"][0]["gpus"][1]["healthy"], false);

  // The drain stops the plugin: its socket goes, and the drain log says so.
  agent_->drain("test");
  EXPECT_EQ(agent_->wait(), 0);
  EXPECT_FALSE(std::filesystem::exists(socket));
  const json drained = agent_->status();
  bool noted = false;
  for (const auto& step : drained["drain"]["steps"]) {
    noted = noted || step.get<std::string>().find("device plugin stopped") != std::string::npos;
  }
  EXPECT_TRUE(noted) << drained.dump();
  EXPECT_EQ(drained["devicePlugin"]["state"], "stopped");
  watchCtx.TryCancel();
}

TEST_F(DevicePluginHostTest, BothResourcesRegisterAndTheWholeGpuOneHasOneDevicePerGpu) {
  config_.devicePlugin.resources = {"tessera.io/gpus", "nvidia.com/gpu"};
  deviceplugin::testing::FakeKubelet kubelet(sockets_.path());
  startAgent();
  ASSERT_TRUE(deviceplugin::testing::eventually([&] { return kubelet.requests().size() >= 2; }));
  std::set<std::string> names;
  for (const auto& r : kubelet.requests()) names.insert(r.resource_name());
  EXPECT_EQ(names, (std::set<std::string>{"tessera.io/gpus", "nvidia.com/gpu"}));
  ASSERT_EQ(host_->plugins().size(), 2u);
  auto stub = deviceplugin::testing::pluginClient(host_->plugins()[1]->socketPath());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->ListAndWatch(&ctx, ::v1beta1::Empty());
  ::v1beta1::ListAndWatchResponse listed;
  ASSERT_TRUE(stream->Read(&listed));
  EXPECT_EQ(listed.devices_size(), 2);
  ctx.TryCancel();
}

TEST_F(DevicePluginHostTest, KubeletStartingLaterStillGetsTheRegistration) {
  startAgent();  // no kubelet.sock yet: the agent starts anyway
  deviceplugin::testing::FakeKubelet kubelet(sockets_.path());
  ASSERT_TRUE(deviceplugin::testing::eventually([&] { return !kubelet.requests().empty(); }));
  EXPECT_EQ(kubelet.requests().front().resource_name(), "tessera.io/gpus");
}

TEST_F(DevicePluginHostTest, AMissingDirectoryFailsTheStartNamingIt) {
  config_.devicePlugin.dir = sockets_.path() + "/absent";
  std::vector<std::string> warnings;
  auto gpus = openGpuSource(config_, catalog_, config_.nodeName, warnings);
  ASSERT_TRUE(gpus);
  auto client = ControlClient::create({config_.server, kPluginHostToken, std::nullopt, 5});
  ASSERT_TRUE(client);
  DevicePluginHostOptions o;
  o.config = config_.devicePlugin;
  o.nodeName = config_.nodeName;
  o.server = config_.server;
  DevicePluginHost host(o);
  AgentParts parts;
  parts.gpus = gpus->get();
  parts.client = client->get();
  parts.log = &log_;
  parts.components = {&host};
  Agent agent(config_, parts, timings_);
  auto port = agent.start();
  ASSERT_FALSE(port);
  EXPECT_NE(port.error().message.find("absent"), std::string::npos) << port.error().message;
}

TEST(DevicePluginHost, BestEffortRunsWithoutThePluginAndSaysWhy) {
  deviceplugin::testing::SocketDir dir;
  DevicePluginHostOptions o;
  o.config.dir = dir.path() + "/gone";
  o.nodeName = "n";
  o.server = "http://127.0.0.1:1";
  o.bestEffort = true;
  std::vector<std::string> logged;
  o.log = [&](const std::string& line) { logged.push_back(line); };
  DevicePluginHost host(o);
  AgentGpu g;
  g.id = "0";
  g.isVirtual = true;
  ASSERT_TRUE(host.start({g}));
  EXPECT_TRUE(host.plugins().empty());
  const json s = host.status();
  EXPECT_EQ(s["state"], "not started");
  EXPECT_NE(s["error"].get<std::string>().find("/gone"), std::string::npos) << s.dump();
  ASSERT_FALSE(logged.empty());
  EXPECT_NE(logged.back().find("running without it"), std::string::npos) << logged.back();
  EXPECT_TRUE(host.drain(0).empty());
}

TEST(DevicePluginWanted, AutoFollowsTheDirectoryAndExplicitWins) {
  deviceplugin::testing::SocketDir dir;
  DevicePluginConfig c;
  c.dir = dir.path();
  EXPECT_TRUE(devicePluginWanted(c));
  c.dir = dir.path() + "/missing";
  EXPECT_FALSE(devicePluginWanted(c));
  c.enabled = true;
  EXPECT_TRUE(devicePluginWanted(c));
  c.dir = dir.path();
  c.enabled = false;
  EXPECT_FALSE(devicePluginWanted(c));
}

TEST(InventoryFromGpus, RealCardsGetUuidsDeviceNodesAndMigVirtualOnesNeither) {
  AgentGpu real;
  real.id = "3";
  real.uuid = "GPU-abc";
  real.type = "A100-80GB";
  real.memoryMib = 81920;
  real.numaNode = 1;
  real.nvlinkGroup = 2;
  real.healthy = false;
  real.migEnabled = true;
  real.migProfiles = {"1g.10gb", "3g.40gb"};
  real.migUuids = {"MIG-1", "MIG-2"};
  real.migStarts = {6, -1};  // the second one's start unknown (an older driver)
  AgentGpu virt;
  virt.id = "0";
  virt.uuid = "virtual-n-0";
  virt.type = "L4";
  virt.isVirtual = true;
  virt.memoryMib = 23034;

  const auto inv = inventoryFromGpus({real, virt}, {"/dev/nvidiactl"});
  ASSERT_EQ(inv.gpus.size(), 2u);
  const auto& r = inv.gpus[0];
  EXPECT_EQ(r.id, "3");
  EXPECT_EQ(r.index, 3);
  EXPECT_EQ(r.uuid, "GPU-abc");
  EXPECT_EQ(r.type, "A100-80GB");
  EXPECT_EQ(r.memoryMib, 81920);
  EXPECT_EQ(r.numaNode, 1);
  EXPECT_EQ(r.nvlinkGroup, 2);
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.deviceNodes, std::vector<std::string>{"/dev/nvidia3"});
  ASSERT_EQ(r.migDevices.size(), 2u);
  EXPECT_EQ(r.migDevices[1].uuid, "MIG-2");
  EXPECT_EQ(r.migDevices[1].profile, "3g.40gb");
  EXPECT_EQ(r.migDevices[0].startSlot, 6);  // as NVML placed it (issue 14, item 15)
  EXPECT_EQ(r.migDevices[1].startSlot, -1);
  const auto& v = inv.gpus[1];
  EXPECT_EQ(v.uuid, "");
  EXPECT_TRUE(v.deviceNodes.empty());
  EXPECT_EQ(v.index, 0);
  EXPECT_EQ(inv.controlDeviceNodes, std::vector<std::string>{"/dev/nvidiactl"});

  // Virtual GPUs only: no control device nodes either.
  EXPECT_TRUE(inventoryFromGpus({virt}, {"/dev/nvidiactl"}).controlDeviceNodes.empty());
}

}  // namespace
}  // namespace tessera::agent
