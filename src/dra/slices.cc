#include "dra/slices.h"

#include <algorithm>
#include <cctype>

#include "model/gpu_catalog.h"

namespace tessera::dra {
namespace {

using json = nlohmann::json;
using deviceplugin::GpuDevice;
using deviceplugin::MigDevice;

json stringAttr(std::string_view v) {
  return {{"string", std::string(v)}};
}
json intAttr(std::int64_t v) {
  return {{"int", v}};
}

std::string mib(std::int64_t v) {
  return std::to_string(v) + "Mi";
}

std::string dnsLabelPart(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '-';
  }
  return out;
}

std::string uuidOf(const GpuDevice& gpu, const SliceOptions& o) {
  // A virtual GPU (tests, simulations) has none from NVML: the agent's virtual UUID.
  return gpu.uuid.empty() ? "virtual-" + o.nodeName + "-" + gpu.id : gpu.uuid;
}

void addCommon(json& attrs, const GpuDevice& gpu, const SliceOptions& o) {
  attrs["index"] = intAttr(gpu.index);
  attrs["productName"] = stringAttr(gpu.type);
  if (o.catalog != nullptr) {
    if (const model::GpuType* t = o.catalog->find(gpu.type); t && !t->architecture.empty()) {
      attrs["architecture"] = stringAttr(t->architecture);
    }
  }
  if (!gpu.computeCapability.empty()) {
    attrs["cudaComputeCapability"] = {{"version", gpu.computeCapability}};
  }
  if (gpu.numaNode >= 0) attrs["numaNode"] = intAttr(gpu.numaNode);
  if (gpu.nvlinkGroup >= 0) attrs["nvlinkGroup"] = intAttr(gpu.nvlinkGroup);
}

void addHealth(json& device, const GpuDevice& gpu) {
  if (gpu.healthy) return;
  device["taints"] = json::array(
      {{{"key", std::string(kUnhealthyTaint)}, {"value", "true"}, {"effect", "NoSchedule"}}});
}

json gpuDevice(const GpuDevice& gpu, const SliceOptions& o) {
  json attrs = json::object();
  attrs["type"] = stringAttr("gpu");
  attrs["uuid"] = stringAttr(uuidOf(gpu, o));
  addCommon(attrs, gpu, o);
  json capacity = json::object();
  capacity["memory"] = {{"value", mib(gpu.memoryMib)}};
  // A card whose memory is unknown (0: a type such as the traces' G2) takes no request policy:
  // the API needs min <= value and min + step <= value, and a policy's min would round the
  // "0Mi" that the engine books on it (an exclusive claim asks for the whole card) up to more
  // than the card has. Without a policy a request is consumed as asked.
  // A claim that does not say how much memory it needs takes the whole card (the API needs a
  // default with a validRange): safer than a share of it that nobody asked for.
  if (gpu.memoryMib >= 2 * kMemoryStepMib) {
    capacity["memory"]["requestPolicy"] = {
        {"default", mib(gpu.memoryMib)},
        {"validRange", {{"min", mib(kMemoryStepMib)}, {"step", mib(kMemoryStepMib)}}}};
  }
  capacity["compute"] = {
      {"value", std::to_string(kComputeMilli)},
      {"requestPolicy",
       {{"default", "0"}, {"validRange", {{"min", "0"}, {"step", std::to_string(kComputeStep)}}}}}};
  json d = {{"name", gpuDeviceName(gpu)},
            {"attributes", std::move(attrs)},
            {"capacity", std::move(capacity)},
            {"allowMultipleAllocations", true}};
  addHealth(d, gpu);
  return d;
}

json migDevice(const GpuDevice& gpu, const MigDevice& mig, const SliceOptions& o) {
  json attrs = json::object();
  attrs["type"] = stringAttr("mig");
  attrs["uuid"] = stringAttr(mig.uuid);
  attrs["parentUUID"] = stringAttr(uuidOf(gpu, o));
  attrs["profile"] = stringAttr(mig.profile);
  attrs["migStart"] = intAttr(mig.startSlot);
  addCommon(attrs, gpu, o);
  json capacity = json::object();
  std::int64_t memoryMib = 0;
  if (o.catalog != nullptr) {
    if (const model::GpuType* t = o.catalog->find(gpu.type)) {
      if (const model::MigProfile* p = t->findMigProfile(mig.profile)) memoryMib = p->memoryMib;
    }
  }
  if (memoryMib > 0) capacity["memory"] = {{"value", mib(memoryMib)}};
  json d = {{"name", migDeviceName(gpu, mig)}, {"attributes", std::move(attrs)}};
  if (!capacity.empty()) d["capacity"] = std::move(capacity);
  addHealth(d, gpu);
  return d;
}

}  // namespace

