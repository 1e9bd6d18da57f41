// The DRA driver against a fake kubelet over real unix sockets (dra/testing/fake_kubelet.h:
// messages from kubelet's own definitions when ../shared has them), reading claims from the
// test API server through the real Kubernetes client.

#include "dra/driver.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "deviceplugin/test_support.h"
#include "dra/testing/fake_kubelet.h"
#include "k8s/kube_client.h"
#include "k8s/testing/fake_apiserver.h"

namespace tessera::dra {
namespace {

using deviceplugin::testing::eventually;
using deviceplugin::testing::SocketDir;
using json = nlohmann::json;

deviceplugin::Inventory twoGpus() {
  deviceplugin::Inventory inv;
  for (int i = 0; i < 2; ++i) {
    deviceplugin::GpuDevice g;
    g.id = std::to_string(i);
    g.index = i;
    g.uuid = "GPU-" + std::to_string(1000 + i);
    g.type = "H100-80GB";
    g.memoryMib = 81920;
    g.deviceNodes = {"/dev/nvidia" + std::to_string(i)};
    g.mps = i == 1;
    inv.gpus.push_back(g);
  }
  inv.controlDeviceNodes = {"/dev/nvidiactl"};
  return inv;
}

// A claim as kube-scheduler leaves it: allocated from node-a's pool, reserved for one pod.
json allocatedClaim(const std::string& name, const std::string& device, const std::string& pool,
                    json consumed = json(), std::string shareId = "") {
  json result = {
      {"request", "gpu"}, {"driver", "gpu.tessera.io"}, {"pool", pool}, {"device", device}};
  if (!consumed.is_null()) result["consumedCapacity"] = consumed;
  if (!shareId.empty()) result["shareID"] = shareId;
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", "serving"}}},
          {"spec", {{"devices", {{"requests", json::array({{{"name", "gpu"}}})}}}}},
          {"status",
           {{"allocation", {{"devices", {{"results", json::array({result})}}}}},
            {"reservedFor",
             json::array({{{"resource", "pods"}, {"name", name + "-pod"}, {"uid", "p1"}}})}}}};
}

class DraDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_TRUE(api_.start());
    k8s::KubeConfig kc;
    kc.server = api_.url();
    auto client = k8s::KubeClient::create(kc);
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
    claims_ = apiServerClaims(*client_);
    DriverConfig c;
    c.nodeName = "node-a";
    c.registryDir = dir_.file("registry");
    c.pluginDir = dir_.file("plugins");
    c.cdiDir = dir_.file("cdi");
    c.watchInterval = std::chrono::milliseconds(20);
    c.healthResendInterval = std::chrono::milliseconds(50);
    config_ = c;
    driver_ = std::make_unique<Driver>(c, *claims_, twoGpus());
    ASSERT_TRUE(driver_->start());
  }

  // Replaces the driver with one whose configuration `change` altered.
  void restartDriver(const std::function<void(DriverConfig&)>& change) {
    driver_.reset();
    change(config_);
    driver_ = std::make_unique<Driver>(config_, *claims_, twoGpus());
    ASSERT_TRUE(driver_->start());
  }

  // Stores a claim (created, then its status written as kube-scheduler does); its uid.
  std::string store(json claim) {
    const json status = claim["status"];
    claim.erase("status");
    auto made = api_.create("resourceclaims", claim);
    EXPECT_TRUE(made) << made.error().message;
    json next = *made;
    next["status"] = status;
    auto done = api_.updateStatus("resourceclaims", next);
    EXPECT_TRUE(done) << done.error().message;
    return (*made)["metadata"]["uid"].get<std::string>();
  }

  json cdiFile(const std::string& uid) {
    std::ifstream f(cdiSpecPath(dir_.file("cdi"), "gpu.tessera.io", uid));
    if (!f) return json();
    return json::parse(f, nullptr, false);
  }

  DriverConfig config_;
  SocketDir dir_;
  k8s::testing::FakeApiServer api_;
  std::unique_ptr<k8s::KubeClient> client_;
  std::unique_ptr<ClaimSource> claims_;
  std::unique_ptr<Driver> driver_;
  testing::FakeKubelet kubelet_;
};

