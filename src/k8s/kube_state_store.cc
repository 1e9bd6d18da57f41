#include "k8s/kube_state_store.h"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/dra_claims.h"
#include "k8s/kube_client.h"
#include "store/write_set.h"

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

// A booking's version: a hash of the booking itself (the pod's resourceVersion moves with
// every status change kubelet makes).
std::string bookingVersion(std::string_view text) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(text)));
  return "booking-" + std::string(hash);
}

const json& clearBookingPatch() {
  static const json clear = {{"metadata",
                              {{"labels", {{std::string(kBookedLabel), nullptr}}},
                               {"annotations", {{std::string(kBookingAnnotation), nullptr}}}}}};
  return clear;
}

// The pod a "replica" named "<namespace>/<pod>" would be the booking of.
std::optional<std::pair<std::string, std::string>> podNamed(std::string_view kind,
                                                            std::string_view name) {
  const std::size_t slash = name.find('/');
  if (kind != "replica" || slash == std::string_view::npos) return std::nullopt;
  return std::pair{std::string(name.substr(0, slash)), std::string(name.substr(slash + 1))};
}

Result<void> checkCall(std::string_view kind, std::string_view name,
                       const store::Precondition& pre) {
  if (kind.empty() || name.empty()) {
    return fail(Error::invalid("state: " + std::string(kind) + " " + std::string(name) +
                               ": kind and name are required"));
  }
  if (pre.kind == store::Precondition::Kind::kMustMatch && pre.version.empty()) {
    return fail(Error::invalid("state: " + std::string(kind) + " " + std::string(name) +
                               ": an empty version to match"));
  }
  return {};
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
    : client_(client), ns_(std::move(ns)) {}

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

Result<std::vector<KubeStateStore::Read>> KubeStateStore::readConfigMaps(
    const std::string& selector) const {
  auto cms =
      listItems(client_, "/api/v1/namespaces/" + ns_ + "/configmaps?labelSelector=" + selector,
                "the ConfigMaps of namespace " + ns_);
  if (!cms) return fail(cms.error());
  std::vector<Read> out;
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
    const std::string rv = metaText(cm, "resourceVersion");
    out.push_back({{kind, name, doc, 0, 0, rv}, Placed{"", "", doc, rv}});
  }
  return out;
}

Result<std::vector<KubeStateStore::Read>> KubeStateStore::readBookings(bool clearUnbound) const {
  auto pods = listItems(client_, "/api/v1/pods?labelSelector=tessera.io%2Fbooked%3Dtrue",
                        "the pods with Tessera bookings");
  if (!pods) return fail(pods.error());
  std::vector<Read> out;
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
      // again. Best effort: a pod left labelled is cleared by the next load. The clear holds
      // to the pod as listed: a Binding or a new booking since moves its resourceVersion, and
      // the API server then answers 409 and leaves the pod as it is.
      const std::string listed = metaText(pod, "resourceVersion");
      if (clearUnbound && !listed.empty()) {
        json clear = clearBookingPatch();
        clear["metadata"]["resourceVersion"] = listed;
        (void)client_.request("PATCH", storePodPath(ns, name), clear.dump(),
                              "application/merge-patch+json");
      }
      continue;
    }
    if (!json::accept(booking)) {
      return fail(Error::invalid("pod " + ns + "/" + name + ": annotation " +
                                 std::string(kBookingAnnotation) + " is not JSON"));
    }
    out.push_back({{"replica", ns + "/" + name, booking, 0, 0, bookingVersion(booking)},
                   Placed{ns, name, booking, ""}});
  }
  return out;
}

Result<store::Snapshot> KubeStateStore::loadAll() const {
  std::lock_guard lock(mu_);
  auto cms = readConfigMaps("app.kubernetes.io%2Fmanaged-by%3Dtessera%2Ctessera.io%2Fstate-kind");
  if (!cms) return fail(cms.error());
  auto bookings = readBookings(/*clearUnbound=*/true);
  if (!bookings) return fail(bookings.error());
  store::Snapshot snap;
  std::map<Key, Placed> seen;
  for (auto* reads : {&*cms, &*bookings}) {
    for (Read& r : *reads) {
      seen[{r.doc.kind, r.doc.name}] = std::move(r.placed);
      snap.documents.push_back(std::move(r.doc));
    }
  }
  std::sort(snap.documents.begin(), snap.documents.end(),
            [](const store::Document& a, const store::Document& b) {
              return std::tie(a.kind, a.name) < std::tie(b.kind, b.name);
            });
  seen_ = std::move(seen);
  return snap;
}