std::string gpuDeviceName(const GpuDevice& gpu) {
  return "gpu-" + std::to_string(gpu.index);
}

std::string migDeviceName(const GpuDevice& gpu, const MigDevice& mig) {
  return gpuDeviceName(gpu) + "-mig-" + dnsLabelPart(mig.profile) + "-" +
         std::to_string(std::max(0, mig.startSlot));
}

std::vector<DeviceHealth> deviceHealth(const deviceplugin::Inventory& inventory) {
  std::vector<DeviceHealth> out;
  for (const json& d : sliceDevices(inventory, SliceOptions{})) {
    DeviceHealth h;
    h.device = d.at("name").get<std::string>();
    for (const json& t : d.value("taints", json::array())) {
      if (t.value("key", "") == kUnhealthyTaint) h.healthy = false;
    }
    if (!h.healthy) {
      const std::optional<DeviceRef> ref = findDevice(inventory, h.device);
      const deviceplugin::GpuDevice* gpu = ref ? ref->gpu : nullptr;
      h.message = "the node agent reports GPU " +
                  (gpu == nullptr ? h.device : (gpu->uuid.empty() ? gpu->id : gpu->uuid)) +
                  " unhealthy" +
                  (ref && ref->mig != nullptr ? " (this is one of its MIG instances)" : "");
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::string sliceName(std::string_view nodeName, std::string_view driver, std::size_t index) {
  return std::string(nodeName) + "-" + std::string(driver) + "-" + std::to_string(index);
}

std::vector<json> sliceDevices(const deviceplugin::Inventory& inventory, const SliceOptions& o) {
  std::vector<const GpuDevice*> gpus;
  for (const GpuDevice& g : inventory.gpus) gpus.push_back(&g);
  std::ranges::sort(gpus, {}, &GpuDevice::index);
  std::vector<json> out;
  for (const GpuDevice* g : gpus) {
    if (!g->migEnabled) {
      out.push_back(gpuDevice(*g, o));
      continue;
    }
    std::vector<const MigDevice*> migs;
    for (const MigDevice& m : g->migDevices) migs.push_back(&m);
    std::ranges::sort(migs, {}, &MigDevice::startSlot);
    for (const MigDevice* m : migs) out.push_back(migDevice(*g, *m, o));
  }
  return out;
}

std::vector<json> resourceSlices(const deviceplugin::Inventory& inventory, const SliceOptions& o) {
  const std::vector<json> devices = sliceDevices(inventory, o);
  const std::size_t count =
      std::max<std::size_t>(1, (devices.size() + kMaxDevicesPerSlice - 1) / kMaxDevicesPerSlice);
  std::vector<json> out;
  for (std::size_t i = 0; i < count; ++i) {
    json list = json::array();
    for (std::size_t d = i * kMaxDevicesPerSlice;
         d < std::min(devices.size(), (i + 1) * kMaxDevicesPerSlice); ++d) {
      list.push_back(devices[d]);
    }
    out.push_back({{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceSlice"},
                   {"metadata", {{"name", sliceName(o.nodeName, o.driver, i)}}},
                   {"spec",
                    {{"driver", o.driver},
                     {"nodeName", o.nodeName},
                     {"pool",
                      {{"name", o.nodeName},
                       {"generation", o.generation},
                       {"resourceSliceCount", static_cast<std::int64_t>(count)}}},
                     {"devices", std::move(list)}}}});
  }
  return out;
}

std::optional<DeviceRef> findDevice(const deviceplugin::Inventory& inventory,
                                    std::string_view deviceName) {
  for (const GpuDevice& g : inventory.gpus) {
    if (!g.migEnabled) {
      if (gpuDeviceName(g) == deviceName) return DeviceRef{&g, nullptr};
      continue;
    }
    for (const MigDevice& m : g.migDevices) {
      if (migDeviceName(g, m) == deviceName) return DeviceRef{&g, &m};
    }
  }
  return std::nullopt;
}

}  // namespace tessera::dra
