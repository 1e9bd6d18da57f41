// The hand-off end to end: the real control plane (HTTP server on a loopback port, SQLite
// store) books pods through the extender's bind; the device plugin, played by a gRPC client
// as kubelet, reads the node's bookings over HTTP, gives each container its GPUs and
// confirms; the confirmations survive a restart of the control plane.

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/control_plane.h"
#include "api/http_server.h"
#include "deviceplugin/plugin.h"
#include "deviceplugin/test_support.h"
#include "model/gpu_catalog.h"
#include "store/store.h"
#include "store/testing/temp_dir.h"

namespace tessera::deviceplugin {
namespace {

using nlohmann::json;
using testing::FakeKubelet;
using testing::SocketDir;

constexpr const char* kToken = "hand-off-token";

json pod(const std::string& name, const std::string& memoryMib, const std::string& computeMilli) {
  json requests = {{"tessera.io/gpus", "1"},
                   {"tessera.io/gpu-memory", memoryMib},
                   {"tessera.io/gpu-compute", computeMilli}};
  return {{"metadata", {{"name", name}, {"namespace", "serving"}, {"uid", "uid-" + name}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "engine"}, {"resources", {{"requests", requests}}}}})}}}};
}

class HandOffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(sockets_.path().empty());
    openPlane();
    for (const char* name : {"gpu-node-1", "gpu-node-2"}) {
      const json body = {{"name", name},
                         {"cpu", 64},
                         {"hostMemory", "512Gi"},
                         {"gpus", json::array({{{"type", "A100-80GB"}}, {{"type", "A100-80GB"}}})}};
      ASSERT_EQ(post("/api/v1/nodes", body).status, 201);
    }
    kubelet_ = std::make_unique<FakeKubelet>(sockets_.path());
  }
  void TearDown() override {
    if (plugin_) plugin_->stop();
    if (server_) server_->stop();
  }

  void openPlane() {
    auto s = store::Store::open(storeDir_.file("state.db"));
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(*s);
    auto plane = api::ControlPlane::create(catalog_, clock_, {}, store_.get());
    ASSERT_TRUE(plane) << plane.error().message;
    plane_ = std::move(*plane);
    api::ServerConfig config;
    config.port = 0;
    config.token = kToken;
    config.threads = 2;
    server_ = std::make_unique<api::HttpServer>(*plane_, config);
    auto port = server_->start();
    ASSERT_TRUE(port) << port.error().message;
    port_ = *port;
    http_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }
  void closePlane() {
    server_->stop();
    server_.reset();
    plane_.reset();
    store_.reset();
  }

  struct Reply {
    int status = 0;
    json body;
  };
  Reply post(const std::string& path, const json& body) {
    auto r = http_->Post(path, {{"Authorization", std::string("Bearer ") + kToken}}, body.dump(),
                         "application/json");
    if (!r) return {};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  Reply get(const std::string& path) {
    auto r = http_->Get(path);
    if (!r) return {};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // kube-scheduler's filter then bind; returns bind's `Error` ("" when bound).
  std::string schedule(const json& p, const std::string& node) {
    const Reply f = post("/scheduler/filter", {{"Pod", p}, {"NodeNames", {node}}});
    EXPECT_EQ(f.status, 200);
    const Reply b = post("/scheduler/bind", {{"PodName", p["metadata"]["name"]},
                                             {"PodNamespace", "serving"},
                                             {"PodUID", p["metadata"]["uid"]},
                                             {"Node", node}});
    EXPECT_EQ(b.status, 200);
    return b.body.value("Error", std::string("no answer"));
  }
  std::string gpuOf(const std::string& replica) {
    const Reply r = get("/api/v1/replicas/" + replica);
    EXPECT_EQ(r.status, 200);
    return r.body["gpus"][0]["id"].get<std::string>();
  }

  // The node agent's inventory: the registered GPU ids, with UUIDs.
  static Inventory inventory() {
    Inventory inv;
    for (int i = 0; i < 2; ++i) {
      GpuDevice g;
      g.id = std::to_string(i);
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i) + "0000000-1111-2222-3333-444444444444";
      g.memoryMib = 81920;
      inv.gpus.push_back(g);
    }
    return inv;
  }
  void startPlugin(const std::string& node, const std::string& podResourcesSocket = "") {
    ControlPlaneBookingsConfig cp;
    cp.url = "http://127.0.0.1:" + std::to_string(port_);
    cp.node = node;
    cp.token = kToken;
    source_ = controlPlaneBookings(cp);
    PluginConfig config;
    config.directory = sockets_.path();
    config.nodeName = node;
    config.slotsPerGpu = 4;
    config.watchInterval = std::chrono::milliseconds(50);
    config.podResourcesSocket = podResourcesSocket;
    plugin_ = std::make_unique<DevicePlugin>(config, *source_, inventory());
    ASSERT_TRUE(plugin_->start());
    client_ = testing::pluginClient(plugin_->socketPath());
  }
  // Kubelet admitting one container of one GPU slot from everything.
  v1beta1::ContainerAllocateResponse admit(grpc::Status& status, std::vector<std::string>& ids) {
    v1beta1::PreferredAllocationRequest preq;
    auto* c = preq.add_container_requests();
    for (int g = 0; g < 2; ++g) {
      for (int s = 0; s < 4; ++s) c->add_available_deviceids(slotId(std::to_string(g), s));
    }
    c->set_allocation_size(1);
    v1beta1::PreferredAllocationResponse pres;
    grpc::ClientContext pctx;
    EXPECT_TRUE(client_->GetPreferredAllocation(&pctx, preq, &pres).ok());
    v1beta1::AllocateRequest areq;
    ids.assign(pres.container_responses(0).deviceids().begin(),
               pres.container_responses(0).deviceids().end());
    for (const std::string& id : ids) areq.add_container_requests()->add_devices_ids(id);
    v1beta1::AllocateResponse ares;
    grpc::ClientContext actx;
    status = client_->Allocate(&actx, areq, &ares);
    return status.ok() ? ares.container_responses(0) : v1beta1::ContainerAllocateResponse();
  }

  SocketDir sockets_;
  store::testing::TempDir storeDir_;
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{1000};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<api::ControlPlane> plane_;
  std::unique_ptr<api::HttpServer> server_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> http_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<BookingSource> source_;
  std::unique_ptr<DevicePlugin> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> client_;
};

