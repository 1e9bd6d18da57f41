#pragma once
// Plugin arguments are free-form YAML handed to plugin factories as JSON, so a plugin reads
// the same value whether its profile came from a YAML file or an HTTP request.

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "config/yaml_field.h"

namespace tessera::config {

// Mappings become objects and sequences arrays. Quoted scalars (and !!str) are always
// strings; plain scalars follow the YAML 1.2 core schema: true/false (any case spelling
// YAML allows: true, True, TRUE), null/~/empty, decimal integers (int64), decimal floats
// ("1.5", "2e-3", ".5"), and everything else a string. Hex and octal integers and
// .inf/.nan stay strings. Mapping keys must be scalars and unique.
Result<nlohmann::json> yamlToJson(const Field& field);

}  // namespace tessera::config
