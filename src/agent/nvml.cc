#include "agent/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>

#include "agent/internal/nvml_abi.h"

namespace tessera::agent {

struct Nvml::Api {
  // Required: without these there is nothing to report.
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*errorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*getCount)(unsigned*) = nullptr;
  nvmlReturn_t (*getHandleByIndex)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*getUuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*getName)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*getMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  // Optional: older drivers or cards lack some.
  nvmlReturn_t (*getPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*getUtilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*getMigMode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*getMaxMigCount)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*getMigHandle)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  // A MIG device's GPU instance, and where that instance sits on its card.
  nvmlReturn_t (*getGpuInstanceId)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*getGpuInstanceById)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*) = nullptr;
  nvmlReturn_t (*gpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*) = nullptr;
  nvmlReturn_t (*getCpuAffinity)(nvmlDevice_t, unsigned, unsigned long*) = nullptr;
  nvmlReturn_t (*getNumaNodeId)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*getCudaComputeCapability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*getNvLinkState)(nvmlDevice_t, unsigned, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*getNvLinkRemotePci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*getProcesses)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*eventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*eventSetFree)(nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*registerEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*eventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;
};

namespace {

template <typename Fn>
void resolve(void* handle, const char* symbol, Fn& out) {
  out = reinterpret_cast<Fn>(::dlsym(handle, symbol));
}

std::string fixedText(const char* buffer, std::size_t size) {
  return std::string(buffer, ::strnlen(buffer, size));
}

// NVML writes an 8-digit PCI domain ("00000000:3B:00.0"), sysfs a 4-digit lower-case one.
std::string sysfsBusId(const std::string& busId) {
  std::string id = busId;
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto colon = id.find(':');
  if (colon == 8) id = id.substr(4);
  return id;
}

int numaFromSysfs(const std::string& busId) {
  if (busId.empty()) return -1;
  std::ifstream in("/sys/bus/pci/devices/" + sysfsBusId(busId) + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;  // the kernel writes -1 on machines without NUMA
}

constexpr std::int64_t kMib = std::int64_t{1} << 20;

}  // namespace

Nvml::Nvml(void* handle, std::string library, std::unique_ptr<Api> api)
    : handle_(handle), library_(std::move(library)), api_(std::move(api)) {}

Nvml::~Nvml() {
  if (eventSet_ != nullptr && api_->eventSetFree != nullptr) {
    api_->eventSetFree(static_cast<nvmlEventSet_t>(eventSet_));
  }
  api_->shutdown();
  ::dlclose(handle_);
}

Result<std::unique_ptr<Nvml>> Nvml::open(const std::string& library) {
  ::dlerror();
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return fail(Error::notFound("NVML: cannot load " + library + " (" +
                                (why != nullptr ? why : "unknown reason") +
                                "); is the NVIDIA driver installed on this node?"));
  }
  auto api = std::make_unique<Api>();
  resolve(handle, "nvmlInit_v2", api->init);
  resolve(handle, "nvmlShutdown", api->shutdown);
  resolve(handle, "nvmlErrorString", api->errorString);
  resolve(handle, "nvmlDeviceGetCount_v2", api->getCount);
  resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api->getHandleByIndex);
  resolve(handle, "nvmlDeviceGetUUID", api->getUuid);
  resolve(handle, "nvmlDeviceGetName", api->getName);
  resolve(handle, "nvmlDeviceGetMemoryInfo", api->getMemoryInfo);
  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", api->init != nullptr},
      {"nvmlShutdown", api->shutdown != nullptr},
      {"nvmlErrorString", api->errorString != nullptr},
      {"nvmlDeviceGetCount_v2", api->getCount != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", api->getHandleByIndex != nullptr},
      {"nvmlDeviceGetUUID", api->getUuid != nullptr},
      {"nvmlDeviceGetName", api->getName != nullptr},
      {"nvmlDeviceGetMemoryInfo", api->getMemoryInfo != nullptr}};
  for (const auto& [symbol, found] : required) {
    if (!found) {
      ::dlclose(handle);
      return fail(Error::notFound("NVML: " + library + " has no " + symbol +
                                  " (driver too old, or not NVML)"));
    }
  }
  resolve(handle, "nvmlDeviceGetPciInfo_v3", api->getPciInfo);
  resolve(handle, "nvmlDeviceGetUtilizationRates", api->getUtilization);
  resolve(handle, "nvmlDeviceGetMigMode", api->getMigMode);
  resolve(handle, "nvmlDeviceGetMaxMigDeviceCount", api->getMaxMigCount);
  resolve(handle, "nvmlDeviceGetMigDeviceHandleByIndex", api->getMigHandle);
  resolve(handle, "nvmlDeviceGetGpuInstanceId", api->getGpuInstanceId);
  resolve(handle, "nvmlDeviceGetGpuInstanceById", api->getGpuInstanceById);
  resolve(handle, "nvmlGpuInstanceGetInfo", api->gpuInstanceGetInfo);
  resolve(handle, "nvmlDeviceGetCpuAffinity", api->getCpuAffinity);
  resolve(handle, "nvmlDeviceGetNumaNodeId", api->getNumaNodeId);
  resolve(handle, "nvmlDeviceGetCudaComputeCapability", api->getCudaComputeCapability);
  resolve(handle, "nvmlDeviceGetNvLinkState", api->getNvLinkState);
  resolve(handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api->getNvLinkRemotePci);
  resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", api->getProcesses);
  resolve(handle, "nvmlEventSetCreate", api->eventSetCreate);
  resolve(handle, "nvmlEventSetFree", api->eventSetFree);
  resolve(handle, "nvmlDeviceRegisterEvents", api->registerEvents);
  resolve(handle, "nvmlEventSetWait_v2", api->eventSetWait);
  if (const nvmlReturn_t rc = api->init(); rc != NVML_SUCCESS) {
    // The text lives in the library: copy it before closing it.
    const char* text = api->errorString(rc);
    std::string message =
        "NVML: nvmlInit failed: " + std::string(text != nullptr ? text : "unknown error") +
        " (code " + std::to_string(rc) + ")";
    ::dlclose(handle);
    return fail(Error::precondition(std::move(message)));
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, library, std::move(api)));
}

