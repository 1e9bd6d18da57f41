#pragma once
// Between YAML trees and JSON values, both ways.
//
// Plugin arguments are free-form YAML handed to plugin factories as JSON, so a plugin reads
// the same value whether its profile came from a YAML file or an HTTP request (yamlToJson).
// API bodies go the other way (jsonToYaml): a JSON body becomes the YAML tree the file
// loaders' decoders read, so a node, model or request posted to the API obeys the rules of
// docs/configuration.md to the letter, with no second copy of them.

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

// The tree a YAML parser would build from the JSON text of `value`, built in memory with no
// text in between (read it with Field::tree: it has no lines). Strings become quoted scalars
// (so "12" is text and "true" is not a bool, as in a file), integers plain decimal scalars,
// floats plain scalars as nlohmann::json writes them ("1000.0", "0.25", "1e+300": still not an
// integer where one is expected), booleans `true`/`false`, null a null node. Recursion is one
// level per nesting level: api::parseJsonBody bounds that for network input.
YAML::Node jsonToYaml(const nlohmann::json& value);

}  // namespace tessera::config
