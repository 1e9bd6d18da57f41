// The plugin's decisions without sockets: slot choice by topology and booking, and the
// container environment per sharing mode.

#include "deviceplugin/allocation.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "deviceplugin/test_support.h"

namespace tessera::deviceplugin {
namespace {

using testing::booking;
using testing::fourGpus;

std::vector<std::string> allSlots(const Inventory& inv, int slots) {
  std::vector<std::string> out;
  for (const GpuDevice& g : inv.gpus) {
    for (int s = 0; s < slots; ++s) out.push_back(slotId(g.id, s));
  }
  return out;
}

std::vector<std::string> gpusOf(const std::vector<std::string>& ids) {
  std::vector<std::string> out;
  for (const std::string& id : ids) out.push_back(gpuOfSlot(id).value_or("?"));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SlotIdTest, RoundTripsAndRejectsForeignIds) {
  EXPECT_EQ(slotId("3", 2), "tessera-gpu3-2");
  EXPECT_EQ(gpuOfSlot("tessera-gpu3-2"), "3");
  EXPECT_EQ(gpuOfSlot("tessera-gpuA-B-0"), "A-B");
  EXPECT_FALSE(gpuOfSlot("GPU-1234"));
  EXPECT_FALSE(gpuOfSlot("tessera-gpu-"));
}

TEST(PreferSlotsTest, PicksAnNvlinkedPairOnOneNumaNodeLeastLoadedFirst) {
  const Inventory inv = fourGpus();
  std::vector<std::string> avail = allSlots(inv, 4);
  // Everything free: the first linked pair.
  EXPECT_EQ(gpusOf(preferSlots(inv, 4, avail, {}, 2)), (std::vector<std::string>{"0", "1"}));
  // GPU 0 carries three pods: the other linked pair, not 0+1 and not a cross-link pair.
  std::erase_if(avail, [](const std::string& id) {
    return id == "tessera-gpu0-0" || id == "tessera-gpu0-1" || id == "tessera-gpu0-2";
  });
  EXPECT_EQ(gpusOf(preferSlots(inv, 4, avail, {}, 2)), (std::vector<std::string>{"2", "3"}));
  // One GPU: the least loaded, lowest index among ties.
  EXPECT_EQ(gpusOf(preferSlots(inv, 4, avail, {}, 1)), (std::vector<std::string>{"1"}));
  // A must-include slot on GPU 1 pulls its NVLink peer 0 in, despite 0's load.
  const auto with1 = preferSlots(inv, 4, avail, {"tessera-gpu1-3"}, 2);
  ASSERT_EQ(with1.size(), 2u);
  EXPECT_EQ(with1[0], "tessera-gpu1-3");
  EXPECT_EQ(gpusOf(with1), (std::vector<std::string>{"0", "1"}));
}

TEST(PreferSlotsTest, ABookingGetsOneSlotOnEachOfItsGpus) {
  const Inventory inv = fourGpus();
  const std::vector<std::string> avail = allSlots(inv, 2);
  const std::vector<std::string> booked = {"3", "0"};
  const auto ids = preferSlots(inv, 2, avail, {}, 2, &booked);
  EXPECT_EQ(gpusOf(ids), (std::vector<std::string>{"0", "3"}));
  // Kubelet offers nothing on GPU 3 any more: the count is still met, elsewhere.
  std::vector<std::string> no3 = avail;
  std::erase_if(no3, [](const std::string& id) { return gpuOfSlot(id) == "3"; });
  const auto partial = preferSlots(inv, 2, no3, {}, 2, &booked);
  ASSERT_EQ(partial.size(), 2u);
  EXPECT_EQ(gpuOfSlot(partial[0]), "0");
  EXPECT_NE(gpuOfSlot(partial[1]), "0");
}

TEST(ContainerSpecTest, ExclusiveGetsWholeDevicesAndNoLimits) {
  const Inventory inv = fourGpus();
  auto spec = containerSpec(inv, booking("ml/train", "exclusive", {"2", "3"}, 81920, 1000, 1), {});
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->envs.at("NVIDIA_VISIBLE_DEVICES"), inv.gpus[2].uuid + "," + inv.gpus[3].uuid);
  EXPECT_EQ(spec->envs.at("CUDA_VISIBLE_DEVICES"), spec->envs.at("NVIDIA_VISIBLE_DEVICES"));
  EXPECT_EQ(spec->envs.at("TESSERA_REPLICA_ID"), "ml/train");
  EXPECT_FALSE(spec->envs.contains("TESSERA_GPU_MEMORY_LIMIT_MIB"));
  EXPECT_FALSE(spec->envs.contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
  std::vector<std::string> nodes;
  for (const ContainerDevice& d : spec->devices) {
    nodes.push_back(d.hostPath);
    EXPECT_EQ(d.containerPath, d.hostPath);
    EXPECT_EQ(d.permissions, "rw");
  }
  EXPECT_EQ(nodes, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia2",
                                             "/dev/nvidia3"}));
}

