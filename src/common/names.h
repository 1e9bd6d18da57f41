#pragma once
// Names of the things Tessera books — nodes, models, deployments and replicas — follow
// Kubernetes' rules, so that every name is one the API server, kubectl and a URL path can carry:
//
//   kSubdomain  DNS-1123 subdomain: at most 253 characters of a-z, 0-9, '-' and '.', starting
//               and ending with a letter or digit (node names, model names)
//   kLabel      DNS-1123 label: at most 63 characters of a-z, 0-9 and '-', starting and ending
//               with a letter or digit (namespaces)
//   kObjectKey  a subdomain, or NAMESPACE/NAME with a label and a subdomain: what kube-scheduler
//               calls a pod (replica ids: the extender books pods as namespace/name)
//
// One place for the rule: the API, the file loaders, the extender and the agent call it.

#include <optional>
#include <string>
#include <string_view>

namespace tessera {

enum class NameKind { kSubdomain, kLabel, kObjectKey };

// nullopt when `name` is valid; else why not, e.g. "\"a/b\" is not a DNS-1123 subdomain
// (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most
// 253 characters)". Bytes outside printable ASCII are shown escaped.
std::optional<std::string> checkName(std::string_view name, NameKind kind,
                                     std::size_t maxLength = 0);

// A valid subdomain made from arbitrary text (a model directory's name): lowercased, every
// other character '-', trimmed to 253; "model" when nothing is left.
std::string toSubdomain(std::string_view text);

}  // namespace tessera
