#pragma once
// A ServingModel read from a YAML mapping: a model file's root (`tessera simulate serving
// --model FILE`, with apiVersion/kind) or an entry of a fleet file's `models` (without). Every
// error names the file, line and key.

#include "common/result.h"
#include "config/yaml_field.h"
#include "sim/serving_model.h"

namespace tessera::sim {

Result<ServingModel> readServingModel(const config::Field& mapping, bool header);

}  // namespace tessera::sim