TEST_F(DraDriverTest, RegistersWithThePluginWatcher) {
  if (!kubelet_.fromUpstream())
    std::cout << "fake kubelet on the repository's definitions (no ../shared)\n";
  auto info = kubelet_.registerPlugin(driver_->registrationSocket());
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ((*info)["type"], "DRAPlugin");
  EXPECT_EQ((*info)["name"], "gpu.tessera.io");
  EXPECT_EQ((*info)["endpoint"], driver_->pluginSocket());
  EXPECT_EQ((*info)["supported_versions"],
            json::array({"v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"}));
  EXPECT_EQ(driver_->registrations(), 1);
  EXPECT_EQ(driver_->registrationSocket(), dir_.file("registry") + "/gpu.tessera.io-reg.sock");
  EXPECT_EQ(driver_->pluginSocket(), dir_.file("plugins") + "/gpu.tessera.io/dra.sock");
}

TEST_F(DraDriverTest, PreparesASharedClaimIntoACdiSpecWithTheDevicePluginsLimits) {
  const std::string uid = store(allocatedClaim(
      "chat", "gpu-1", "node-a", {{"memory", "20Gi"}, {"compute", "250"}}, "share-7"));
  ASSERT_TRUE(kubelet_.registerPlugin(driver_->registrationSocket()));
  auto r = kubelet_.prepare(driver_->pluginSocket(), {{"serving", uid, "chat"}});
  ASSERT_TRUE(r) << r.error().message;
  const json& answer = (*r)["claims"][uid];
  ASSERT_FALSE(answer.contains("error")) << answer.dump();
  ASSERT_EQ(answer["devices"].size(), 1u) << answer.dump();
  const json& d = answer["devices"][0];
  EXPECT_EQ(d["pool_name"], "node-a");
  EXPECT_EQ(d["device_name"], "gpu-1");
  EXPECT_EQ(d["request_names"], json::array({"gpu"}));
  EXPECT_EQ(d["share_id"], "share-7");
  EXPECT_EQ(d["cdi_device_ids"], json::array({"gpu.tessera.io/claim=" + uid + "-gpu"}));

  const json spec = cdiFile(uid);
  ASSERT_TRUE(spec.is_object()) << "no CDI spec for " << uid;
  EXPECT_EQ(spec["kind"], "gpu.tessera.io/claim");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], uid + "-gpu");
  const json edits = spec["devices"][0]["containerEdits"];
  std::set<std::string> env(edits["env"].begin(), edits["env"].end());
  EXPECT_TRUE(env.contains("NVIDIA_VISIBLE_DEVICES=GPU-1001")) << edits.dump();
  EXPECT_TRUE(env.contains("TESSERA_GPU_MEMORY_LIMIT_MIB=20480")) << edits.dump();
  EXPECT_TRUE(env.contains("TESSERA_GPU_COMPUTE_MILLI=250")) << edits.dump();
  EXPECT_TRUE(env.contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25")) << edits.dump();
  EXPECT_TRUE(env.contains("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M")) << edits.dump();
  EXPECT_TRUE(env.contains("TESSERA_REPLICA_ID=serving/chat-pod")) << edits.dump();
  std::set<std::string> nodes;
  for (const json& n : edits["deviceNodes"]) nodes.insert(n["path"].get<std::string>());
  EXPECT_EQ(nodes, (std::set<std::string>{"/dev/nvidiactl", "/dev/nvidia1"}));
  ASSERT_EQ(edits["mounts"].size(), 1u);  // the MPS pipe directory

  // kubelet retries: the same answer, the same file.
  auto again = kubelet_.prepare(driver_->pluginSocket(), {{"serving", uid, "chat"}});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)["claims"][uid], answer);
  EXPECT_EQ(cdiFile(uid), spec);

  // Unprepare removes the spec; a retried unprepare succeeds too.
  for (int i = 0; i < 2; ++i) {
    auto un = kubelet_.unprepare(driver_->pluginSocket(), {{"serving", uid, "chat"}});
    ASSERT_TRUE(un) << un.error().message;
    EXPECT_FALSE((*un)["claims"][uid].contains("error")) << un->dump();
    EXPECT_TRUE(cdiFile(uid).is_null());
  }
}

