#include "k8s/kube_state_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/dra_claims.h"
#include "k8s/kube_client.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

constexpr std::string_view kManagedBy = "app.kubernetes.io/managed-by";

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Lower-case letters and digits kept, runs of anything else one '-', no '-' at either end.
std::string slug(std::string_view s, std::size_t max) {
  std::string out;
  for (const char raw : s) {
    const char c = (raw >= 'A' && raw <= 'Z') ? static_cast<char>(raw - 'A' + 'a') : raw;
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= max) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string storePodPath(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + ns + "/pods/" + name;
}

// The pod a replica document is the booking of, from its `pod` member.
std::optional<std::pair<std::string, std::string>> podOf(std::string_view kind, const json& doc) {
  if (kind != "replica" || !doc.is_object()) return std::nullopt;
  const auto p = doc.find("pod");
  if (p == doc.end() || !p->is_object()) return std::nullopt;
  const auto ns = p->find("namespace");
  const auto name = p->find("name");
  if (ns == p->end() || name == p->end() || !ns->is_string() || !name->is_string()) {
    return std::nullopt;
  }
  return std::pair{ns->get<std::string>(), name->get<std::string>()};
}

std::string annotation(const json& obj, std::string_view key) {
  const auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  const auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return "";
  const auto v = a->find(std::string(key));
  return v != a->end() && v->is_string() ? v->get<std::string>() : "";
}

std::string metaText(const json& obj, const char* field) {
  const auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  const auto v = m->find(field);
  return v != m->end() && v->is_string() ? v->get<std::string>() : "";
}

Error failure(std::string what, const KubeResponse& r) {
  // 409 is a conflict (another writer first); anything else the API server refused.
  const ErrorCode code = r.status == 409 ? ErrorCode::kFailedPrecondition : ErrorCode::kInternal;
  return Error{code, std::move(what) + ": " + describeFailure(r)};
}

Result<json> listItems(KubeClient& client, const std::string& path, const std::string& what) {
  auto r = client.request("GET", path);
  if (!r) return fail(Error::internal("listing " + what + ": " + r.error().message));
  if (r->status != 200) return fail(failure("listing " + what, *r));
  json list = json::parse(r->body, nullptr, false);
  if (list.is_discarded() || !list.is_object() || !list.contains("items") ||
      !list["items"].is_array()) {
    return fail(Error::internal("listing " + what + ": the answer is not a List"));
  }
  return list["items"];
}

}  // namespace

KubeStateStore::KubeStateStore(KubeClient& client, std::string ns)
    : client_(client), ns_(std::move(ns)) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  nextSeq_ = us;
  revision_ = us;
}

std::string KubeStateStore::configMapName(std::string_view kind, std::string_view name) {
  char hash[17];
  std::snprintf(
      hash, sizeof hash, "%016llx",
      static_cast<unsigned long long>(fnv1a(std::string(kind) + '\0' + std::string(name))));
  std::string out = "tessera-" + slug(kind, 40) + "-";
  const std::string n = slug(name, 180);
  if (!n.empty()) out += n + "-";
  return out + hash;
}

std::string KubeStateStore::describe() const {
  return "kubernetes:" + client_.config().server + "/namespaces/" + ns_;
}

Result<std::int64_t> KubeStateStore::compactEventsBefore(std::int64_t) {
  return 0;
}

