// The device plugin over real unix sockets: a fake kubelet serves the Registration service,
// and a gRPC client plays kubelet's device manager against the plugin.

#include "deviceplugin/plugin.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "deviceplugin/test_support.h"

namespace tessera::deviceplugin {
namespace {

using testing::booking;
using testing::eventually;
using testing::FakeKubelet;
using testing::fourGpus;
using testing::MemoryBookings;
using testing::pluginClient;
using testing::SocketDir;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    kubelet_ = std::make_unique<FakeKubelet>(dir_.path());
    ASSERT_TRUE(kubelet_->serving());
  }
  void TearDown() override {
    if (plugin_) plugin_->stop();
  }

  void startPlugin(Inventory inventory = fourGpus(), int slots = 2,
                   const std::string& resource = "tessera.io/gpus") {
    PluginConfig config;
    config.resourceName = resource;
    config.directory = dir_.path();
    config.nodeName = "gpu-node-1";
    config.slotsPerGpu = slots;
    config.watchInterval = std::chrono::milliseconds(20);
    plugin_ = std::make_unique<DevicePlugin>(config, bookings_, std::move(inventory));
    auto started = plugin_->start();
    ASSERT_TRUE(started) << started.error().message;
    client_ = pluginClient(plugin_->socketPath());
  }

  // Kubelet's admission of one container: GetPreferredAllocation, then Allocate with what it
  // preferred. Returns the container's response; `status` gets Allocate's status.
  v1beta1::ContainerAllocateResponse admit(int size, const std::vector<std::string>& available,
                                           grpc::Status* status = nullptr,
                                           std::vector<std::string>* allocated = nullptr) {
    v1beta1::PreferredAllocationRequest preq;
    auto* c = preq.add_container_requests();
    for (const std::string& id : available) c->add_available_deviceids(id);
    c->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse pres;
    grpc::ClientContext pctx;
    const grpc::Status ps = client_->GetPreferredAllocation(&pctx, preq, &pres);
    EXPECT_TRUE(ps.ok()) << ps.error_message();
    v1beta1::AllocateRequest areq;
    auto* ac = areq.add_container_requests();
    if (pres.container_responses_size() == 1) {
      for (const std::string& id : pres.container_responses(0).deviceids()) {
        ac->add_devices_ids(id);
        if (allocated != nullptr) allocated->push_back(id);
      }
    }
    v1beta1::AllocateResponse ares;
    grpc::ClientContext actx;
    const grpc::Status as = client_->Allocate(&actx, areq, &ares);
    if (status != nullptr) *status = as;
    if (!as.ok() || ares.container_responses_size() != 1) return {};
    return ares.container_responses(0);
  }

  std::vector<std::string> allSlots(int slots = 2) const {
    std::vector<std::string> out;
    for (int g = 0; g < 4; ++g) {
      for (int s = 0; s < slots; ++s) out.push_back(slotId(std::to_string(g), s));
    }
    return out;
  }

  SocketDir dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  MemoryBookings bookings_;
  std::unique_ptr<DevicePlugin> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> client_;
};

TEST_F(PluginTest, RegistersWithKubeletAndAdvertisesPreferredAllocation) {
  startPlugin();
  ASSERT_TRUE(eventually([&] { return !kubelet_->requests().empty(); }));
  const v1beta1::RegisterRequest req = kubelet_->requests().front();
  EXPECT_EQ(req.version(), "v1beta1");
  EXPECT_EQ(req.resource_name(), "tessera.io/gpus");
  EXPECT_EQ(req.endpoint(), "tessera-tessera.io_gpus.sock");
  EXPECT_TRUE(req.options().get_preferred_allocation_available());
  EXPECT_FALSE(req.options().pre_start_required());
  EXPECT_TRUE(exists(dir_.file(req.endpoint())));  // kubelet dials <dir>/<endpoint>

  grpc::ClientContext ctx;
  v1beta1::DevicePluginOptions options;
  ASSERT_TRUE(client_->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &options).ok());
  EXPECT_TRUE(options.get_preferred_allocation_available());
}