Result<std::vector<store::Document>> KubeStateStore::list(std::string_view kind) const {
  std::lock_guard lock(mu_);
  std::string selector = "app.kubernetes.io%2Fmanaged-by%3Dtessera%2Ctessera.io%2Fstate-kind%3D";
  for (const char c : kind) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_';
    if (!plain)
      return fail(Error::invalid("state: kind \"" + std::string(kind) + "\" is not a label value"));
    selector += c;
  }
  auto cms = readConfigMaps(selector);
  if (!cms) return fail(cms.error());
  std::vector<store::Document> out;
  for (Read& r : *cms) out.push_back(std::move(r.doc));
  if (kind == "replica") {
    auto bookings = readBookings(/*clearUnbound=*/false);
    if (!bookings) return fail(bookings.error());
    for (Read& r : *bookings) out.push_back(std::move(r.doc));
  }
  std::sort(out.begin(), out.end(),
            [](const store::Document& a, const store::Document& b) { return a.name < b.name; });
  return out;
}

Result<std::optional<std::string>> KubeStateStore::podBooking(const std::string& ns,
                                                              const std::string& name,
                                                              std::string* podVersion) const {
  if (podVersion) podVersion->clear();
  auto r = client_.request("GET", storePodPath(ns, name));
  if (!r) return fail(Error::internal("reading pod " + ns + "/" + name + ": " + r.error().message));
  if (r->status == 404) return std::optional<std::string>();
  if (r->status != 200) return fail(failure("reading pod " + ns + "/" + name, *r));
  const json pod = json::parse(r->body, nullptr, false);
  if (podVersion && pod.is_object()) *podVersion = metaText(pod, "resourceVersion");
  const std::string booking = pod.is_object() ? annotation(pod, kBookingAnnotation) : "";
  if (booking.empty()) return std::optional<std::string>();
  return std::optional(booking);
}

Result<void> KubeStateStore::checkBooking(const std::string& ns, const std::string& name,
                                          const store::Precondition& pre,
                                          std::string* podVersion) const {
  if (podVersion) podVersion->clear();
  if (pre.kind == store::Precondition::Kind::kNone) return {};
  auto current = podBooking(ns, name, podVersion);
  if (!current) return fail(current.error());
  if (pre.kind == store::Precondition::Kind::kMustNotExist && *current) {
    return fail(Error::precondition("pod " + ns + "/" + name + " already holds a booking"));
  }
  if (pre.kind == store::Precondition::Kind::kMustMatch &&
      (!*current || bookingVersion(**current) != pre.version)) {
    return fail(Error::precondition(
        "the booking on pod " + ns + "/" + name +
        (*current ? " was changed by another writer" : " is gone (removed by another writer)")));
  }
  return {};
}

Result<KubeResponse> KubeStateStore::patchBooking(const std::string& ns, const std::string& name,
                                                  json patch, const store::Precondition& pre,
                                                  const std::string& what) {
  // Enough for kubelet's status updates racing the write; a pod changing faster than this is
  // reported as the conflict it is.
  constexpr int kAttempts = 5;
  const bool conditional = pre.kind != store::Precondition::Kind::kNone;
  for (int attempt = 1;; ++attempt) {
    std::string podVersion;
    if (conditional) {
      TESSERA_RETURN_IF_ERROR(checkBooking(ns, name, pre, &podVersion));
      // The check read no pod (it is gone) or one without a version to hold the write to: an
      // unconditional patch could land on a pod created since.
      if (podVersion.empty()) {
        return fail(Error::notFound(what + ": pod " + ns + "/" + name +
                                    " not found, or read without a resourceVersion"));
      }
      patch["metadata"]["resourceVersion"] = podVersion;
    }
    auto r = client_.request("PATCH", storePodPath(ns, name), patch.dump(),
                             "application/merge-patch+json");
    if (!r) return fail(Error::internal(what + ": " + r.error().message));
    if (conditional && r->status == 409) {
      if (attempt < kAttempts) continue;
      return fail(Error::precondition(what + ": pod " + ns + "/" + name + " changed under " +
                                      std::to_string(kAttempts) + " writes in a row"));
    }
    if (conditional && r->status == 404) {
      return fail(Error::precondition(what + ": pod " + ns + "/" + name +
                                      " was deleted by another writer"));
    }
    return std::move(*r);
  }
}

