// NVML discovery against a fake libnvidia-ml built by the test suite (testdata/fake_nvml.cc):
// the real dlopen/dlsym, struct layouts and catalogue mapping; and the missing-library path.

#include "agent/nvml.h"

#include <stdlib.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "agent/gpu_source.h"

namespace tessera::agent {
namespace {

class FakeNvmlEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("FAKE_NVML_MODE");
    ::unsetenv("FAKE_NVML_XID");
  }
  void TearDown() override { SetUp(); }
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
};

TEST_F(FakeNvmlEnv, MissingLibraryIsAClearError) {
  auto nvml = Nvml::open("libnvidia-ml-not-installed.so.1");
  ASSERT_FALSE(nvml);
  EXPECT_EQ(nvml.error().code, ErrorCode::kNotFound);
  EXPECT_NE(nvml.error().message.find("cannot load libnvidia-ml-not-installed.so.1"),
            std::string::npos)
      << nvml.error().message;
  EXPECT_NE(nvml.error().message.find("NVIDIA driver"), std::string::npos);
}

TEST_F(FakeNvmlEnv, WithoutNvmlFallsBackToVirtualGpusOrFails) {
  AgentConfig config;
  config.nvmlLibrary = "libnvidia-ml-not-installed.so.1";
  std::vector<std::string> warnings;
  auto none = openGpuSource(config, catalog_, "n1", warnings);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no virtualGpus are declared"), std::string::npos)
      << none.error().message;

  config.virtualGpus = {{"nvidia l4", 2, -1, 1, std::nullopt}, {"H100-80GB", 1, 0, -1, 40960}};
  warnings.clear();
  auto source = openGpuSource(config, catalog_, "n1", warnings);
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_EQ((*source)->kind(), "virtual");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cannot load"), std::string::npos);
  EXPECT_NE(warnings[0].find("virtual"), std::string::npos);
  auto gpus = (*source)->sample();
  ASSERT_TRUE(gpus);
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ((*gpus)[0].type, "L4");
  EXPECT_TRUE((*gpus)[0].isVirtual);
  EXPECT_EQ((*gpus)[0].memoryMib, 24576);
  EXPECT_EQ((*gpus)[1].numaNode, 1);
  EXPECT_EQ((*gpus)[1].nvlinkGroup, -1);
  EXPECT_EQ((*gpus)[2].id, "2");
  EXPECT_EQ((*gpus)[2].nvlinkGroup, 0);
  EXPECT_EQ((*gpus)[2].memoryMib, 40960);
  EXPECT_EQ((*gpus)[2].uuid, "virtual-n1-2");

  config.discovery = GpuDiscovery::kNvml;  // asked for NVML: no fallback
  auto strict = openGpuSource(config, catalog_, "n1", warnings);
  ASSERT_FALSE(strict);
  EXPECT_NE(strict.error().message.find("cannot load"), std::string::npos);

  config.discovery = GpuDiscovery::kVirtual;
  config.virtualGpus = {{"K9000", 1, -1, -1, std::nullopt}};
  auto unknown = openGpuSource(config, catalog_, "n1", warnings);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("virtualGpus[0].type: unknown GPU type \"K9000\""),
            std::string::npos)
      << unknown.error().message;

  // Issue 14, bug 3: an NVLink group on a card without NVLink is a typo, said so.
  config.virtualGpus = {{"H100-80GB", 2, 0, 0, std::nullopt}, {"L4", 1, 0, -1, std::nullopt}};
  auto unlinked = openGpuSource(config, catalog_, "n1", warnings);
  ASSERT_FALSE(unlinked);
  EXPECT_NE(unlinked.error().message.find("virtualGpus[1].nvlinkGroup: type L4 has no NVLink"),
            std::string::npos)
      << unlinked.error().message;
}

