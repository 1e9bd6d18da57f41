#pragma once
// A validator for the subset of OpenAPI v3 that Kubernetes structural schemas use, enough to
// check example objects against a CustomResourceDefinition without a cluster (kubectl 1.20
// cannot): type (object, array, string, integer, number, boolean), properties, required,
// additionalProperties (false or a schema), items, enum, minimum / maximum, minLength /
// maxLength, pattern (ECMAScript regex), anyOf (every branch tried), format date-time
// (shape only), x-kubernetes-int-or-string and x-kubernetes-preserve-unknown-fields.
//
// A property not in `properties` is an error where the schema has neither an
// additionalProperties schema nor x-kubernetes-preserve-unknown-fields: the API server would
// prune it silently, and kubectl's strict field validation (1.25+) refuses it.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::deploytest {

// Every violation as "<path>: <what>", e.g. "spec.rollout.canaryWeight: 150 is above the
// maximum 100". Empty when the value is valid.
std::vector<std::string> validate(const nlohmann::json& schema, const nlohmann::json& value,
                                  const std::string& path = "");

// The structural-schema rules the API server enforces on a CRD's schema: every node that is
// not inside a junctor (anyOf, allOf, oneOf, not) has a type (or is int-or-string or
// preserves unknown fields), junctors carry no types except the int-or-string pattern and no
// structure, and additionalProperties is neither false nor beside properties.
std::vector<std::string> structuralProblems(const nlohmann::json& schema,
                                            const std::string& path = "");

}  // namespace tessera::deploytest