std::string Nvml::errorText(int code) const {
  const char* text = api_->errorString(code);
  return std::string(text != nullptr ? text : "unknown error") + " (code " + std::to_string(code) +
         ")";
}

Result<NvmlGpu> Nvml::device(unsigned index) {
  const Api& a = *api_;
  nvmlDevice_t dev = nullptr;
  const std::string where = "NVML: GPU " + std::to_string(index) + ": ";
  if (const auto rc = a.getHandleByIndex(index, &dev); rc != NVML_SUCCESS) {
    return fail(Error::internal(where + "nvmlDeviceGetHandleByIndex: " + errorText(rc)));
  }
  NvmlGpu g;
  g.index = index;
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (const auto rc = a.getUuid(dev, text, sizeof text); rc != NVML_SUCCESS) {
    return fail(Error::internal(where + "nvmlDeviceGetUUID: " + errorText(rc)));
  }
  g.uuid = fixedText(text, sizeof text);
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (const auto rc = a.getName(dev, name, sizeof name); rc != NVML_SUCCESS) {
    return fail(Error::internal(where + "nvmlDeviceGetName: " + errorText(rc)));
  }
  g.name = fixedText(name, sizeof name);
  nvmlMemory_t memory{};
  if (const auto rc = a.getMemoryInfo(dev, &memory); rc != NVML_SUCCESS) {
    return fail(Error::internal(where + "nvmlDeviceGetMemoryInfo: " + errorText(rc)));
  }
  g.memoryTotalMib = static_cast<std::int64_t>(memory.total / kMib);
  g.memoryUsedMib = static_cast<std::int64_t>(memory.used / kMib);
  if (a.getPciInfo != nullptr) {
    nvmlPciInfo_t pci{};
    if (a.getPciInfo(dev, &pci) == NVML_SUCCESS)
      g.pciBusId = fixedText(pci.busId, sizeof pci.busId);
  }
  if (a.getUtilization != nullptr) {
    nvmlUtilization_t u{};
    if (a.getUtilization(dev, &u) == NVML_SUCCESS) g.utilizationPercent = static_cast<int>(u.gpu);
  }
  if (a.getMigMode != nullptr) {
    unsigned current = 0, pending = 0;
    if (a.getMigMode(dev, &current, &pending) == NVML_SUCCESS) g.migEnabled = current == 1;
  }
  if (g.migEnabled && a.getMaxMigCount != nullptr && a.getMigHandle != nullptr) {
    unsigned slots = 0;
    if (a.getMaxMigCount(dev, &slots) == NVML_SUCCESS) {
      for (unsigned i = 0; i < slots; ++i) {
        nvmlDevice_t mig = nullptr;
        if (a.getMigHandle(dev, i, &mig) != NVML_SUCCESS) continue;  // an empty slot
        NvmlMigInstance m;
        char migUuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        if (a.getUuid(mig, migUuid, sizeof migUuid) == NVML_SUCCESS) {
          m.uuid = fixedText(migUuid, sizeof migUuid);
        }
        nvmlMemory_t migMemory{};
        if (a.getMemoryInfo(mig, &migMemory) == NVML_SUCCESS) {
          m.memoryMib = static_cast<std::int64_t>(migMemory.total / kMib);
        }
        // The start slice, so a booking that names one gets that instance (an older driver
        // without these calls leaves it unknown).
        unsigned instanceId = 0;
        nvmlGpuInstance_t instance = nullptr;
        nvmlGpuInstanceInfo_t info{};
        if (a.getGpuInstanceId != nullptr && a.getGpuInstanceById != nullptr &&
            a.gpuInstanceGetInfo != nullptr && a.getGpuInstanceId(mig, &instanceId) == NVML_SUCCESS &&
            a.getGpuInstanceById(dev, instanceId, &instance) == NVML_SUCCESS &&
            a.gpuInstanceGetInfo(instance, &info) == NVML_SUCCESS) {
          m.startSlot = static_cast<int>(info.placement.start);
        }
        g.migInstances.push_back(std::move(m));
      }
    }
  }
  if (a.getNumaNodeId != nullptr) {
    unsigned node = 0;
    if (a.getNumaNodeId(dev, &node) == NVML_SUCCESS) g.numaNode = static_cast<int>(node);
  }
  if (g.numaNode < 0) g.numaNode = numaFromSysfs(g.pciBusId);
  if (a.getCudaComputeCapability != nullptr) {
    int major = 0, minor = 0;
    if (a.getCudaComputeCapability(dev, &major, &minor) == NVML_SUCCESS && major > 0) {
      g.computeCapability = std::to_string(major) + "." + std::to_string(minor) + ".0";
    }
  }
  if (a.getCpuAffinity != nullptr) {
    constexpr unsigned kWords = 16;  // 1,024 CPUs
    unsigned long mask[kWords] = {};
    if (a.getCpuAffinity(dev, kWords, mask) == NVML_SUCCESS) {
      constexpr int kBits = static_cast<int>(sizeof(unsigned long) * 8);
      for (unsigned w = 0; w < kWords; ++w) {
        for (int b = 0; b < kBits; ++b) {
          if ((mask[w] >> b) & 1UL) g.cpuAffinity.push_back(static_cast<int>(w) * kBits + b);
        }
      }
    }
  }
  if (a.getNvLinkState != nullptr) {
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      // Past the card's last link NVML answers an error: stop there.
      if (a.getNvLinkState(dev, link, &active) != NVML_SUCCESS) break;
      if (active != NVML_FEATURE_ENABLED) continue;
      ++g.nvlinkActiveLinks;
      nvmlPciInfo_t peer{};
      if (a.getNvLinkRemotePci != nullptr &&
          a.getNvLinkRemotePci(dev, link, &peer) == NVML_SUCCESS) {
        g.nvlinkPeerBusIds.push_back(fixedText(peer.busId, sizeof peer.busId));
      }
    }
  }
  if (a.getProcesses != nullptr) {
    unsigned count = 64;
    std::vector<nvmlProcessInfo_t> infos(count);
    nvmlReturn_t rc = a.getProcesses(dev, &count, infos.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      infos.resize(count + 16);
      count = static_cast<unsigned>(infos.size());
      rc = a.getProcesses(dev, &count, infos.data());
    }
    if (rc == NVML_SUCCESS) {
      for (unsigned i = 0; i < count && i < infos.size(); ++i) {
        NvmlProcess p;
        p.pid = infos[i].pid;
        // NVML reports "not available" as all ones.
        if (infos[i].usedGpuMemory != ~0ULL) {
          p.usedMib = static_cast<std::int64_t>(infos[i].usedGpuMemory / kMib);
        }
        g.processes.push_back(p);
      }
    }
  }
  return g;
}

