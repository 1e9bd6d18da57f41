// The node agent's NVML discovery on its own (scripts/device-check.sh): loads the driver's
// libnvidia-ml.so.1 at run time, as the agent does, and prints what it finds as JSON, one
// object per card: index, UUID, name, memory, PCI bus, NUMA node, CUDA compute capability,
// MIG mode and instances (UUID, memory, start slice), NVLink links and the agent's NVLink
// groups. Exit 1 with the reason when NVML cannot be loaded or listed.
//
// Usage: nvml_discover [LIBRARY]   (default libnvidia-ml.so.1)

#include <iostream>

#include <nlohmann/json.hpp>

#include "agent/nvml.h"

int main(int argc, char** argv) {
  const std::string library = argc > 1 ? argv[1] : "libnvidia-ml.so.1";
  auto nvml = tessera::agent::Nvml::open(library);
  if (!nvml) {
    std::cerr << "nvml_discover: " << nvml.error().message << "\n";
    return 1;
  }
  auto gpus = (*nvml)->devices();
  if (!gpus) {
    std::cerr << "nvml_discover: " << gpus.error().message << "\n";
    return 1;
  }
  const std::vector<int> groups = tessera::agent::nvlinkGroups(*gpus);
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < gpus->size(); ++i) {
    const tessera::agent::NvmlGpu& g = (*gpus)[i];
    nlohmann::json migs = nlohmann::json::array();
    for (const auto& m : g.migInstances) {
      migs.push_back({{"uuid", m.uuid}, {"memoryMib", m.memoryMib}, {"startSlot", m.startSlot}});
    }
    out.push_back({{"index", g.index},
                   {"uuid", g.uuid},
                   {"name", g.name},
                   {"memoryTotalMib", g.memoryTotalMib},
                   {"memoryUsedMib", g.memoryUsedMib},
                   {"utilizationPercent", g.utilizationPercent},
                   {"pciBusId", g.pciBusId},
                   {"numaNode", g.numaNode},
                   {"cudaComputeCapability", g.computeCapability},
                   {"migEnabled", g.migEnabled},
                   {"migInstances", migs},
                   {"nvlinkActiveLinks", g.nvlinkActiveLinks},
                   {"nvlinkGroup", groups[i]},
                   {"processes", g.processes.size()}});
  }
  std::cout << nlohmann::json{{"library", (*nvml)->library()}, {"gpus", out}}.dump(2) << "\n";
  return 0;
}