Result<store::Snapshot> KubeStateStore::loadAll() const {
  std::lock_guard lock(mu_);
  store::Snapshot snap;
  std::map<Key, Placed> seen;
  auto cms = listItems(client_,
                       "/api/v1/namespaces/" + ns_ +
                           "/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dtessera%2C" +
                           "tessera.io%2Fstate-kind",
                       "the ConfigMaps of namespace " + ns_);
  if (!cms) return fail(cms.error());
  for (const json& cm : *cms) {
    const std::string cmName = metaText(cm, "name");
    const json labels =
        cm.contains("metadata") ? cm["metadata"].value("labels", json::object()) : json::object();
    const std::string kind = labels.value(std::string(kStateKindLabel), "");
    const json data = cm.value("data", json::object());
    const std::string name = data.value("name", "");
    const std::string doc = data.value("document", "");
    // A document that cannot be read stops the load: starting without it would lose it.
    if (kind.empty() || name.empty() || !json::accept(doc)) {
      return fail(Error::invalid("ConfigMap " + ns_ + "/" + cmName +
                                 ": not a Tessera document (label " + std::string(kStateKindLabel) +
                                 ", data.name and data.document as JSON are required)"));
    }
    seen[{kind, name}] = Placed{"", "", doc, metaText(cm, "resourceVersion")};
    snap.documents.push_back({kind, name, doc, 0, 0});
  }
  auto pods = listItems(client_, "/api/v1/pods?labelSelector=tessera.io%2Fbooked%3Dtrue",
                        "the pods with Tessera bookings");
  if (!pods) return fail(pods.error());
  for (const json& pod : *pods) {
    const std::string ns = metaText(pod, "namespace");
    const std::string name = metaText(pod, "name");
    const std::string booking = annotation(pod, kBookingAnnotation);
    const json spec = pod.value("spec", json::object());
    const std::string node = spec.value("nodeName", "");
    // A pod of GPU mode dra is created carrying its booking, and its claim pins the booked GPU
    // whether or not kube-scheduler has bound it yet: the booking stands (the controller
    // frees it when the pod goes, as before the takeover). So does a pod whose claim from a
    // template the claim webhook pinned (the controller frees it when the claim goes).
    if (node.empty() && !hasTesseraClaim(pod) && !usesClaimTemplate(pod)) {
      // Booked, never bound: its Binding did not land, and kube-scheduler schedules the pod
      // again. Best effort: a pod left labelled is cleared by the next load.
      const json clear = {{"metadata",
                           {{"labels", {{std::string(kBookedLabel), nullptr}}},
                            {"annotations", {{std::string(kBookingAnnotation), nullptr}}}}}};
      (void)client_.request("PATCH", storePodPath(ns, name), clear.dump(),
                            "application/merge-patch+json");
      continue;
    }
    if (!json::accept(booking)) {
      return fail(Error::invalid("pod " + ns + "/" + name + ": annotation " +
                                 std::string(kBookingAnnotation) + " is not JSON"));
    }
    const std::string id = ns + "/" + name;
    seen[{"replica", id}] = Placed{ns, name, booking, ""};
    snap.documents.push_back({"replica", id, booking, 0, 0});
  }
  std::sort(snap.documents.begin(), snap.documents.end(),
            [](const store::Document& a, const store::Document& b) {
              return std::tie(a.kind, a.name) < std::tie(b.kind, b.name);
            });
  seen_ = std::move(seen);
  snap.revision = revision_;
  return snap;
}

Result<void> KubeStateStore::put(const Key& key, const std::string& text, bool mustNotExist) {
  const json doc = json::parse(text, nullptr, false);
  const auto known = seen_.find(key);
  if (const auto pod = podOf(key.first, doc)) {
    if (mustNotExist && known != seen_.end()) {
      return fail(Error::precondition("pod " + pod->first + "/" + pod->second +
                                      " already holds a booking"));
    }
    const json patch = {{"metadata",
                         {{"labels", {{std::string(kBookedLabel), "true"}}},
                          {"annotations", {{std::string(kBookingAnnotation), text}}}}}};
    const std::string what = "booking on pod " + pod->first + "/" + pod->second;
    auto r = client_.request("PATCH", storePodPath(pod->first, pod->second), patch.dump(),
                             "application/merge-patch+json");
    if (!r) return fail(Error::internal(what + ": " + r.error().message));
    if (r->status != 200) return fail(failure(what, *r));
    seen_[key] = Placed{pod->first, pod->second, text, ""};
    return {};
  }
  const std::string cmName = configMapName(key.first, key.second);
  json cm = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", cmName},
        {"namespace", ns_},
        {"labels",
         {{std::string(kManagedBy), "tessera"}, {std::string(kStateKindLabel), key.first}}}}},
      {"data", {{"name", key.second}, {"document", text}}}};
  const std::string what = key.first + " " + key.second + " (ConfigMap " + ns_ + "/" + cmName + ")";
  const std::string base = "/api/v1/namespaces/" + ns_ + "/configmaps";
  Result<KubeResponse> r;
  const bool replace = known != seen_.end() && known->second.podName.empty() && !mustNotExist;
  if (replace) {
    // The version this replica last saw: a 409 means another writer changed it since.
    cm["metadata"]["resourceVersion"] = known->second.resourceVersion;
    r = client_.request("PUT", base + "/" + cmName, cm.dump());
  } else {
    r = client_.request("POST", base, cm.dump());
  }
  if (!r) return fail(Error::internal(what + ": " + r.error().message));
  if (r->status != 200 && r->status != 201) {
    Error e = failure(what, *r);
    if (r->status == 409) {
      e.message += replace ? " (changed by another writer since this replica read it)"
                           : " (created by another writer)";
    }
    return fail(std::move(e));
  }
  const json stored = json::parse(r->body, nullptr, false);
  seen_[key] = Placed{"", "", text, stored.is_object() ? metaText(stored, "resourceVersion") : ""};
  return {};
}

