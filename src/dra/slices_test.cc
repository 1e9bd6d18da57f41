// The ResourceSlice pool of a node's GPUs (dra/slices.h) and its resolution back to GPUs.

#include "dra/slices.h"

#include <gtest/gtest.h>

#include "model/gpu_catalog.h"

namespace tessera::dra {
namespace {

using json = nlohmann::json;

deviceplugin::GpuDevice sliceGpu(int index, std::int64_t memoryMib = 81920) {
  deviceplugin::GpuDevice g;
  g.id = std::to_string(index);
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.type = "A100-80GB";
  g.memoryMib = memoryMib;
  g.numaNode = index / 4;
  g.nvlinkGroup = 0;
  return g;
}

TEST(ResourceSlices, AGpuIsOneSharableDeviceWithConsumableMemoryAndCompute) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  deviceplugin::Inventory inv;
  inv.gpus = {sliceGpu(1), sliceGpu(0)};
  inv.gpus[0].computeCapability = "8.0.0";
  SliceOptions o;
  o.nodeName = "node-a";
  o.generation = 3;
  o.catalog = &catalog;
  const std::vector<json> slices = resourceSlices(inv, o);
  ASSERT_EQ(slices.size(), 1u);
  const json& s = slices[0];
  EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(s["metadata"]["name"], "node-a-gpu.tessera.io-0");
  EXPECT_EQ(s["spec"]["driver"], "gpu.tessera.io");
  EXPECT_EQ(s["spec"]["nodeName"], "node-a");
  EXPECT_EQ(s["spec"]["pool"],
            json({{"name", "node-a"}, {"generation", 3}, {"resourceSliceCount", 1}}));
  const json& devices = s["spec"]["devices"];
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]["name"], "gpu-0");  // by index, whatever the inventory's order
  const json& d = devices[1];
  EXPECT_EQ(d["name"], "gpu-1");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["attributes"]["uuid"], json({{"string", "GPU-1"}}));
  EXPECT_EQ(d["attributes"]["type"], json({{"string", "gpu"}}));
  EXPECT_EQ(d["attributes"]["productName"], json({{"string", "A100-80GB"}}));
  EXPECT_EQ(d["attributes"]["architecture"], json({{"string", "Ampere"}}));
  EXPECT_EQ(d["attributes"]["cudaComputeCapability"], json({{"version", "8.0.0"}}));
  EXPECT_EQ(d["attributes"]["numaNode"], json({{"int", 0}}));
  EXPECT_EQ(d["attributes"]["nvlinkGroup"], json({{"int", 0}}));
  EXPECT_EQ(d["capacity"]["memory"]["value"], "81920Mi");
  EXPECT_EQ(d["capacity"]["memory"]["requestPolicy"]["validRange"]["step"], "1Mi");
  // The API needs a default with a validRange: a claim that names no memory takes the card.
  EXPECT_EQ(d["capacity"]["memory"]["requestPolicy"]["default"], "81920Mi");
  EXPECT_EQ(d["capacity"]["compute"]["value"], "1000");
  EXPECT_EQ(d["capacity"]["compute"]["requestPolicy"]["default"], "0");
  EXPECT_FALSE(d.contains("taints"));
  EXPECT_FALSE(devices[0]["attributes"].contains("cudaComputeCapability") &&
               devices[1]["attributes"].contains("cudaComputeCapability"));
  const auto ref = findDevice(inv, "gpu-1");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->gpu->id, "1");
  EXPECT_EQ(ref->mig, nullptr);
  EXPECT_FALSE(findDevice(inv, "gpu-7"));
}

// The API needs a memory policy's min, and min + step, within the value: a card of unknown
// memory (0) publishes its memory without a policy.
TEST(ResourceSlices, AGpuOfUnknownMemoryHasNoMemoryPolicy) {
  deviceplugin::Inventory inv;
  inv.gpus = {sliceGpu(0, 0)};
  SliceOptions o;
  o.nodeName = "node-a";
  const json d = resourceSlices(inv, o)[0]["spec"]["devices"][0];
  EXPECT_EQ(d["capacity"]["memory"], json({{"value", "0Mi"}}));
  EXPECT_EQ(d["capacity"]["compute"]["value"], "1000");
}

