#include "k8s/pod_role.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "k8s/kube_client.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

// A DNS-1123 subdomain (what pod and namespace names are): also safe in a URL path as is.
bool dnsName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (const char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return s.front() != '-' && s.front() != '.' && s.back() != '-' && s.back() != '.';
}

std::string podPath(const PodRef& pod) {
  return "/api/v1/namespaces/" + pod.ns + "/pods/" + pod.name;
}

}  // namespace

Result<PodRef> selfPodFromEnv() {
  PodRef pod;
  for (auto [var, out] : {std::pair{"POD_NAMESPACE", &pod.ns}, std::pair{"POD_NAME", &pod.name}}) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') {
      return fail(Error::invalid(std::string(var) +
                                 " is not set (give it from the downward API: fieldRef " +
                                 (out == &pod.ns ? "metadata.namespace" : "metadata.name") + ")"));
    }
    *out = v;
    if (!dnsName(*out)) {
      return fail(Error::invalid(std::string(var) + " = '" + *out + "' is not a DNS name"));
    }
  }
  return pod;
}

Result<void> setPodRole(KubeClient& client, const PodRef& pod, std::string_view role) {
  const json patch = {{"metadata", {{"labels", {{std::string(kRoleLabel), std::string(role)}}}}}};
  auto r = client.request("PATCH", podPath(pod), patch.dump(), "application/merge-patch+json");
  const std::string what = "labelling pod " + pod.ns + "/" + pod.name + " " + std::string(role);
  if (!r) return fail(Error::internal(what + ": " + r.error().message));
  if (r->status != 200) return fail(Error::internal(what + ": " + describeFailure(*r)));
  return {};
}

Result<int> demoteOtherLeaders(KubeClient& client, const PodRef& self) {
  // labelSelector=tessera.io/role=leader, percent-encoded.
  auto r = client.request(
      "GET", "/api/v1/namespaces/" + self.ns + "/pods?labelSelector=tessera.io%2Frole%3Dleader");
  if (!r) return fail(Error::internal("listing leader pods: " + r.error().message));
  if (r->status != 200) {
    return fail(Error::internal("listing leader pods: " + describeFailure(*r)));
  }
  const json list = json::parse(r->body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    return fail(Error::internal("listing leader pods: the answer is not a List"));
  }
  int demoted = 0;
  for (const json& item : list["items"]) {
    const std::string name = item.value("/metadata/name"_json_pointer, std::string());
    if (name.empty() || name == self.name || !dnsName(name)) continue;
    TESSERA_RETURN_IF_ERROR(setPodRole(client, {self.ns, name}, kRoleStandby));
    ++demoted;
  }
  return demoted;
}

}  // namespace tessera::k8s