Result<void> KubeStateStore::erase(const Key& key) {
  const auto known = seen_.find(key);
  if (known != seen_.end() && !known->second.podName.empty()) {
    const Placed& p = known->second;
    const json clear = {{"metadata",
                         {{"labels", {{std::string(kBookedLabel), nullptr}}},
                          {"annotations", {{std::string(kBookingAnnotation), nullptr}}}}}};
    const std::string what = "clearing the booking on pod " + p.podNs + "/" + p.podName;
    auto r = client_.request("PATCH", storePodPath(p.podNs, p.podName), clear.dump(),
                             "application/merge-patch+json");
    if (!r) return fail(Error::internal(what + ": " + r.error().message));
    // A deleted pod took its booking with it.
    if (r->status != 200 && r->status != 404) return fail(failure(what, *r));
    seen_.erase(known);
    return {};
  }
  if (known == seen_.end() && key.first == "replica" && key.second.find('/') != std::string::npos) {
    // A booking this store did not write: a pod created carrying it (GPU mode dra), or one
    // written by the previous leader. Clear it on the pod (gone with a deleted pod), then make
    // sure no ConfigMap holds it either.
    const std::size_t slash = key.second.find('/');
    const json clear = {{"metadata",
                         {{"labels", {{std::string(kBookedLabel), nullptr}}},
                          {"annotations", {{std::string(kBookingAnnotation), nullptr}}}}}};
    auto r = client_.request(
        "PATCH", storePodPath(key.second.substr(0, slash), key.second.substr(slash + 1)),
        clear.dump(), "application/merge-patch+json");
    if (!r)
      return fail(
          Error::internal("clearing the booking on pod " + key.second + ": " + r.error().message));
    if (r->status != 200 && r->status != 404)
      return fail(failure("clearing the booking on pod " + key.second, *r));
  }
  const std::string cmName = configMapName(key.first, key.second);
  json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (known != seen_.end() && !known->second.resourceVersion.empty()) {
    options["preconditions"] = {{"resourceVersion", known->second.resourceVersion}};
  }
  const std::string what =
      "deleting " + key.first + " " + key.second + " (ConfigMap " + ns_ + "/" + cmName + ")";
  auto r = client_.request("DELETE", "/api/v1/namespaces/" + ns_ + "/configmaps/" + cmName,
                           options.dump());
  if (!r) return fail(Error::internal(what + ": " + r.error().message));
  if (r->status != 200 && r->status != 202 && r->status != 404) return fail(failure(what, *r));
  if (known != seen_.end()) seen_.erase(known);
  return {};
}

Result<void> KubeStateStore::undo(const Key& key, const std::optional<Placed>& before) {
  if (!before) return erase(key);
  return put(key, before->json, false);
}