Result<std::vector<NvmlGpu>> Nvml::devices() {
  std::lock_guard lock(mu_);
  unsigned count = 0;
  if (const auto rc = api_->getCount(&count); rc != NVML_SUCCESS) {
    return fail(Error::internal("NVML: nvmlDeviceGetCount: " + errorText(rc)));
  }
  std::vector<NvmlGpu> out;
  for (unsigned i = 0; i < count; ++i) {
    auto g = device(i);
    if (!g) return fail(g.error());
    out.push_back(std::move(*g));
  }
  return out;
}

void Nvml::registerXidEvents() {
  eventsTried_ = true;
  const Api& a = *api_;
  if (a.eventSetCreate == nullptr || a.registerEvents == nullptr || a.eventSetWait == nullptr) {
    return;
  }
  nvmlEventSet_t set = nullptr;
  if (a.eventSetCreate(&set) != NVML_SUCCESS) return;
  unsigned count = 0;
  if (a.getCount(&count) != NVML_SUCCESS) count = 0;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (a.getHandleByIndex(i, &dev) != NVML_SUCCESS) continue;
    (void)a.registerEvents(dev, nvmlEventTypeXidCriticalError, set);  // some cards refuse
  }
  eventSet_ = set;
}

std::vector<XidEvent> Nvml::pollXid(unsigned timeoutMs) {
  std::lock_guard lock(mu_);
  if (!eventsTried_) registerXidEvents();
  std::vector<XidEvent> out;
  if (eventSet_ == nullptr) return out;
  for (unsigned wait = timeoutMs;; wait = 0) {
    nvmlEventData_t data{};
    if (api_->eventSetWait(static_cast<nvmlEventSet_t>(eventSet_), &data, wait) != NVML_SUCCESS) {
      break;  // NVML_ERROR_TIMEOUT: nothing (more) pending
    }
    if (data.eventType != nvmlEventTypeXidCriticalError) continue;
    XidEvent e;
    e.xid = data.eventData;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (api_->getUuid(data.device, uuid, sizeof uuid) == NVML_SUCCESS) {
      e.uuid = fixedText(uuid, sizeof uuid);
    }
    out.push_back(std::move(e));
    if (out.size() >= 256) break;
  }
  return out;
}

