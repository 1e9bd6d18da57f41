#pragma once
// Readers for the Alibaba GPU cluster trace v2023 ("openb", shared/data/alibaba-gpu-2023/):
//   node list  sn,cpu_milli,memory_mib,gpu,model
//   pod list   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
//              creation_time,deletion_time,scheduled_time   (11 columns)
//           or name,cpu_milli,memory_mib,num_gpu,gpu_milli  (5 columns, the multigpu files)
// Columns are found by header name; extra columns are ignored. The time columns are not read:
// the FGD experiment has no time and no departures (shared/docs/fgd-benchmark.md §3).
//
// Malformed rows are errors naming the file, the line and the column. GPU types (node `model`
// and pod `gpu_spec`) are resolved through the GPU catalogue, whose aliases cover the trace's
// P100, V100M16, V100M32, T4, A10, G2 and G3; an unknown type is an error listing the known
// ones.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_catalog.h"
#include "model/inventory.h"

namespace tessera::sim {

// One task of a pod list.
struct TracePod {
  std::string name;
  std::int64_t cpuMilli = 0;
  std::int64_t memoryMib = 0;
  int gpus = 0;                       // k: GPUs requested; 0 for CPU-only tasks
  std::int32_t gpuMilli = 0;          // g: milli-GPU per GPU (1000 = whole card); 0 for CPU-only
  std::string gpuSpec;                // allowed types as written ("V100M16|V100M32"); empty = any
  std::vector<std::string> gpuTypes;  // gpuSpec split at '|', catalogue names, as written order

  std::int64_t totalGpuMilli() const { return static_cast<std::int64_t>(gpus) * gpuMilli; }
};

// Node list -> NodeSpecs, in file order: one GpuSpec per GPU (ids "0".."k-1", type = the
// catalogue name of `model`, capacity from the catalogue), cpuMilli, hostMemoryMib.
Result<std::vector<model::NodeSpec>> parseNodeList(std::string_view text, std::string label,
                                                   const model::GpuCatalog& catalog);
Result<std::vector<model::NodeSpec>> readNodeList(const std::string& path,
                                                  const model::GpuCatalog& catalog);

// Pod list -> pods, in file order.
Result<std::vector<TracePod>> parsePodList(std::string_view text, std::string label,
                                           const model::GpuCatalog& catalog);
Result<std::vector<TracePod>> readPodList(const std::string& path,
                                          const model::GpuCatalog& catalog);

// Total GPU capacity of a node list in milli-GPUs (1000 per GPU).
std::int64_t gpuCapacityMilli(const std::vector<model::NodeSpec>& nodes);

// "openb_pod_list_gpuspec33.csv" (any directory) -> "gpuspec33"; other names -> the file
// name without directory and extension.
std::string traceNameOf(std::string_view path);

}  // namespace tessera::sim
