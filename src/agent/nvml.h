#pragma once
// NVML, loaded at run time: the agent dlopen()s libnvidia-ml.so.1 (or the path it is told)
// and looks up the functions it needs, so the binary neither links against the driver nor
// needs it installed. A node without the library gets a clear error and the caller falls
// back to the GPUs its configuration declares (gpu_source.h).
//
// Functions that are missing from an older driver, or that a card does not support, leave
// their fields at "unknown" (-1, empty) instead of failing the whole discovery.
//
// Threading: one Nvml may be used from several threads; calls are serialised internally.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"

namespace tessera::agent {

struct NvmlProcess {
  unsigned pid = 0;
  std::int64_t usedMib = -1;  // -1: not reported
};

struct NvmlMigInstance {
  std::string uuid;
  std::int64_t memoryMib = 0;
  int startSlot = -1;  // first memory slice (GPU instance placement); -1: NVML did not say
};

struct NvmlGpu {
  unsigned index = 0;
  std::string uuid;
  std::string name;      // as NVML reports it, e.g. "NVIDIA H100 80GB HBM3"
  std::string pciBusId;  // "00000000:3B:00.0"
  std::int64_t memoryTotalMib = 0;
  std::int64_t memoryUsedMib = 0;
  int utilizationPercent = -1;  // -1: not supported
  bool migEnabled = false;
  std::vector<NvmlMigInstance> migInstances;
  int numaNode = -1;
  std::string computeCapability;  // CUDA's "major.minor.0"; empty when the driver did not say
  std::vector<int> cpuAffinity;  // CPU ids close to the card
  int nvlinkActiveLinks = 0;
  std::vector<std::string> nvlinkPeerBusIds;  // one per active link (GPU or NVSwitch)
  std::vector<NvmlProcess> processes;
};

struct XidEvent {
  std::string uuid;       // the card it happened on
  std::uint64_t xid = 0;  // NVIDIA's XID error number
};

class Nvml {
 public:
  // dlopen + dlsym + nvmlInit. Fails with a message naming the library and dlerror() when it
  // cannot be loaded, or the NVML error when the driver does not initialise.
  static Result<std::unique_ptr<Nvml>> open(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // A fresh snapshot of every card (static facts and telemetry).
  Result<std::vector<NvmlGpu>> devices();
  // XID errors that arrived since the last call; waits at most `timeoutMs` for the first.
  // Empty when the driver does not support XID events.
  std::vector<XidEvent> pollXid(unsigned timeoutMs);

  const std::string& library() const { return library_; }

  struct Api;  // the resolved function table (nvml.cc)

 private:
  Nvml(void* handle, std::string library, std::unique_ptr<Api> api);
  Result<NvmlGpu> device(unsigned index);
  void registerXidEvents();
  std::string errorText(int code) const;

  void* handle_ = nullptr;
  std::string library_;
  std::unique_ptr<Api> api_;
  std::mutex mu_;
  void* eventSet_ = nullptr;
  bool eventsTried_ = false;
};

// Groups cards that are NVLink-connected: cards linked directly (a peer bus id that is one of
// the node's cards) share a group, and cards that link to something that is not a card (an
// NVSwitch) share one switch group. -1 for a card without active links.
std::vector<int> nvlinkGroups(const std::vector<NvmlGpu>& gpus);

}  // namespace tessera::agent