TEST_F(FakeNvmlEnv, ReadsEveryCardThroughTheLoadedLibrary) {
  auto nvml = Nvml::open(TESSERA_FAKE_NVML);
  ASSERT_TRUE(nvml) << nvml.error().message;
  auto gpus = (*nvml)->devices();
  ASSERT_TRUE(gpus) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 3u);
  const NvmlGpu& h0 = (*gpus)[0];
  EXPECT_EQ(h0.uuid, "GPU-aaaa-0000");
  EXPECT_EQ(h0.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h0.pciBusId, "00000000:18:00.0");
  EXPECT_EQ(h0.memoryTotalMib, 81559);
  EXPECT_EQ(h0.memoryUsedMib, 1024);
  EXPECT_EQ(h0.utilizationPercent, 37);
  EXPECT_EQ(h0.numaNode, 0);
  EXPECT_EQ(h0.computeCapability, "9.0.0");  // what the DRA driver publishes
  EXPECT_EQ(h0.nvlinkActiveLinks, 18);
  EXPECT_EQ(h0.cpuAffinity.size(), 16u);
  EXPECT_FALSE(h0.migEnabled);
  const NvmlGpu& h1 = (*gpus)[1];
  ASSERT_EQ(h1.processes.size(), 1u);
  EXPECT_EQ(h1.processes[0].pid, 4242u);
  EXPECT_EQ(h1.processes[0].usedMib, 2048);
  const NvmlGpu& a = (*gpus)[2];
  EXPECT_TRUE(a.migEnabled);
  ASSERT_EQ(a.migInstances.size(), 2u);
  EXPECT_EQ(a.migInstances[0].uuid, "MIG-1111");
  EXPECT_EQ(a.migInstances[1].memoryMib, 40192);
  // Issue 14, item 15: where each instance starts, from its GPU instance's placement.
  EXPECT_EQ(a.migInstances[0].startSlot, 6);
  EXPECT_EQ(a.migInstances[1].startSlot, 0);
  EXPECT_EQ(a.numaNode, 1);
  EXPECT_EQ(a.nvlinkActiveLinks, 0);
  // CPUs 16-31 in the first mask word and CPU 64 in the second.
  EXPECT_EQ(a.cpuAffinity.size(), 17u);
  EXPECT_EQ(a.cpuAffinity.front(), 16);
  EXPECT_EQ(a.cpuAffinity.back(), 64);
  // Both H100s link to NVSwitches (bus ids of no card here): one group; the A100 none.
  EXPECT_EQ(nvlinkGroups(*gpus), (std::vector<int>{0, 0, -1}));
}

TEST_F(FakeNvmlEnv, MapsCardsToCatalogueTypesAndMigProfiles) {
  AgentConfig config;
  config.nvmlLibrary = TESSERA_FAKE_NVML;
  config.virtualGpus = {{"L4", 1, -1, -1, std::nullopt}};  // ignored: NVML answers
  std::vector<std::string> warnings;
  auto source = openGpuSource(config, catalog_, "n1", warnings);
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_EQ((*source)->kind(), "nvml");
  auto gpus = (*source)->sample();
  ASSERT_TRUE(gpus);
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ((*gpus)[0].type, "H100-80GB");
  EXPECT_EQ((*gpus)[0].nvlinkGroup, 0);
  EXPECT_EQ((*gpus)[1].nvlinkGroup, 0);
  EXPECT_DOUBLE_EQ((*gpus)[1].utilization, 0.8);
  EXPECT_EQ((*gpus)[1].processes, (std::vector<unsigned>{4242}));
  EXPECT_FALSE((*gpus)[0].isVirtual);
  EXPECT_EQ((*gpus)[2].type, "A100-80GB");
  EXPECT_EQ((*gpus)[2].nvlinkGroup, -1);
  EXPECT_TRUE((*gpus)[2].migEnabled);
  EXPECT_EQ((*gpus)[2].migProfiles, (std::vector<std::string>{"1g.10gb", "3g.40gb"}));
  EXPECT_EQ((*gpus)[2].migStarts, (std::vector<int>{6, 0}));
  // The PCIe A100's NVML name is no catalogue alias: mapped by family and memory, with a
  // warning; the ignored virtual GPUs are said too.
  const bool warnedName = std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("\"NVIDIA A100 80GB PCIe\" is not in the GPU catalogue; taken as A100-80GB") !=
           std::string::npos;
  });
  EXPECT_TRUE(warnedName) << ::testing::PrintToString(warnings);
  const bool warnedVirtual = std::any_of(
      warnings.begin(), warnings.end(),
      [](const std::string& w) { return w.find("virtualGpus are ignored") != std::string::npos; });
  EXPECT_TRUE(warnedVirtual);
}