TEST_F(PluginTest, ListAndWatchSendsTheSlotsThenTheirHealthChanges) {
  startPlugin();
  grpc::ClientContext ctx;
  auto stream = client_->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  ASSERT_EQ(list.devices_size(), 8);  // 4 GPUs x 2 slots
  for (const auto& d : list.devices()) {
    EXPECT_EQ(d.health(), "Healthy") << d.id();
    ASSERT_EQ(d.topology().nodes_size(), 1);
    EXPECT_EQ(d.topology().nodes(0).id(), std::stoi(*gpuOfSlot(d.id())) / 2);  // NUMA
  }
  EXPECT_EQ(list.devices(2).id(), "tessera-gpu1-0");

  ASSERT_TRUE(plugin_->setGpuHealth("1", false));
  ASSERT_TRUE(stream->Read(&list));
  ASSERT_EQ(list.devices_size(), 8);
  for (const auto& d : list.devices()) {
    EXPECT_EQ(d.health(), gpuOfSlot(d.id()) == "1" ? "Unhealthy" : "Healthy") << d.id();
  }
  EXPECT_FALSE(plugin_->setGpuHealth("7", false));

  Inventory fewer = fourGpus();
  fewer.gpus.resize(1);
  plugin_->setInventory(fewer);
  ASSERT_TRUE(stream->Read(&list));
  EXPECT_EQ(list.devices_size(), 2);
  ctx.TryCancel();
  while (stream->Read(&list)) {
  }
  (void)stream->Finish();
}

TEST_F(PluginTest, PreferredAllocationWithoutBookingsFollowsNvlinkAndNuma) {
  startPlugin();
  std::vector<std::string> avail = allSlots();
  std::erase(avail, "tessera-gpu0-0");  // GPU 0 is busier than the others
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const std::string& id : avail) c->add_available_deviceids(id);
  c->set_allocation_size(2);
  auto* must = req.add_container_requests();
  for (const std::string& id : avail) must->add_available_deviceids(id);
  must->add_must_include_deviceids("tessera-gpu3-1");
  must->set_allocation_size(2);
  grpc::ClientContext ctx;
  v1beta1::PreferredAllocationResponse res;
  ASSERT_TRUE(client_->GetPreferredAllocation(&ctx, req, &res).ok());
  ASSERT_EQ(res.container_responses_size(), 2);
  std::set<std::string> first, second;
  for (const auto& id : res.container_responses(0).deviceids()) first.insert(*gpuOfSlot(id));
  for (const auto& id : res.container_responses(1).deviceids()) second.insert(*gpuOfSlot(id));
  EXPECT_EQ(first, (std::set<std::string>{"2", "3"}));   // linked, one NUMA node, least loaded
  EXPECT_EQ(second, (std::set<std::string>{"2", "3"}));  // GPU 3's NVLink peer
  EXPECT_EQ(res.container_responses(1).deviceids(0), "tessera-gpu3-1");
}

