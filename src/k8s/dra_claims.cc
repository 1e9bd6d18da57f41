#include "k8s/dra_claims.h"

namespace tessera::k8s {
namespace {

using json = nlohmann::json;

std::string celString(std::string_view s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string attr(std::string_view driver, std::string_view name) {
  return "device.attributes['" + std::string(driver) + "']." + std::string(name);
}

}  // namespace

std::vector<PinnedGpu> pinnedGpus(const json& choice) {
  std::vector<PinnedGpu> out;
  const bool exclusive = choice.value("mode", "") == "exclusive";
  for (const json& g : choice.value("gpus", json::array())) {
    PinnedGpu pin;
    pin.uuid = g.value("uuid", "");
    pin.cardMemoryMib = g.value("cardMemoryMib", std::int64_t{0});
    pin.memoryMib = g.value("reservedMib", std::int64_t{0});
    pin.computeMilli = g.value("computeMilli", std::int32_t{0});
    pin.exclusive = exclusive;
    if (g.contains("migProfile")) {
      pin.migProfile = g.value("migProfile", "");
      pin.migStart = g.value("migStart", -1);
    }
    out.push_back(std::move(pin));
  }
  return out;
}

std::string pinSelector(const PinnedGpu& g, std::string_view driver) {
  // The type first: on a device without MIG attributes it is false, and CEL's && then absorbs
  // the error of reading an attribute the device does not have.
  if (!g.migProfile.empty()) {
    return attr(driver, "type") + " == 'mig' && " + attr(driver, "parentUUID") +
           " == " + celString(g.uuid) + " && " + attr(driver, "profile") +
           " == " + celString(g.migProfile) + " && " + attr(driver, "migStart") +
           " == " + std::to_string(g.migStart);
  }
  return attr(driver, "type") + " == 'gpu' && " + attr(driver, "uuid") + " == " + celString(g.uuid);
}

json resourceClaim(const ClaimChoice& c) {
  json requests = json::array();
  for (std::size_t i = 0; i < c.gpus.size(); ++i) {
    const PinnedGpu& g = c.gpus[i];
    json exactly = {{"deviceClassName", std::string(kDeviceClassName)},
                    {"allocationMode", "ExactCount"},
                    {"count", 1},
                    {"selectors", json::array({{{"cel", {{"expression", pinSelector(g)}}}}})}};
    if (g.migProfile.empty()) {
      const std::int64_t memory = g.exclusive ? g.cardMemoryMib : g.memoryMib;
      const std::int64_t compute = g.exclusive ? kDraComputeMilli : g.computeMilli;
      exactly["capacity"] = {
          {"requests",
           {{"memory", std::to_string(memory) + "Mi"}, {"compute", std::to_string(compute)}}}};
    }
    requests.push_back({{"name", "gpu-" + std::to_string(i)}, {"exactly", std::move(exactly)}});
  }
  json meta = {{"name", c.name},
               {"namespace", c.ns},
               {"labels", {{"app.kubernetes.io/managed-by", "tessera"}}},
               {"annotations", {{"tessera.io/node", c.node}}}};
  if (!c.replica.empty()) meta["annotations"]["tessera.io/replica"] = c.replica;
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", std::move(meta)},
          {"spec", {{"devices", {{"requests", std::move(requests)}}}}}};
}

json pinPod(json pod, const std::string& claimName, const std::string& node) {
  json& spec = pod["spec"];
  json claims = spec.value("resourceClaims", json::array());
  json kept = json::array();
  for (const json& e : claims) {
    if (e.value("name", "") != kPodClaimName) kept.push_back(e);
  }
  kept.push_back({{"name", std::string(kPodClaimName)}, {"resourceClaimName", claimName}});
  spec["resourceClaims"] = std::move(kept);
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (json& ctr : spec["containers"]) {
      json& rc = ctr["resources"]["claims"];
      if (!rc.is_array()) rc = json::array();
      bool has = false;
      for (const json& e : rc) has = has || e.value("name", "") == kPodClaimName;
      if (!has) rc.push_back({{"name", std::string(kPodClaimName)}});
    }
  }
  const json term = {{"key", "metadata.name"}, {"operator", "In"}, {"values", json::array({node})}};
  json& required =
      spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = json::array({json::object()});
  for (json& t : terms) {
    json& fields = t["matchFields"];
    if (!fields.is_array()) fields = json::array();
    fields.push_back(term);
  }
  return pod;
}

json deviceClass() {
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "DeviceClass"},
      {"metadata", {{"name", std::string(kDeviceClassName)}}},
      {"spec",
       {{"selectors",
         json::array(
             {{{"cel",
                {{"expression", "device.driver == '" + std::string(kDraDriverName) + "'"}}}}})}}}};
}

bool hasTesseraClaim(const json& pod) {
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return false;
  const auto claims = spec->find("resourceClaims");
  if (claims == spec->end() || !claims->is_array()) return false;
  for (const json& c : *claims) {
    if (c.is_object() && c.value("name", "") == kPodClaimName) return true;
  }
  return false;
}

bool usesClaimTemplate(const json& pod) {
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return false;
  const auto claims = spec->find("resourceClaims");
  if (claims == spec->end() || !claims->is_array()) return false;
  for (const json& c : *claims) {
    if (c.is_object() && c.contains("resourceClaimTemplateName") &&
        c["resourceClaimTemplateName"].is_string()) {
      return true;
    }
  }
  return false;
}

}  // namespace tessera::k8s