TEST_F(HandOffTest, PodsBookedTogetherGetTheirOwnGpusAndTheConfirmationsPersist) {
  // Two pods of one GPU each but different shares, scheduled together onto one node: the
  // second waits (a retryable bind error) until the plugin confirms the first.
  const json a = pod("a", "20480", "500");
  const json b = pod("b", "8192", "250");
  ASSERT_EQ(schedule(a, "gpu-node-1"), "");
  const std::string refused = schedule(b, "gpu-node-1");
  EXPECT_NE(refused.find("retry"), std::string::npos) << refused;
  EXPECT_EQ(get("/api/v1/replicas/serving/b").status, 404);  // nothing booked

  Reply pending = get("/api/v1/nodes/gpu-node-1/allocations");
  ASSERT_EQ(pending.status, 200);
  ASSERT_EQ(pending.body["allocations"].size(), 1u);
  const json& first = pending.body["allocations"][0];
  EXPECT_EQ(first["replica"], "serving/a");
  EXPECT_EQ(first["resource"], "tessera.io/gpus");
  EXPECT_EQ(first["mode"], "shared");
  EXPECT_EQ(first["confirmed"], false);
  EXPECT_EQ(first["gpus"][0]["reservedMib"], 24576);

  startPlugin("gpu-node-1");
  ASSERT_TRUE(testing::eventually([&] { return !kubelet_->requests().empty(); }));
  grpc::Status status;
  std::vector<std::string> idsA;
  auto envA = admit(status, idsA);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string gpuA = gpuOf("serving/a");
  EXPECT_EQ(envA.envs().at("TESSERA_REPLICA_ID"), "serving/a");
  EXPECT_EQ(envA.envs().at("NVIDIA_VISIBLE_DEVICES"), inventory().gpus[std::stoi(gpuA)].uuid);
  EXPECT_EQ(envA.envs().at("TESSERA_GPU_MEMORY_LIMIT_MIB"), "24576");
  ASSERT_EQ(idsA.size(), 1u);
  EXPECT_EQ(gpuOfSlot(idsA[0]), gpuA);

  pending = get("/api/v1/nodes/gpu-node-1/allocations");
  ASSERT_EQ(pending.body["allocations"].size(), 1u);
  EXPECT_EQ(pending.body["allocations"][0]["confirmed"], true);
  EXPECT_EQ(pending.body["allocations"][0]["devices"], json(idsA));

  // Confirmed: b may join the node now.
  ASSERT_EQ(schedule(b, "gpu-node-1"), "");
  std::vector<std::string> idsB;
  auto envB = admit(status, idsB);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(envB.envs().at("TESSERA_REPLICA_ID"), "serving/b");
  EXPECT_EQ(envB.envs().at("NVIDIA_VISIBLE_DEVICES"),
            inventory().gpus[std::stoi(gpuOf("serving/b"))].uuid);
  EXPECT_EQ(envB.envs().at("TESSERA_GPU_MEMORY_LIMIT_MIB"), "9831");  // 8192 x 1.2

  // A third container finds no booking: kubelet fails its admission with this.
  std::vector<std::string> idsC;
  admit(status, idsC);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // The confirmations are in the store: a restarted control plane still has them.
  plugin_->stop();
  closePlane();
  openPlane();
  pending = get("/api/v1/nodes/gpu-node-1/allocations");
  ASSERT_EQ(pending.status, 200);
  ASSERT_EQ(pending.body["allocations"].size(), 2u);
  for (const json& x : pending.body["allocations"]) {
    EXPECT_EQ(x["confirmed"], true) << x.dump();
    EXPECT_EQ(x["devices"].size(), 1u) << x.dump();
  }
}