Result<store::CommitResult> KubeStateStore::commit(const store::Batch& batch) {
  std::lock_guard lock(mu_);
  std::set<Key> keys;
  for (const auto& u : batch.upserts()) {
    if (u.kind.empty() || u.name.empty() || !keys.insert({u.kind, u.name}).second) {
      return fail(Error::invalid(
          "batch: " + u.kind + " " + u.name +
          (u.kind.empty() || u.name.empty() ? ": kind and name are required" : ": written twice")));
    }
    if (!json::accept(u.json)) {
      return fail(Error::invalid("batch: " + u.kind + " " + u.name + ": not JSON"));
    }
    if (u.expectedRevision && *u.expectedRevision != store::kMustNotExist) {
      return fail(Error::invalid("batch: " + u.kind + " " + u.name +
                                 ": the Kubernetes store keeps no numeric revisions"));
    }
  }
  for (const auto& d : batch.deletes()) {
    if (d.kind.empty() || d.name.empty() || !keys.insert({d.kind, d.name}).second) {
      return fail(Error::invalid("batch: " + d.kind + " " + d.name + ": written twice"));
    }
    if (d.expectedRevision) {
      return fail(Error::invalid("batch: " + d.kind + " " + d.name +
                                 ": the Kubernetes store keeps no numeric revisions"));
    }
  }
  // Upserts, then deletes, one object at a time; on a failure the earlier ones are undone.
  std::vector<std::pair<Key, std::optional<Placed>>> done;
  auto rollback = [&](Error e) -> Result<store::CommitResult> {
    std::string left;
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      if (auto undone = undo(it->first, it->second); !undone) {
        left += (left.empty() ? "" : "; ") + undone.error().message;
      }
    }
    if (!left.empty()) {
      e.message +=
          "; undoing the earlier writes of this change failed too, so the API server "
          "holds part of it until the next load: " +
          left;
    }
    return fail(std::move(e));
  };
  for (const auto& u : batch.upserts()) {
    const Key key{u.kind, u.name};
    const auto it = seen_.find(key);
    std::optional<Placed> before = it != seen_.end() ? std::optional(it->second) : std::nullopt;
    if (auto ok = put(key, u.json, u.expectedRevision.has_value()); !ok)
      return rollback(ok.error());
    done.emplace_back(key, std::move(before));
  }
  for (const auto& d : batch.deletes()) {
    const Key key{d.kind, d.name};
    const auto it = seen_.find(key);
    std::optional<Placed> before = it != seen_.end() ? std::optional(it->second) : std::nullopt;
    if (auto ok = erase(key); !ok) return rollback(ok.error());
    if (before) done.emplace_back(key, std::move(before));
  }
  store::CommitResult result;
  result.revision = ++revision_;
  if (!batch.events().empty()) {
    result.firstEventSeq = nextSeq_;
    nextSeq_ += static_cast<std::int64_t>(batch.events().size());
    result.lastEventSeq = nextSeq_ - 1;
  }
  return result;
}

Result<KubeStateStore::ImportReport> KubeStateStore::importSnapshot(const store::Snapshot& from) {
  ImportReport report;
  store::Batch batch;
  for (const store::Document& d : from.documents) {
    json doc = json::parse(d.json, nullptr, false);
    if (doc.is_discarded()) {
      return fail(Error::invalid(d.kind + " " + d.name + ": the stored document is not JSON"));
    }
    const std::size_t slash = d.name.find('/');
    if (d.kind == "replica" && slash != std::string::npos && !doc.contains("pod")) {
      // Bound through the extender before bookings lived on pods: find the pod.
      const std::string ns = d.name.substr(0, slash), pod = d.name.substr(slash + 1);
      std::string node;
      {
        std::lock_guard lock(mu_);
        auto r = client_.request("GET", storePodPath(ns, pod));
        if (!r) return fail(Error::internal("reading pod " + d.name + ": " + r.error().message));
        if (r->status == 200) {
          const json p = json::parse(r->body, nullptr, false);
          if (p.is_object()) node = p.value("spec", json::object()).value("nodeName", "");
        } else if (r->status != 404) {
          return fail(failure("reading pod " + d.name, *r));
        }
      }
      if (node.empty()) {
        ++report.skipped;  // gone or never bound: nothing holds those GPUs
        continue;
      }
      doc["pod"] = {{"namespace", ns}, {"name", pod}};
    }
    batch.upsert(d.kind, d.name, doc.dump(), store::kMustNotExist);
    ++report.imported;
  }
  if (batch.empty()) return report;
  auto done = commit(batch);
  if (!done) {
    if (done.error().code == ErrorCode::kFailedPrecondition) {
      return fail(
          Error::precondition("another writer holds some of these documents already "
                              "(a second replica importing?): " +
                              done.error().message));
    }
    return fail(done.error());
  }
  return report;
}

}  // namespace tessera::k8s
