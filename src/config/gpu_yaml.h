#pragma once
// GPU types (the cluster file's `gpuTypes:`) and a node's GPUs (`nodes[i].gpus:`).

#include <vector>

#include "common/result.h"
#include "config/yaml_field.h"
#include "model/gpu_catalog.h"
#include "model/inventory.h"

namespace tessera::config {

// One custom GPU type; its figures are checked by model::validateGpuType.
Result<model::GpuType> parseGpuType(const Field& field);

// A node's `gpus:` value: a list of GPU mappings, or the shorthand mapping
// {type, count, nvlinkGroups, numaNodes, ...} expanded into `count` GPUs with ids "0".."n-1".
// Types are resolved against `catalog` and stored under their catalogue name; capacity the
// file leaves out comes from the type. Ids must be unique within the node.
Result<std::vector<model::GpuSpec>> parseNodeGpus(const Field& field,
                                                  const model::GpuCatalog& catalog);

}  // namespace tessera::config