TEST_F(HandOffTest, ConfirmationErrorsAndTwinsSwappingGpus) {
  // Twins: same size and share (600 milli each, so on two different GPUs).
  ASSERT_EQ(schedule(pod("c", "10240", "600"), "gpu-node-2"), "");
  ASSERT_EQ(schedule(pod("d", "10240", "600"), "gpu-node-2"), "");
  const std::string gpuC = gpuOf("serving/c");
  const std::string gpuD = gpuOf("serving/d");
  ASSERT_NE(gpuC, gpuD);

  const std::string path = "/api/v1/nodes/gpu-node-2/allocations";
  EXPECT_EQ(post("/api/v1/nodes/nope/allocations", {{"replica", "serving/c"}}).status, 404);
  EXPECT_EQ(post(path, {{"replica", "serving/zz"}}).status, 404);
  EXPECT_EQ(post(path, {{"replica", 7}}).status, 400);
  EXPECT_EQ(post(path, {{"replica", "serving/c"}, {"extra", 1}}).status, 400);
  EXPECT_EQ(post("/api/v1/nodes/gpu-node-1/allocations", {{"replica", "serving/c"}}).status,
            409);  // booked on another node
  // A replica placed through the API, not a pod: nothing for a device plugin to confirm.
  ASSERT_EQ(post("/api/v1/models", {{"name", "x"}, {"weights", "1Gi"}}).status, 200);
  ASSERT_EQ(post("/api/v1/replicas", {{"replicaId", "standalone/x"}, {"model", "x"}}).status, 201);
  const Reply notPod =
      post("/api/v1/nodes/" + get("/api/v1/replicas/standalone/x").body["node"].get<std::string>() +
               "/allocations",
           {{"replica", "standalone/x"}});
  EXPECT_EQ(notPod.status, 409);
  // GPUs no twin holds: refused.
  EXPECT_EQ(post(path, {{"replica", "serving/c"}, {"gpus", {"7"}}}).status, 409);

  // The plugin handed c's booking (on gpuC) to pod d: d confirms gpuC, and the books swap.
  const Reply swapped =
      post(path, {{"replica", "serving/d"}, {"devices", {slotId(gpuC, 0)}}, {"gpus", {gpuC}}});
  ASSERT_EQ(swapped.status, 200) << swapped.body.dump();
  EXPECT_EQ(swapped.body["swappedWith"], "serving/c");
  EXPECT_EQ(gpuOf("serving/d"), gpuC);
  EXPECT_EQ(gpuOf("serving/c"), gpuD);
  const Reply plain =
      post(path, {{"replica", "serving/c"}, {"devices", {slotId(gpuD, 0)}}, {"gpus", {gpuD}}});
  ASSERT_EQ(plain.status, 200) << plain.body.dump();
  EXPECT_FALSE(plain.body.contains("swappedWith"));
  const Reply all = get(path);
  for (const json& x : all.body["allocations"]) EXPECT_EQ(x["confirmed"], true);
}

