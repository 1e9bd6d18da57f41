#pragma once
// The test API server's reading of the Kubernetes wire (k8s/testing/fake_apiserver.h): paths,
// kinds, selectors and Status bodies as the real API server spells them. Shared by the
// server's store (fake_apiserver.cc) and its routes (fake_apiserver_routes.cc).

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tessera::k8s::testing::wire {

// Cluster-scoped resources (nodes, resourceslices, deviceclasses) have no namespace.
bool namespaced(const std::string& resource);
// The store's key of an object: "ns/name", or "name" when cluster-scoped.
std::string keyOf(const std::string& resource, const std::string& ns, const std::string& name);
// obj[a][b] when it is a string, else "".
std::string text(const nlohmann::json& obj, const char* a, const char* b);
// A metav1.Status of a failure.
nlohmann::json statusBody(int code, const std::string& reason, const std::string& message);
// The HTTP status and the Status reason the real server answers for an error of this code.
int httpStatusOf(const Error& e);
std::string reasonOf(const Error& e);

// What a request path names: /api/v1/... or /apis/<group>/<version>/...
struct Target {
  std::string resource, ns, name, sub;
  bool nsGiven = false;
};
std::optional<Target> parsePath(const std::string& path);

std::string kindOf(const std::string& resource);
std::string apiVersionOf(const std::string& resource);
// A label selector: comma-separated k=v, k==v, k!=v, k, !k.
bool labelsMatch(const nlohmann::json& obj, const std::string& selector);
// A field selector: comma-separated dotted.path=value or !=value (strings only).
bool fieldsMatch(const nlohmann::json& obj, const std::string& selector);
// Now, as metadata timestamps are written (RFC 3339, seconds, UTC).
std::string nowTimestamp();

}  // namespace tessera::k8s::testing::wire