std::vector<int> nvlinkGroups(const std::vector<NvmlGpu>& gpus) {
  const std::size_t n = gpus.size();
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](std::size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::map<std::string, std::size_t> byBus;
  for (std::size_t i = 0; i < n; ++i) {
    if (!gpus[i].pciBusId.empty()) byBus[sysfsBusId(gpus[i].pciBusId)] = i;
  }
  std::optional<std::size_t> switchMember;
  for (std::size_t i = 0; i < n; ++i) {
    for (const std::string& peer : gpus[i].nvlinkPeerBusIds) {
      const auto it = byBus.find(sysfsBusId(peer));
      std::size_t other = 0;
      if (it != byBus.end()) {
        other = it->second;
      } else {  // not a card of this node: an NVSwitch
        if (!switchMember) switchMember = i;
        other = *switchMember;
      }
      parent[find(i)] = find(other);
    }
  }
  std::vector<int> out(n, -1);
  std::map<std::size_t, int> numbering;
  for (std::size_t i = 0; i < n; ++i) {
    if (gpus[i].nvlinkActiveLinks == 0) continue;
    const auto [it, added] = numbering.emplace(find(i), static_cast<int>(numbering.size()));
    out[i] = it->second;
  }
  return out;
}

}  // namespace tessera::agent