TEST(ContainerSpecTest, SharedGetsAMemoryLimitAndFraction) {
  const Inventory inv = fourGpus();
  auto spec = containerSpec(inv, booking("serving/a", "shared", {"1"}, 24576, 500, 1), {});
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->envs.at("NVIDIA_VISIBLE_DEVICES"), inv.gpus[1].uuid);
  EXPECT_EQ(spec->envs.at("TESSERA_GPU_MEMORY_LIMIT_MIB"), "24576");
  EXPECT_EQ(spec->envs.at("TESSERA_GPU_MEMORY_FRACTION"), "0.300");  // 24576 / 81920
  EXPECT_EQ(spec->envs.at("TESSERA_GPU_COMPUTE_MILLI"), "500");
  EXPECT_FALSE(spec->envs.contains("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));  // no MPS daemon
  EXPECT_TRUE(spec->mounts.empty());
}

TEST(ContainerSpecTest, MpsSharesGetThreadPercentageAndPinnedMemoryPerDevice) {
  Inventory inv = fourGpus();
  for (GpuDevice& g : inv.gpus) g.mps = true;
  EnvOptions options;
  options.mpsPipeDirectory = "/run/nvidia-mps";
  auto spec =
      containerSpec(inv, booking("serving/tp2", "shared", {"2", "3"}, 30000, 333, 1), options);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "34");  // 333 milli, rounded up
  EXPECT_EQ(spec->envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=30000M,1=30000M");
  EXPECT_EQ(spec->envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/run/nvidia-mps");
  ASSERT_EQ(spec->mounts.size(), 1u);
  EXPECT_EQ(spec->mounts[0].hostPath, "/run/nvidia-mps");
  EXPECT_EQ(spec->mounts[0].containerPath, "/run/nvidia-mps");
}

TEST(ContainerSpecTest, MigGetsTheMigDeviceOfItsSlice) {
  Inventory inv = fourGpus();
  inv.gpus[0].migDevices = {
      {"MIG-11111111-2222-3333-4444-555555555555", "1g.10gb", 0, {"/dev/nvidia-caps/nvidia-cap21"}},
      {"MIG-66666666-7777-8888-9999-000000000000",
       "1g.10gb",
       1,
       {"/dev/nvidia-caps/nvidia-cap30"}}};
  Booking b = booking("serving/small", "mig", {"0"}, 9728, 142, 1);
  b.gpus[0].migProfile = "1g.10gb";
  b.gpus[0].migStart = 1;
  auto spec = containerSpec(inv, b, {});
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->envs.at("NVIDIA_VISIBLE_DEVICES"), "MIG-66666666-7777-8888-9999-000000000000");
  EXPECT_EQ(spec->envs.at("TESSERA_GPU_MEMORY_LIMIT_MIB"), "9728");
  EXPECT_EQ(spec->envs.at("TESSERA_GPU_MEMORY_FRACTION"), "1.000");  // the whole slice
  const bool hasCap = std::any_of(spec->devices.begin(), spec->devices.end(), [](const auto& d) {
    return d.hostPath == "/dev/nvidia-caps/nvidia-cap30";
  });
  EXPECT_TRUE(hasCap);
  // A slice that does not exist (yet) is an error, not another slice.
  b.gpus[0].migStart = 4;
  auto missing = containerSpec(inv, b, {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no MIG instance 1g.10gb at slice 4"), std::string::npos);
}

TEST(ContainerSpecTest, VirtualGpusUseTheIndexAndHaveNoDeviceNodes) {
  Inventory inv;
  GpuDevice g;
  g.id = "0";
  g.index = 5;
  g.memoryMib = 16384;
  inv.gpus.push_back(g);
  auto spec = containerSpec(inv, booking("a/b", "shared", {"0"}, 8192, 500, 1), {});
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->envs.at("NVIDIA_VISIBLE_DEVICES"), "5");
  EXPECT_TRUE(spec->devices.empty());
  EXPECT_EQ(spec->envs.at("TESSERA_GPU_MEMORY_FRACTION"), "0.500");
}

TEST(ContainerSpecTest, UnknownOrUnhealthyGpusAreErrors) {
  Inventory inv = fourGpus();
  auto unknown = containerSpec(inv, booking("a/b", "shared", {"9"}, 1, 1, 1), {});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  inv.gpus[1].healthy = false;
  auto sick = containerSpec(inv, booking("a/b", "shared", {"1"}, 1, 1, 1), {});
  ASSERT_FALSE(sick);
  EXPECT_NE(sick.error().message.find("unhealthy"), std::string::npos);
}

}  // namespace
}  // namespace tessera::deviceplugin