Result<std::optional<store::Document>> KubeStateStore::get(std::string_view kind,
                                                           std::string_view name) const {
  std::lock_guard lock(mu_);
  const Key key{std::string(kind), std::string(name)};
  std::optional<std::pair<std::string, std::string>> pod = podNamed(kind, name);
  if (const auto known = seen_.find(key); known != seen_.end() && !known->second.podName.empty()) {
    pod = std::pair{known->second.podNs, known->second.podName};
  }
  if (pod) {
    auto booking = podBooking(pod->first, pod->second);
    if (!booking) return fail(booking.error());
    if (*booking) {
      return std::optional<store::Document>(
          store::Document{key.first, key.second, **booking, 0, 0, bookingVersion(**booking)});
    }
  }
  const std::string cmName = configMapName(kind, name);
  auto r = client_.request("GET", "/api/v1/namespaces/" + ns_ + "/configmaps/" + cmName);
  const std::string what =
      "reading " + key.first + " " + key.second + " (ConfigMap " + ns_ + "/" + cmName + ")";
  if (!r) return fail(Error::internal(what + ": " + r.error().message));
  if (r->status == 404) return std::optional<store::Document>();
  if (r->status != 200) return fail(failure(what, *r));
  const json cm = json::parse(r->body, nullptr, false);
  const json data = cm.is_object() ? cm.value("data", json::object()) : json::object();
  const std::string doc = data.is_object() ? data.value("document", "") : "";
  if (!json::accept(doc)) return fail(Error::invalid(what + ": data.document is not JSON"));
  return std::optional<store::Document>(
      store::Document{key.first, key.second, doc, 0, 0, metaText(cm, "resourceVersion")});
}

Result<store::Version> KubeStateStore::put(std::string_view kindView, std::string_view nameView,
                                           std::string_view textView,
                                           const store::Precondition& pre) {
  TESSERA_RETURN_IF_ERROR(checkCall(kindView, nameView, pre));
  std::lock_guard lock(mu_);
  const Key key{std::string(kindView), std::string(nameView)};
  const std::string text(textView);
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    return fail(Error::invalid("state: " + key.first + " " + key.second + ": not JSON"));
  }
  if (const auto pod = podOf(key.first, doc)) {
    const json patch = {{"metadata",
                         {{"labels", {{std::string(kBookedLabel), "true"}}},
                          {"annotations", {{std::string(kBookingAnnotation), text}}}}}};
    const std::string what = "booking on pod " + pod->first + "/" + pod->second;
    auto r = patchBooking(pod->first, pod->second, patch, pre, what);
    if (!r) return fail(r.error());
    if (r->status != 200) return fail(failure(what, *r));
    seen_[key] = Placed{pod->first, pod->second, text, ""};
    return bookingVersion(text);
  }
  const auto known = seen_.find(key);
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
  // A version to match: the caller's; else, unconditionally, the one this replica last saw
  // (a 409 then means another writer changed it since); a create, or one never seen: a POST.
  const bool seenAsConfigMap = known != seen_.end() && known->second.podName.empty();
  const bool replace = pre.kind == store::Precondition::Kind::kMustMatch ||
                       (pre.kind == store::Precondition::Kind::kNone && seenAsConfigMap);
  Result<KubeResponse> r;
  if (replace) {
    cm["metadata"]["resourceVersion"] = pre.kind == store::Precondition::Kind::kMustMatch
                                            ? pre.version
                                            : known->second.resourceVersion;
    r = client_.request("PUT", base + "/" + cmName, cm.dump());
  } else {
    r = client_.request("POST", base, cm.dump());
  }
  if (!r) return fail(Error::internal(what + ": " + r.error().message));
  if (replace && r->status == 404) {
    return fail(Error::precondition(what + ": deleted by another writer"));
  }
  if (r->status != 200 && r->status != 201) {
    Error e = failure(what, *r);
    if (r->status == 409) {
      e.message += replace ? " (changed by another writer since this replica read it)"
                           : " (created by another writer)";
    }
    return fail(std::move(e));
  }
  const json stored = json::parse(r->body, nullptr, false);
  const std::string rv = stored.is_object() ? metaText(stored, "resourceVersion") : "";
  seen_[key] = Placed{"", "", text, rv};
  return rv;
}

