#pragma once
// Model profiles as written in cluster and requests files, and references to them.

#include <vector>

#include "common/result.h"
#include "config/yaml_field.h"
#include "model/workload.h"

namespace tessera::config {

// One profile mapping (keys: docs/configuration.md, "Model profiles").
Result<model::ModelProfile> parseModelProfile(const Field& field);

// A `models:` list; a null field is an empty list. Names must be unique within the list.
Result<std::vector<model::ModelProfile>> parseModelList(const Field& field);

// A `model:` value: either the name of a profile in one of `scopes` (searched in order, so
// earlier scopes shadow later ones) or an inline profile mapping.
Result<model::ModelProfile> resolveModel(
    const Field& field, const std::vector<const std::vector<model::ModelProfile>*>& scopes);

}  // namespace tessera::config