// Twins may swap at Allocate: kubelet admits pod d's container first and the plugin hands it
// the oldest pending booking, c's (TESSERA_REPLICA_ID=serving/c), then c gets d's. Kubelet's
// PodResources (a fake kubelet serving the v1 API) shows who really holds which devices; the
// plugin confirms again for the pod that holds them and the control plane swaps the two
// bookings, so each pod's booking names the GPU it runs on, and survives a restart.
TEST_F(HandOffTest, PodResourcesCorrectsTheBooksWhenTwinsSwapped) {
  ASSERT_EQ(schedule(pod("c", "10240", "600"), "gpu-node-2"), "");
  clock_.advance(10);
  ASSERT_EQ(schedule(pod("d", "10240", "600"), "gpu-node-2"), "");
  const std::string gpuC = gpuOf("serving/c");
  const std::string gpuD = gpuOf("serving/d");
  ASSERT_NE(gpuC, gpuD);
  testing::FakePodResources podResources(sockets_.path() + "/pod-resources.sock");
  startPlugin("gpu-node-2", sockets_.path() + "/pod-resources.sock");
  grpc::Status status;
  std::vector<std::string> first, second;
  const auto envFirst = admit(status, first);  // kubelet is admitting pod d here
  ASSERT_TRUE(status.ok()) << status.error_message();
  const auto envSecond = admit(status, second);  // and pod c here
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(envFirst.envs().at("TESSERA_REPLICA_ID"), "serving/c");  // the oldest booking
  ASSERT_EQ(gpuOfSlot(first[0]), gpuC);
  ASSERT_EQ(gpuOfSlot(second[0]), gpuD);

  // Nothing to correct while PodResources agrees with the books.
  podResources.set({{"serving/c", "tessera.io/gpus", first}, {"serving/d", "tessera.io/gpus", second}});
  ASSERT_TRUE(plugin_->checkPodResources());
  EXPECT_EQ(plugin_->corrections(), 0);
  EXPECT_EQ(gpuOf("serving/c"), gpuC);

  // What kubelet really did: d holds the first devices, c the second.
  podResources.set({{"serving/d", "tessera.io/gpus", first},
                    {"serving/c", "tessera.io/gpus", second},
                    {"other/pod", "nvidia.com/gpu", {"GPU-x"}}});
  ASSERT_TRUE(plugin_->checkPodResources());
  EXPECT_EQ(plugin_->corrections(), 1);
  EXPECT_EQ(gpuOf("serving/d"), gpuC);
  EXPECT_EQ(gpuOf("serving/c"), gpuD);
  std::map<std::string, json> byReplica;
  const Reply listed = get("/api/v1/nodes/gpu-node-2/allocations");  // named: a temporary dies
  for (const json& x : listed.body["allocations"]) {
    byReplica[x["replica"].get<std::string>()] = x;
  }
  EXPECT_EQ(byReplica["serving/d"]["devices"], json(first));
  EXPECT_EQ(byReplica["serving/c"]["devices"], json(second));
  EXPECT_EQ(byReplica["serving/c"]["confirmed"], true);
  // Settled: the watch thread's next reads change nothing.
  const int lists = podResources.lists();
  ASSERT_TRUE(testing::eventually([&] { return podResources.lists() > lists + 1; }));
  EXPECT_EQ(plugin_->corrections(), 1);
  EXPECT_EQ(gpuOf("serving/d"), gpuC);

  // The corrected books are the stored ones.
  plugin_->stop();
  closePlane();
  openPlane();
  EXPECT_EQ(gpuOf("serving/d"), gpuC);
  EXPECT_EQ(gpuOf("serving/c"), gpuD);
}

// Kubelet not answering PodResources is an error naming the socket, and changes nothing.
TEST_F(HandOffTest, PodResourcesUnreachableIsNamed) {
  ASSERT_EQ(schedule(pod("e", "10240", "600"), "gpu-node-2"), "");
  startPlugin("gpu-node-2", sockets_.path() + "/no-such.sock");
  auto checked = plugin_->checkPodResources();
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().message.find("no-such.sock"), std::string::npos)
      << checked.error().message;
  EXPECT_EQ(plugin_->corrections(), 0);
}

}  // namespace
}  // namespace tessera::deviceplugin
