#pragma once
// One entry of a cluster or requests file, decoded from a Field. The file loaders call these
// for every list item; the API calls them on a request body that config::jsonToYaml turned
// into a tree (read with Field::tree), so a body and a file entry obey one set of rules
// (docs/configuration.md) and a body's errors name the field relative to it
// ("gpus[1].type: unknown GPU type ...", "body: ..." for the whole body).
//
// Model profiles: parseModelProfile in config/model_yaml.h.

#include <vector>

#include "common/result.h"
#include "config/yaml_field.h"
#include "model/gpu_catalog.h"
#include "model/inventory.h"
#include "model/workload.h"

namespace tessera::config {

// A `nodes[]` entry with its GPU types resolved against `catalog`, and its GPUs' uuids unique
// within it (a cluster file checks them across its nodes too).
Result<model::NodeSpec> parseNodeEntry(const Field& field, const model::GpuCatalog& catalog);

// A `requests[]` entry: one request for `replicaId`, or `count` for `name` (name-0, name-1,
// ...). A model named by `model` is looked up in `scopes`, in order; with a `catalog`, every
// name under gpuTypes must be a type or alias in it.
Result<std::vector<model::PlacementRequest>> parseRequestEntry(
    const Field& field, const std::vector<const std::vector<model::ModelProfile>*>& scopes,
    const model::GpuCatalog* catalog);

}  // namespace tessera::config