TEST_F(DraDriverTest, AClaimWithoutCapacityHoldsTheWholeCard) {
  const std::string uid = store(allocatedClaim("batch", "gpu-0", "node-a"));
  auto r = kubelet_.prepare(driver_->pluginSocket(), {{"serving", uid, "batch"}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_FALSE((*r)["claims"][uid].contains("error")) << r->dump();
  const json edits = cdiFile(uid)["devices"][0]["containerEdits"];
  std::set<std::string> env(edits["env"].begin(), edits["env"].end());
  EXPECT_TRUE(env.contains("TESSERA_SHARING_MODE=exclusive")) << edits.dump();
  EXPECT_FALSE(env.contains("TESSERA_GPU_MEMORY_LIMIT_MIB=81920")) << edits.dump();
}

TEST_F(DraDriverTest, EachClaimGetsItsOwnErrorAndTheOthersArePrepared) {
  const std::string good = store(allocatedClaim("good", "gpu-0", "node-a", {{"memory", "8Gi"}}));
  const std::string elsewhere = store(allocatedClaim("elsewhere", "gpu-0", "node-b"));
  const std::string unknown = store(allocatedClaim("unknown", "gpu-9", "node-a"));
  json pending = allocatedClaim("pending", "gpu-0", "node-a");
  pending.erase("status");
  auto made = api_.create("resourceclaims", pending);
  ASSERT_TRUE(made);
  const std::string pendingUid = (*made)["metadata"]["uid"];
  auto r = kubelet_.prepare(driver_->pluginSocket(), {{"serving", good, "good"},
                                                      {"serving", elsewhere, "elsewhere"},
                                                      {"serving", unknown, "unknown"},
                                                      {"serving", pendingUid, "pending"},
                                                      {"serving", "uid-x", "missing"},
                                                      {"serving", "stale-uid", "good"}});
  ASSERT_TRUE(r) << r.error().message;
  const json& claims = (*r)["claims"];
  EXPECT_FALSE(claims[good].contains("error")) << claims.dump();
  EXPECT_NE(claims[elsewhere].value("error", "").find("pool 'node-b'"), std::string::npos)
      << claims.dump();
  EXPECT_NE(claims[unknown].value("error", "").find("no device gpu-9"), std::string::npos)
      << claims.dump();
  EXPECT_NE(claims[pendingUid].value("error", "").find("not allocated"), std::string::npos)
      << claims.dump();
  EXPECT_NE(claims["uid-x"].value("error", "").find("not found"), std::string::npos)
      << claims.dump();
  EXPECT_NE(claims["stale-uid"].value("error", "").find("created again"), std::string::npos)
      << claims.dump();
  EXPECT_TRUE(cdiFile(good).is_object());
  EXPECT_TRUE(cdiFile(elsewhere).is_null());
}

TEST_F(DraDriverTest, AnUnhealthyGpuIsNotPrepared) {
  deviceplugin::Inventory inv = twoGpus();
  inv.gpus[1].healthy = false;
  driver_->setInventory(inv);
  const std::string uid = store(allocatedClaim("chat", "gpu-1", "node-a"));
  auto r = kubelet_.prepare(driver_->pluginSocket(), {{"serving", uid, "chat"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE((*r)["claims"][uid].value("error", "").find("unhealthy"), std::string::npos)
      << r->dump();
}

TEST_F(DraDriverTest, ServesAndRegistersAgainAfterAKubeletRestart) {
  ASSERT_TRUE(kubelet_.registerPlugin(driver_->registrationSocket()));
  // A restarted kubelet finds the socket still there and registers the driver again.
  testing::FakeKubelet restarted;
  ASSERT_TRUE(restarted.registerPlugin(driver_->registrationSocket()));
  EXPECT_EQ(driver_->registrations(), 2);
  // One that cleared the directories: the driver notices and serves both sockets anew.
  std::filesystem::remove_all(dir_.file("registry"));
  std::filesystem::remove_all(dir_.file("plugins"));
  ASSERT_TRUE(eventually([&] {
    return driver_->serves() >= 2 && std::filesystem::exists(driver_->registrationSocket());
  }));
  testing::FakeKubelet third;
  auto info = third.registerPlugin(driver_->registrationSocket());
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(driver_->registrations(), 3);
  const std::string uid = store(allocatedClaim("after", "gpu-0", "node-a"));
  auto r = third.prepare((*info)["endpoint"], {{"serving", uid, "after"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE((*r)["claims"][uid].contains("error")) << r->dump();
}

TEST_F(DraDriverTest, StopRemovesTheRegistrationSocket) {
  const std::string reg = driver_->registrationSocket();
  ASSERT_TRUE(std::filesystem::exists(reg));
  driver_->stop();
  EXPECT_FALSE(std::filesystem::exists(reg));
  EXPECT_FALSE(kubelet_.registerPlugin(reg));
}

// The names and health of one health-stream answer: {"gpu-0": "HEALTHY", ...}, in order.
std::vector<std::pair<std::string, std::string>> healthOf(const json& answer) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const json& d : answer.value("devices", json::array())) {
    out.emplace_back(d["device"].value("device_name", ""), d.value("health", "UNKNOWN"));
  }
  return out;
}

TEST_F(DraDriverTest, StreamsDeviceHealthToKubeletOnEveryChange) {
  // Renewals an hour apart: every answer after the first comes from a change.
  restartDriver([](DriverConfig& c) { c.healthResendInterval = std::chrono::hours(1); });
  auto watch = kubelet_.watchHealth(driver_->pluginSocket(), "v1.DRAResourceHealth");
  ASSERT_TRUE(eventually([&] { return watch->answers().size() == 1; })) << watch->status();
  EXPECT_EQ(driver_->healthStreams(), 1);
  const json first = watch->answers()[0];
  using Health = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(healthOf(first), (Health{{"gpu-0", "HEALTHY"}, {"gpu-1", "HEALTHY"}})) << first.dump();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  for (const json& d : first["devices"]) {
    EXPECT_EQ(d["device"]["pool_name"], "node-a");
    // int64 fields are strings in proto3's JSON.
    EXPECT_LE(std::abs(std::stoll(d["last_updated_time"].get<std::string>()) - now), 120)
        << d.dump();
    EXPECT_EQ(d["health_check_timeout_seconds"], "30");
  }

  // A sample that changes nothing is not news.
  driver_->setInventory(twoGpus());
  // A GPU turns unhealthy: the whole list again, that GPU unhealthy with the reason.
  deviceplugin::Inventory inv = twoGpus();
  inv.gpus[1].healthy = false;
  driver_->setInventory(inv);
  ASSERT_TRUE(eventually([&] { return watch->answers().size() >= 2; }));
  const json second = watch->answers()[1];
  EXPECT_EQ(healthOf(second), (Health{{"gpu-0", "HEALTHY"}, {"gpu-1", "UNHEALTHY"}}))
      << second.dump();
  EXPECT_NE(second["devices"][1].value("message", "").find("GPU-1001 unhealthy"), std::string::npos)
      << second.dump();

  // GPU 0 goes into MIG mode: its instances replace it, named as the slices name them.
  deviceplugin::MigDevice a, b;
  a.uuid = "MIG-a";
  a.profile = "3g.40gb";
  a.startSlot = 0;
  b.uuid = "MIG-b";
  b.profile = "3g.40gb";
  b.startSlot = 4;
  inv.gpus[0].migEnabled = true;
  inv.gpus[0].migDevices = {a, b};
  driver_->setInventory(inv);
  ASSERT_TRUE(eventually([&] { return watch->answers().size() >= 3; }));
  EXPECT_EQ(watch->answers().size(), 3u) << "an unchanged sample was sent again";
  Health published;
  for (const json& d : sliceDevices(inv, SliceOptions{})) {
    published.emplace_back(d["name"].get<std::string>(),
                           d.contains("taints") ? "UNHEALTHY" : "HEALTHY");
  }
  EXPECT_EQ(healthOf(watch->answers()[2]), published);
  EXPECT_EQ(published.size(), 3u);

  // Kubelet goes away: the stream ends on the driver's side too.
  watch->cancel();
  ASSERT_TRUE(eventually([&] { return watch->ended() && driver_->healthStreams() == 0; }));
}

TEST_F(DraDriverTest, HealthIsRenewedServedAsV1alpha1AndEndsWithTheServer) {
  auto watch = kubelet_.watchHealth(driver_->pluginSocket(), "v1alpha1.DRAResourceHealth");
  // Renewed every 50 ms with nothing changed.
  ASSERT_TRUE(eventually([&] { return watch->answers().size() >= 3; })) << watch->status();
  for (const json& answer : watch->answers()) {
    EXPECT_EQ(healthOf(answer).size(), 2u) << answer.dump();
  }
  // A kubelet that cleared its directories: the driver serves anew, the old stream ends and a
  // new one is answered.
  std::filesystem::remove_all(dir_.file("plugins"));
  ASSERT_TRUE(eventually([&] { return watch->ended(); }));
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(driver_->pluginSocket()); }));
  auto again = kubelet_.watchHealth(driver_->pluginSocket(), "v1.DRAResourceHealth");
  ASSERT_TRUE(eventually([&] { return !again->answers().empty(); })) << again->status();
  // Stopping the driver ends the stream with OK.
  driver_->stop();
  ASSERT_TRUE(eventually([&] { return again->ended(); }));
  EXPECT_EQ(again->status(), "OK");
  EXPECT_EQ(driver_->healthStreams(), 0);
}

}  // namespace
}  // namespace tessera::dra