TEST(ResourceSlices, AnUnhealthyGpuIsTaintedAndAVirtualOneGetsTheAgentsUuid) {
  deviceplugin::Inventory inv;
  inv.gpus = {sliceGpu(0)};
  inv.gpus[0].healthy = false;
  inv.gpus[0].uuid.clear();
  SliceOptions o;
  o.nodeName = "n1";
  const json d = sliceDevices(inv, o).at(0);
  EXPECT_EQ(
      d["taints"],
      json::array(
          {{{"key", "gpu.tessera.io/unhealthy"}, {"value", "true"}, {"effect", "NoSchedule"}}}));
  EXPECT_EQ(d["attributes"]["uuid"], json({{"string", "virtual-n1-0"}}));
  EXPECT_EQ(d["attributes"]["productName"], json({{"string", "A100-80GB"}}));
  EXPECT_FALSE(d["attributes"].contains("architecture"));  // no catalogue given
}

TEST(ResourceSlices, AMigGpuIsPublishedAsItsInstancesOnly) {
  const model::GpuCatalog catalog = model::GpuCatalog::builtin();
  deviceplugin::Inventory inv;
  inv.gpus = {sliceGpu(0), sliceGpu(1)};
  inv.gpus[1].migEnabled = true;
  inv.gpus[1].migDevices = {{"MIG-b", "3g.40gb", 4, {}}, {"MIG-a", "1g.10gb", 0, {}}};
  SliceOptions o;
  o.nodeName = "n1";
  o.catalog = &catalog;
  const std::vector<json> devices = sliceDevices(inv, o);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0]["name"], "gpu-0");
  EXPECT_EQ(devices[1]["name"], "gpu-1-mig-1g-10gb-0");
  EXPECT_EQ(devices[2]["name"], "gpu-1-mig-3g-40gb-4");
  const json& m = devices[1];
  EXPECT_FALSE(m.contains("allowMultipleAllocations"));  // a MIG instance is exclusive
  EXPECT_EQ(m["attributes"]["type"], json({{"string", "mig"}}));
  EXPECT_EQ(m["attributes"]["uuid"], json({{"string", "MIG-a"}}));
  EXPECT_EQ(m["attributes"]["parentUUID"], json({{"string", "GPU-1"}}));
  EXPECT_EQ(m["attributes"]["profile"], json({{"string", "1g.10gb"}}));
  EXPECT_EQ(m["attributes"]["migStart"], json({{"int", 0}}));
  EXPECT_TRUE(m["capacity"]["memory"]["value"].get<std::string>().ends_with("Mi"));
  const auto ref = findDevice(inv, "gpu-1-mig-3g-40gb-4");
  ASSERT_TRUE(ref);
  ASSERT_NE(ref->mig, nullptr);
  EXPECT_EQ(ref->mig->uuid, "MIG-b");
  EXPECT_FALSE(findDevice(inv, "gpu-1"));  // the parent is not a device in MIG mode
}

TEST(ResourceSlices, ABigPoolIsSplitIntoSlicesOfAtMost64Devices) {
  deviceplugin::Inventory inv;
  for (int i = 0; i < 130; ++i) inv.gpus.push_back(sliceGpu(i));
  SliceOptions o;
  o.nodeName = "big";
  o.generation = 2;
  const std::vector<json> slices = resourceSlices(inv, o);
  ASSERT_EQ(slices.size(), 3u);
  std::size_t total = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i]["metadata"]["name"], "big-gpu.tessera.io-" + std::to_string(i));
    EXPECT_EQ(slices[i]["spec"]["pool"]["resourceSliceCount"], 3);
    EXPECT_EQ(slices[i]["spec"]["pool"]["generation"], 2);
    EXPECT_LE(slices[i]["spec"]["devices"].size(), kMaxDevicesPerSlice);
    total += slices[i]["spec"]["devices"].size();
  }
  EXPECT_EQ(total, 130u);
  // A node without GPUs still has its (empty) pool.
  const std::vector<json> none = resourceSlices({}, o);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0]["spec"]["devices"].empty());
}

}  // namespace
}  // namespace tessera::dra