Result<void> KubeStateStore::remove(std::string_view kindView, std::string_view nameView,
                                    const store::Precondition& pre) {
  TESSERA_RETURN_IF_ERROR(checkCall(kindView, nameView, pre));
  const Key key{std::string(kindView), std::string(nameView)};
  if (pre.kind == store::Precondition::Kind::kMustNotExist) {
    return fail(Error::invalid("state: deleting " + key.first + " " + key.second +
                               ": cannot require that it does not exist"));
  }
  std::lock_guard lock(mu_);
  const auto known = seen_.find(key);
  const bool matchBooking =
      pre.kind == store::Precondition::Kind::kMustMatch && pre.version.starts_with("booking-");
  std::optional<std::pair<std::string, std::string>> pod;
  if (known != seen_.end() && !known->second.podName.empty()) {
    pod = std::pair{known->second.podNs, known->second.podName};
  } else if (known == seen_.end() &&
             (pre.kind == store::Precondition::Kind::kNone || matchBooking)) {
    // A booking this store did not write: a pod created carrying it (GPU mode dra), or one
    // written by the previous leader.
    pod = podNamed(key.first, key.second);
  }
  if (pod) {
    const std::string what = "clearing the booking on pod " + pod->first + "/" + pod->second;
    auto r = patchBooking(pod->first, pod->second, clearBookingPatch(), pre, what);
    if (!r) return fail(r.error());
    // A deleted pod took its booking with it.
    if (r->status != 200 && r->status != 404) return fail(failure(what, *r));
    if (known != seen_.end()) {
      seen_.erase(known);
      return {};
    }
    if (matchBooking) return {};
    // Not known to be on the pod: make sure no ConfigMap holds it either.
  }
  const std::string cmName = configMapName(key.first, key.second);
  json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  std::string version;
  if (pre.kind == store::Precondition::Kind::kMustMatch) {
    version = pre.version;
  } else if (known != seen_.end()) {
    version = known->second.resourceVersion;
  }
  if (!version.empty()) options["preconditions"] = {{"resourceVersion", version}};
  const std::string what =
      "deleting " + key.first + " " + key.second + " (ConfigMap " + ns_ + "/" + cmName + ")";
  auto r = client_.request("DELETE", "/api/v1/namespaces/" + ns_ + "/configmaps/" + cmName,
                           options.dump());
  if (!r) return fail(Error::internal(what + ": " + r.error().message));
  if (r->status == 404 && pre.kind == store::Precondition::Kind::kMustMatch) {
    return fail(Error::precondition(what + ": deleted by another writer"));
  }
  if (r->status != 200 && r->status != 202 && r->status != 404) return fail(failure(what, *r));
  if (known != seen_.end()) seen_.erase(known);
  return {};
}

Result<KubeStateStore::ImportReport> KubeStateStore::importSnapshot(const store::Snapshot& from) {
  ImportReport report;
  store::WriteSet writes;
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
    writes.put(d.kind, d.name, doc.dump(), store::Precondition::mustNotExist());
    ++report.imported;
  }
  if (writes.empty()) return report;
  auto done = store::writeAll(*this, writes);
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
