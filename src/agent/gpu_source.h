#pragma once
// Where the agent's GPUs come from: NVML on a real node, or the virtual GPUs its
// configuration declares (a laptop, CI, a rehearsal fleet). One interface, chosen at start-up
// by openGpuSource(); nothing else in the agent knows which it has.
//
// Threading: a GpuSource is used by one thread at a time (the agent's heartbeat loop).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "common/result.h"
#include "model/gpu_catalog.h"

namespace tessera::agent {

struct AgentGpu {
  std::string id;        // "0", "1", ... as registered with the control plane
  std::string uuid;      // NVML's, or "virtual-<node>-<id>"
  std::string type;      // catalogue name
  std::string nvmlName;  // as NVML reports it; empty for a virtual GPU
  bool isVirtual = false;
  std::int64_t memoryMib = 0;
  // Telemetry; measured only on real GPUs.
  std::int64_t usedMib = 0;
  double utilization = -1;  // 0..1, -1 unknown
  bool healthy = true;
  std::vector<std::uint64_t> xids;  // XID errors seen since the agent started
  bool migEnabled = false;
  std::vector<std::string> migProfiles;  // catalogue profile of each MIG instance
  std::vector<std::string> migUuids;     // NVML's "MIG-..." UUID of each, same order
  std::vector<int> migStarts;            // first memory slice of each (-1: unknown), same order
  int numaNode = -1;
  int nvlinkGroup = -1;
  std::string computeCapability;  // "major.minor.0" from NVML; empty for a virtual GPU
  std::vector<int> cpuAffinity;
  std::vector<unsigned> processes;  // pids running on the card
};

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // "nvml" or "virtual".
  virtual std::string kind() const = 0;
  // The node's GPUs with fresh telemetry; the ids and types stay those of the first call.
  virtual Result<std::vector<AgentGpu>> sample() = 0;
};

// Picks the source the configuration asks for. kAuto tries NVML and falls back to the
// configured virtual GPUs (with a warning naming why NVML was not used); it fails when
// neither is available. `warnings` collects what a person should read.
Result<std::unique_ptr<GpuSource>> openGpuSource(const AgentConfig& config,
                                                 const model::GpuCatalog& catalog,
                                                 const std::string& nodeName,
                                                 std::vector<std::string>& warnings);

// The catalogue type of a card NVML names `nvmlName` with `memoryMib` of memory: an exact
// name or alias first, then the catalogue family named in the NVML name whose memory is
// closest (within 10 %), with a warning in `warning`. Fails naming the card and the known
// types when nothing fits.
Result<std::string> mapGpuType(const std::string& nvmlName, std::int64_t memoryMib,
                               const model::GpuCatalog& catalog, std::string& warning);

// XIDs caused by applications (bad memory access, a killed context...) rather than the card.
bool xidIsApplicationError(std::uint64_t xid);

}  // namespace tessera::agent