TEST_F(PluginTest, TwoPodsOfDifferentShapesEachGetTheirOwnGpus) {
  // Booked together on this node: a 24 GiB half-GPU share on GPU 2 (older) and an 8 GiB
  // quarter share on GPU 0. Kubelet admits them one after the other, naming neither.
  bookings_.add(booking("serving/big", "shared", {"2"}, 24576, 500, 100));
  bookings_.add(booking("serving/small", "shared", {"0"}, 8192, 250, 200));
  startPlugin();

  std::vector<std::string> first;
  grpc::Status status;
  auto big = admit(1, allSlots(), &status, &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(gpuOfSlot(first[0]), "2");  // kubelet's slot count matches the booked GPU
  EXPECT_EQ(big.envs().at("TESSERA_REPLICA_ID"), "serving/big");
  EXPECT_EQ(big.envs().at("NVIDIA_VISIBLE_DEVICES"), fourGpus().gpus[2].uuid);
  EXPECT_EQ(big.envs().at("TESSERA_GPU_MEMORY_LIMIT_MIB"), "24576");

  std::vector<std::string> available = allSlots();
  std::erase(available, first[0]);
  auto small = admit(1, available, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(small.envs().at("TESSERA_REPLICA_ID"), "serving/small");
  EXPECT_EQ(small.envs().at("NVIDIA_VISIBLE_DEVICES"), fourGpus().gpus[0].uuid);
  EXPECT_EQ(small.envs().at("TESSERA_GPU_MEMORY_LIMIT_MIB"), "8192");
  EXPECT_EQ(small.envs().at("TESSERA_GPU_COMPUTE_MILLI"), "250");

  const auto confirmed = bookings_.confirmations();
  ASSERT_EQ(confirmed.size(), 2u);
  EXPECT_EQ(confirmed[0].replica, "serving/big");
  EXPECT_EQ(confirmed[0].deviceIds, first);
  EXPECT_EQ(confirmed[0].gpuIds, (std::vector<std::string>{"2"}));
  EXPECT_EQ(confirmed[1].replica, "serving/small");
  EXPECT_EQ(confirmed[1].gpuIds, (std::vector<std::string>{"0"}));

  // Both are handed out: a third container finds no booking.
  auto third = admit(1, available, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(PluginTest, AllocateWithoutAPreferenceTakesTheOldestBookingOfItsSize) {
  bookings_.add(booking("a/old", "shared", {"1"}, 10000, 300, 1));
  bookings_.add(booking("a/new", "exclusive", {"3"}, 81920, 1000, 2));
  startPlugin();
  // Kubelet asks a preference (answered for the oldest booking), then allocates other
  // devices than preferred: the oldest booking of that size is still the one handed out.
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("tessera-gpu3-0");
  v1beta1::AllocateResponse res;
  grpc::ClientContext ctx;
  ASSERT_TRUE(client_->Allocate(&ctx, req, &res).ok());
  ASSERT_EQ(res.container_responses_size(), 1);
  EXPECT_EQ(res.container_responses(0).envs().at("TESSERA_REPLICA_ID"), "a/old");
  EXPECT_EQ(res.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"),
            fourGpus().gpus[1].uuid);
  // The exclusive one: whole device, device nodes from the inventory, no limits.
  grpc::Status status;
  auto excl = admit(1, allSlots(), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(excl.envs().at("TESSERA_REPLICA_ID"), "a/new");
  EXPECT_FALSE(excl.envs().contains("TESSERA_GPU_MEMORY_LIMIT_MIB"));
  std::vector<std::string> nodes;
  for (const auto& d : excl.devices()) nodes.push_back(d.host_path());
  EXPECT_EQ(nodes, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia3"}));
}

TEST_F(PluginTest, MpsAndMigBookingsGetTheirEnvironmentOverGrpc) {
  Inventory inv = fourGpus();
  inv.gpus[1].mps = true;
  inv.gpus[2].migDevices = {{"MIG-aaaaaaaa-0000-0000-0000-000000000001", "3g.40gb", 4, {}}};
  Booking mig = booking("a/mig", "mig", {"2"}, 40192, 428, 1);
  mig.gpus[0].migProfile = "3g.40gb";
  mig.gpus[0].migStart = 4;
  bookings_.add(mig);
  bookings_.add(booking("a/mps", "shared", {"1"}, 20000, 250, 2));
  startPlugin(inv);
  grpc::Status status;
  auto m = admit(1, allSlots(), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(m.envs().at("NVIDIA_VISIBLE_DEVICES"), "MIG-aaaaaaaa-0000-0000-0000-000000000001");
  auto s = admit(1, allSlots(), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(s.envs().at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(s.envs().at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=20000M");
  ASSERT_EQ(s.mounts_size(), 1);
  EXPECT_EQ(s.mounts(0).host_path(), "/tmp/nvidia-mps");
}

TEST_F(PluginTest, AContainerWithoutABookingFailsWithAClearError) {
  bookings_.add(booking("a/two", "shared", {"0", "1"}, 10000, 300, 1));
  startPlugin();
  grpc::Status status;
  admit(1, allSlots(), &status);  // only a 2-GPU booking is pending
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("no pending Tessera booking on node gpu-node-1"),
            std::string::npos)
      << status.error_message();
  EXPECT_TRUE(bookings_.confirmations().empty());

  // The control plane unreachable: refused too (never a guess), and said so.
  bookings_.setUnreachable(true);
  admit(2, allSlots(), &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find("control plane"), std::string::npos);
}

TEST_F(PluginTest, TheWholeGpuResourceHandsOutOnlyItsOwnBookings) {
  bookings_.add(booking("a/shared", "shared", {"0"}, 10000, 300, 1));
  Booking whole = booking("a/whole", "exclusive", {"2"}, 81920, 1000, 2);
  whole.resource = "nvidia.com/gpu";
  bookings_.add(whole);
  startPlugin(fourGpus(), 1, "nvidia.com/gpu");
  ASSERT_TRUE(eventually([&] { return !kubelet_->requests().empty(); }));
  EXPECT_EQ(kubelet_->requests().front().resource_name(), "nvidia.com/gpu");
  EXPECT_EQ(kubelet_->requests().front().endpoint(), "tessera-nvidia.com_gpu.sock");
  std::vector<std::string> ids;
  grpc::Status status;
  auto w = admit(1, allSlots(1), &status, &ids);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ids, (std::vector<std::string>{"tessera-gpu2-0"}));
  EXPECT_EQ(w.envs().at("TESSERA_REPLICA_ID"), "a/whole");
  // The older tessera.io/gpus booking is not this plugin's to give.
  admit(1, allSlots(1), &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(PluginTest, AFailedConfirmationIsRetriedAndItsBookingNotOfferedAgain) {
  bookings_.add(booking("a/one", "shared", {"1"}, 10000, 300, 1));
  startPlugin();
  bookings_.setConfirmsFail(true);
  grpc::Status status;
  auto one = admit(1, allSlots(), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();  // the container still starts
  EXPECT_EQ(one.envs().at("TESSERA_REPLICA_ID"), "a/one");
  EXPECT_TRUE(bookings_.confirmations().empty());
  admit(1, allSlots(), &status);  // still unconfirmed upstream, but handed out here
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  bookings_.setConfirmsFail(false);
  ASSERT_TRUE(eventually([&] { return bookings_.confirmations().size() == 1; }));
  EXPECT_EQ(bookings_.confirmations()[0].replica, "a/one");
}

TEST_F(PluginTest, ServesAndRegistersAgainWhenKubeletRestarts) {
  startPlugin();
  ASSERT_TRUE(eventually([&] { return plugin_->registrations() == 1; }));
  // Kubelet goes down and, starting again, wipes the plugin sockets and serves a new
  // kubelet.sock.
  kubelet_->stop();
  ASSERT_EQ(::unlink(plugin_->socketPath().c_str()), 0);
  kubelet_ = std::make_unique<FakeKubelet>(dir_.path());
  ASSERT_TRUE(eventually([&] { return !kubelet_->requests().empty(); }));
  EXPECT_EQ(kubelet_->requests().front().resource_name(), "tessera.io/gpus");
  ASSERT_TRUE(eventually([&] { return plugin_->registrations() == 2; }));
  ASSERT_TRUE(exists(plugin_->socketPath()));
  auto fresh = pluginClient(plugin_->socketPath());
  grpc::ClientContext ctx;
  auto stream = fresh->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  EXPECT_EQ(list.devices_size(), 8);
  ctx.TryCancel();
  while (stream->Read(&list)) {
  }
  (void)stream->Finish();

  // Only kubelet.sock recreated (our socket survived): registering again is enough.
  kubelet_->stop();
  kubelet_ = std::make_unique<FakeKubelet>(dir_.path());
  ASSERT_TRUE(eventually([&] { return plugin_->registrations() == 3; }));
}

}  // namespace
}  // namespace tessera::deviceplugin