TEST_F(FakeNvmlEnv, UnknownCardFailsNamingItAndTheKnownTypes) {
  ::setenv("FAKE_NVML_MODE", "unknown", 1);
  AgentConfig config;
  config.nvmlLibrary = TESSERA_FAKE_NVML;
  std::vector<std::string> warnings;
  auto source = openGpuSource(config, catalog_, "n1", warnings);
  ASSERT_FALSE(source);
  EXPECT_NE(source.error().message.find("GPU 2 (GPU-bbbb-0002)"), std::string::npos)
      << source.error().message;
  EXPECT_NE(source.error().message.find("\"NVIDIA Z9000\""), std::string::npos);
  EXPECT_NE(source.error().message.find("known types: "), std::string::npos);
  EXPECT_NE(source.error().message.find("H100-80GB"), std::string::npos);
}

TEST_F(FakeNvmlEnv, DriverThatDoesNotInitialiseIsReported) {
  ::setenv("FAKE_NVML_MODE", "initfail", 1);
  auto nvml = Nvml::open(TESSERA_FAKE_NVML);
  ASSERT_FALSE(nvml);
  EXPECT_NE(nvml.error().message.find("nvmlInit failed: Driver Not Loaded (code 9)"),
            std::string::npos)
      << nvml.error().message;
}

TEST_F(FakeNvmlEnv, CardXidMarksTheGpuUnhealthyApplicationXidDoesNot) {
  for (const auto& [xid, healthy] : {std::pair{"79", false}, std::pair{"13", true}}) {
    ::setenv("FAKE_NVML_XID", xid, 1);
    AgentConfig config;
    config.nvmlLibrary = TESSERA_FAKE_NVML;
    std::vector<std::string> warnings;
    auto source = openGpuSource(config, catalog_, "n1", warnings);
    ASSERT_TRUE(source) << source.error().message;
    auto gpus = (*source)->sample();
    ASSERT_TRUE(gpus);
    EXPECT_TRUE((*gpus)[0].healthy) << xid;
    EXPECT_EQ((*gpus)[1].healthy, healthy) << xid;
    EXPECT_EQ((*gpus)[1].xids, (std::vector<std::uint64_t>{std::stoull(xid)}));
    // A card fault stays reported on later samples.
    auto again = (*source)->sample();
    ASSERT_TRUE(again);
    EXPECT_EQ((*again)[1].healthy, healthy) << xid;
  }
}

TEST(GpuTypeMapping, NamesAliasesAndFamilies) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  struct Case {
    std::string name;
    std::int64_t mib;
    std::string type;
    bool warns;
  };
  for (const Case& c : {
           Case{"NVIDIA H100 80GB HBM3", 81559, "H100-80GB", false},
           Case{"NVIDIA A100-SXM4-80GB", 81920, "A100-80GB", false},
           Case{"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB", false},
           Case{"NVIDIA L4", 23034, "L4", false},
           Case{"Tesla T4", 15360, "T4", false},
           Case{"NVIDIA L40S", 46068, "L40S", false},
           Case{"NVIDIA H200", 143771, "H200-141GB", false},
           Case{"NVIDIA A100 80GB PCIe", 81920, "A100-80GB", true},
           Case{"NVIDIA A100-PCIE-40GB", 40536, "A100-40GB", true},
           Case{"NVIDIA H100 PCIe", 81559, "H100-80GB", true},
       }) {
    std::string warning;
    auto type = mapGpuType(c.name, c.mib, catalog, warning);
    ASSERT_TRUE(type) << c.name << ": " << type.error().message;
    EXPECT_EQ(*type, c.type) << c.name;
    EXPECT_EQ(!warning.empty(), c.warns) << c.name << ": " << warning;
  }
  std::string warning;
  // Right family, wrong memory: no guess.
  EXPECT_FALSE(mapGpuType("NVIDIA A100 20GB", 20480, catalog, warning));
  EXPECT_FALSE(mapGpuType("Quadro RTX 8000", 49152, catalog, warning));
}

}  // namespace
}  // namespace tessera::agent
