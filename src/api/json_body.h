#pragma once
// The one decoder of request bodies reached from the network: the JSON text of every POST to
// /api/v1 and /scheduler, parsed without exceptions and with a bound on nesting.
//
// Why a bound: nlohmann::json parses iteratively, but copying, comparing and dumping a value
// recurse once per level, and the control plane copies and converts bodies (the extender
// echoes the passing v1.Node objects, config::jsonToYaml turns node, model and request bodies
// into the tree the YAML loaders' decoders read, one call per level). A
// body of 100,000 '[' (200 KB, well under the size limit) would overflow the stack of the
// thread answering it and bring the whole server down. Kubernetes objects nest about a dozen
// levels deep (a pod's affinity terms are the deepest), so the bound is generous.

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tessera::api {

inline constexpr std::size_t kMaxJsonDepth = 128;

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not
// count), scanning no further than one level past `limit`. Not a validator.
std::size_t jsonNestingDepth(std::string_view text, std::size_t limit = kMaxJsonDepth);

// `text` as JSON. Errors (invalid argument) start with "body: ": not valid JSON (with the byte
// offset of the problem), or nested deeper than `maxDepth` levels.
Result<nlohmann::json> parseJsonBody(std::string_view text, std::size_t maxDepth = kMaxJsonDepth);

}  // namespace tessera::api
