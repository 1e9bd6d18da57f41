#include "dra/publisher.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "k8s/kube_client.h"

namespace tessera::dra {
namespace {

using json = nlohmann::json;
constexpr int kAttempts = 5;
constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices";

std::string describe(const k8s::KubeResponse& r) {
  std::string message = r.body.substr(0, 300);
  const json body = json::parse(r.body, nullptr, false);
  if (body.is_object() && body.contains("message") && body["message"].is_string()) {
    message = body["message"].get<std::string>();
  }
  return "HTTP " + std::to_string(r.status) + ": " + message;
}

}  // namespace

SlicePublisher::SlicePublisher(k8s::KubeClient& client, SliceOptions options)
    : client_(client), options_(std::move(options)) {}

std::string SlicePublisher::collectionPath() const {
  return std::string(kSlices) + "?fieldSelector=spec.nodeName%3D" + options_.nodeName +
         "%2Cspec.driver%3D" + options_.driver;
}

Result<PublishResult> SlicePublisher::publish(const deviceplugin::Inventory& inventory) {
  std::lock_guard lock(mu_);
  for (int attempt = 1;; ++attempt) {
    bool conflict = false;
    Result<PublishResult> r = fail(Error::internal("not published"));
    try {
      r = publishOnce(inventory, conflict);
    } catch (const json::exception& e) {
      return fail(Error::invalid("ResourceSlices of node " + options_.nodeName +
                                 ": a malformed answer from the API server: " + e.what()));
    }
    if (r || !conflict || attempt == kAttempts) return r;
  }
}

Result<PublishResult> SlicePublisher::publishOnce(const deviceplugin::Inventory& inventory,
                                                  bool& conflict) {
  auto listed = client_.request("GET", collectionPath());
  if (!listed) return fail(listed.error());
  if (listed->status != 200) {
    return fail(Error::internal("listing ResourceSlices of node " + options_.nodeName + ": " +
                                describe(*listed)));
  }
  const json list = json::parse(listed->body, nullptr, false);
  if (list.is_discarded() || !list.contains("items") || !list["items"].is_array()) {
    return fail(Error::invalid("listing ResourceSlices: the answer is not a List"));
  }
  std::map<std::string, json> existing;  // by name
  std::int64_t generation = 0;
  std::vector<json> publishedDevices;
  for (const json& item : list["items"]) {
    const std::string name = item.value("metadata", json::object()).value("name", "");
    const json spec = item.value("spec", json::object());
    if (spec.value("driver", "") != options_.driver) continue;  // a server without the selector
    if (spec.value("nodeName", "") != options_.nodeName) continue;
    generation = std::max<std::int64_t>(
        generation, spec.value("pool", json::object()).value("generation", std::int64_t{0}));
    existing.emplace(name, item);
  }
  SliceOptions o = options_;
  o.generation = std::max<std::int64_t>(generation, 1);
  std::vector<json> wanted = resourceSlices(inventory, o);
  // Unchanged: the same slices by name with the same spec at the current generation.
  bool same = existing.size() == wanted.size();
  for (const json& w : wanted) {
    if (!same) break;
    const auto it = existing.find(w["metadata"]["name"].get<std::string>());
    same = it != existing.end() && it->second.value("spec", json::object()) == w["spec"];
  }
  PublishResult out;
  out.slices = static_cast<int>(wanted.size());
  for (const json& w : wanted) out.devices += static_cast<int>(w["spec"]["devices"].size());
  if (same) {
    out.generation = o.generation;
    return out;
  }
  o.generation = generation + 1;
  wanted = resourceSlices(inventory, o);
  // Owned by the Node (as kubelet plugins do), so that deleting the Node deletes its pool.
  // A node the API server does not have (yet) leaves the slices without an owner.
  if (nodeUid_.empty()) {
    auto node = client_.request("GET", "/api/v1/nodes/" + options_.nodeName);
    if (node && node->status == 200) {
      const json n = json::parse(node->body, nullptr, false);
      if (n.is_object()) nodeUid_ = n.value("metadata", json::object()).value("uid", "");
    }
  }
  for (json& w : wanted) {
    if (!nodeUid_.empty()) {
      w["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                       {"kind", "Node"},
                                                       {"name", options_.nodeName},
                                                       {"uid", nodeUid_},
                                                       {"controller", true}}});
    }
  }
  for (json& w : wanted) {
    const std::string name = w["metadata"]["name"].get<std::string>();
    const auto it = existing.find(name);
    Result<k8s::KubeResponse> r;
    if (it == existing.end()) {
      r = client_.request("POST", kSlices, w.dump());
    } else {
      w["metadata"]["resourceVersion"] = it->second["metadata"].value("resourceVersion", "");
      r = client_.request("PUT", std::string(kSlices) + "/" + name, w.dump());
    }
    if (!r) return fail(r.error());
    if (r->status == 409 || r->status == 404) {
      conflict = true;
      return fail(Error::precondition("ResourceSlice " + name + ": " + describe(*r)));
    }
    if (r->status / 100 != 2) {
      return fail(Error::internal("writing ResourceSlice " + name + ": " + describe(*r)));
    }
    if (it != existing.end()) existing.erase(it);
  }
  for (const auto& [name, item] : existing) {
    json del = {
        {"kind", "DeleteOptions"},
        {"apiVersion", "v1"},
        {"preconditions", {{"resourceVersion", item["metadata"].value("resourceVersion", "")}}}};
    auto r = client_.request("DELETE", std::string(kSlices) + "/" + name, del.dump());
    if (!r) return fail(r.error());
    if (r->status == 409) {
      conflict = true;
      return fail(Error::precondition("ResourceSlice " + name + ": " + describe(*r)));
    }
    if (r->status / 100 != 2 && r->status != 404) {
      return fail(Error::internal("deleting ResourceSlice " + name + ": " + describe(*r)));
    }
  }
  out.changed = true;
  out.generation = o.generation;
  return out;
}

Result<void> SlicePublisher::withdraw() {
  std::lock_guard lock(mu_);
  auto listed = client_.request("GET", collectionPath());
  if (!listed) return fail(listed.error());
  if (listed->status != 200) {
    return fail(Error::internal("listing ResourceSlices: " + describe(*listed)));
  }
  const json list = json::parse(listed->body, nullptr, false);
  if (list.is_discarded() || !list.contains("items")) {
    return fail(Error::invalid("listing ResourceSlices: the answer is not a List"));
  }
  for (const json& item : list["items"]) {
    const json spec = item.value("spec", json::object());
    if (spec.value("driver", "") != options_.driver ||
        spec.value("nodeName", "") != options_.nodeName) {
      continue;
    }
    const std::string name = item["metadata"].value("name", "");
    auto r = client_.request("DELETE", std::string(kSlices) + "/" + name);
    if (!r) return fail(r.error());
    if (r->status / 100 != 2 && r->status != 404) {
      return fail(Error::internal("deleting ResourceSlice " + name + ": " + describe(*r)));
    }
  }
  return {};
}

}  // namespace tessera::dra
