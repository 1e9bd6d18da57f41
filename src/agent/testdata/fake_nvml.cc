// A stand-in for libnvidia-ml.so.1 built by the test suite: the same C symbols, with three
// canned cards. NVML is the external dependency here; the agent's dlopen/dlsym, struct
// layouts and mapping code are what the tests exercise.
//
//   GPU 0, 1: "NVIDIA H100 80GB HBM3", NVLink to an NVSwitch (one group), NUMA 0, CPUs 0-15;
//             GPU 1 runs pid 4242 (2 GiB).
//   GPU 2:    "NVIDIA A100 80GB PCIe" (not a catalogue alias: mapped by family and memory),
//             MIG mode with a 1g.10gb instance at slice 6 and a 3g.40gb one at slice 0 (GPU
//             instances 1 and 2), no NVLink, NUMA 1, CPUs 16-31, 64.
//
// FAKE_NVML_MODE (read by nvmlInit_v2): "initfail" makes init fail; "unknown" renames GPU 2
// to a card no catalogue knows. FAKE_NVML_XID=<n>: one XID <n> event pending on GPU 1.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "agent/internal/nvml_abi.h"

namespace {

constexpr unsigned long long kMib = 1ULL << 20;

struct FakeDevice {
  const char* uuid;
  std::string name;
  unsigned long long totalMib, usedMib;
  unsigned util;
  const char* busId;
  bool mig;
  int numa;
  int links;            // active NVLinks
  const char* peerBus;  // where they go
  unsigned pids;        // processes
};

FakeDevice gpus[3];
FakeDevice migs[2] = {
    {"MIG-1111", "", 9728, 0, 0, "", false, -1, 0, "", 0},
    {"MIG-3333", "", 40192, 0, 0, "", false, -1, 0, "", 0},
};
bool initialised = false;
unsigned long long pendingXid = 0;

FakeDevice* dev(nvmlDevice_t d) {
  return reinterpret_cast<FakeDevice*>(d);
}
bool isGpu(nvmlDevice_t d) {
  return dev(d) >= gpus && dev(d) < gpus + 3;
}

// NVML's contract: the text, cut to fit, always NUL-terminated.
void copyText(char* out, unsigned length, const std::string& text) {
  const std::size_t n = std::min<std::size_t>(text.size(), length - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() {
  const char* mode = std::getenv("FAKE_NVML_MODE");
  const std::string m = mode != nullptr ? mode : "";
  if (m == "initfail") return NVML_ERROR_DRIVER_NOT_LOADED;
  gpus[0] = {"GPU-aaaa-0000",
             "NVIDIA H100 80GB HBM3",
             81559,
             1024,
             37,
             "00000000:18:00.0",
             false,
             0,
             18,
             "00000000:C0:00.0",
             0};
  gpus[1] = {"GPU-aaaa-0001",
             "NVIDIA H100 80GB HBM3",
             81559,
             3072,
             80,
             "00000000:2A:00.0",
             false,
             0,
             18,
             "00000000:C1:00.0",
             1};
  gpus[2] = {"GPU-bbbb-0002",
             m == "unknown" ? "NVIDIA Z9000" : "NVIDIA A100 80GB PCIe",
             81920,
             0,
             0,
             "00000000:9B:00.0",
             true,
             1,
             0,
             "",
             0};
  const char* xid = std::getenv("FAKE_NVML_XID");
  pendingXid = xid != nullptr ? std::strtoull(xid, nullptr, 10) : 0;
  initialised = true;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
  initialised = false;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  *count = 3;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i,
                                                                                  nvmlDevice_t* d) {
  if (i >= 3) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(&gpus[i]);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out,
                                                                      unsigned length) {
  copyText(out, length, dev(d)->uuid);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out,
                                                                      unsigned length) {
  copyText(out, length, dev(d)->name);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d,
                                                                            nvmlMemory_t* m) {
  m->total = dev(d)->totalMib * kMib;
  m->used = dev(d)->usedMib * kMib;
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d,
                                                                            nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  copyText(pci->busId, sizeof pci->busId, dev(d)->busId);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUtilizationRates(
    nvmlDevice_t d, nvmlUtilization_t* u) {
  u->gpu = dev(d)->util;
  u->memory = dev(d)->util / 2;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d,
                                                                         unsigned* current,
                                                                         unsigned* pending) {
  if (!isGpu(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *current = *pending = dev(d)->mig ? 1 : 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(
    nvmlDevice_t d, unsigned* count) {
  *count = dev(d)->mig ? 7 : 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(
    nvmlDevice_t d, unsigned i, nvmlDevice_t* out) {
  if (!dev(d)->mig || i >= 2) return NVML_ERROR_NOT_FOUND;
  *out = reinterpret_cast<nvmlDevice_t>(&migs[i]);
  return NVML_SUCCESS;
}

// GPU instances 1 (the 1g.10gb at slice 6) and 2 (the 3g.40gb at slice 0) of GPU 2.
struct FakeInstance {
  unsigned id, start, size;
};
FakeInstance instances[2] = {{1, 6, 1}, {2, 0, 4}};

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d,
                                                                              unsigned* id) {
  for (unsigned i = 0; i < 2; ++i) {
    if (dev(d) == &migs[i]) {
      *id = instances[i].id;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_INVALID_ARGUMENT;  // not a MIG device
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceById(
    nvmlDevice_t d, unsigned id, nvmlGpuInstance_t* out) {
  if (!isGpu(d) || !dev(d)->mig) return NVML_ERROR_INVALID_ARGUMENT;
  for (FakeInstance& i : instances) {
    if (i.id == id) {
      *out = reinterpret_cast<nvmlGpuInstance_t>(&i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpuInstanceGetInfo(
    nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t* info) {
  const auto* i = reinterpret_cast<const FakeInstance*>(gi);
  info->device = reinterpret_cast<nvmlDevice_t>(&gpus[2]);
  info->id = i->id;
  info->profileId = 0;
  info->placement = {i->start, i->size};
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t d,
                                                                             unsigned words,
                                                                             unsigned long* set) {
  for (unsigned w = 0; w < words; ++w) set[w] = 0;
  if (dev(d) == &gpus[2]) {
    set[0] = 0xFFFF0000UL;
    if (words > 1) set[1] = 1UL;  // CPU 64
  } else {
    set[0] = 0xFFFFUL;
  }
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d,
                                                                            unsigned* node) {
  *node = static_cast<unsigned>(dev(d)->numa);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCudaComputeCapability(
    nvmlDevice_t d, int* major, int* minor) {
  if (!isGpu(d)) return NVML_ERROR_NOT_SUPPORTED;
  *major = 9;  // every fake card is an H100
  *minor = 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkState(
    nvmlDevice_t d, unsigned link, nvmlEnableState_t* active) {
  if (dev(d)->links == 0) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= static_cast<unsigned>(dev(d)->links)) return NVML_ERROR_INVALID_ARGUMENT;
  *active = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(
    nvmlDevice_t d, unsigned, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  copyText(pci->busId, sizeof pci->busId, dev(d)->peerBus);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t d, unsigned* count, nvmlProcessInfo_t* infos) {
  const unsigned n = dev(d)->pids;
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = n;
  for (unsigned i = 0; i < n; ++i) {
    infos[i] = nvmlProcessInfo_t{4242 + i, 2048 * kMib, 0xFFFFFFFF, 0xFFFFFFFF};
  }
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  static int token;
  *set = reinterpret_cast<nvmlEventSet_t>(&token);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t) {
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t,
                                                                             unsigned long long,
                                                                             nvmlEventSet_t) {
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t,
                                                                        nvmlEventData_t* data,
                                                                        unsigned) {
  if (pendingXid == 0) return NVML_ERROR_TIMEOUT;
  std::memset(data, 0, sizeof *data);
  data->device = reinterpret_cast<nvmlDevice_t>(&gpus[1]);
  data->eventType = nvmlEventTypeXidCriticalError;
  data->eventData = pendingXid;
  pendingXid = 0;
  return NVML_SUCCESS;
}

}  // extern "C"
