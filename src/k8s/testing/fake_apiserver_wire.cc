#include "k8s/testing/fake_apiserver_wire.h"

#include <chrono>
#include <ctime>
#include <string>
#include <vector>

namespace tessera::k8s::testing::wire {

using nlohmann::json;

bool namespaced(const std::string& resource) {
  return resource != "nodes" && resource != "resourceslices" && resource != "deviceclasses";
}

std::string keyOf(const std::string& resource, const std::string& ns, const std::string& name) {
  return namespaced(resource) ? ns + "/" + name : name;
}

std::string text(const json& obj, const char* a, const char* b) {
  const auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  const auto y = x->find(b);
  return y != x->end() && y->is_string() ? y->get<std::string>() : "";
}

json statusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

int httpStatusOf(const Error& e) {
  switch (e.code) {
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kFailedPrecondition:
      return 409;
    case ErrorCode::kInvalidArgument:
      return 422;
    default:
      return 500;
  }
}

std::string reasonOf(const Error& e) {
  switch (e.code) {
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kAlreadyExists:
      return "AlreadyExists";
    case ErrorCode::kFailedPrecondition:
      return "Conflict";
    case ErrorCode::kInvalidArgument:
      return "Invalid";
    default:
      return "InternalError";
  }
}

std::optional<Target> parsePath(const std::string& path) {
  std::vector<std::string> segs;
  std::size_t i = 0;
  while (i < path.size()) {
    const std::size_t j = path.find('/', i);
    const std::string seg = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!seg.empty()) segs.push_back(seg);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  std::size_t at = 0;
  bool core = false, coordination = false, dra = false;
  if (segs.size() >= 2 && segs[0] == "api" && segs[1] == "v1") {
    core = true;
    at = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis" && segs[1] == "tessera.io" &&
             segs[2] == "v1alpha1") {
    at = 3;
  } else if (segs.size() >= 3 && segs[0] == "apis" && segs[1] == "coordination.k8s.io" &&
             segs[2] == "v1") {
    at = 3;
    coordination = true;
  } else if (segs.size() >= 3 && segs[0] == "apis" && segs[1] == "resource.k8s.io" &&
             segs[2] == "v1") {
    at = 3;
    dra = true;
  } else {
    return std::nullopt;
  }
  Target t;
  if (segs.size() >= at + 3 && segs[at] == "namespaces") {
    t.ns = segs[at + 1];
    t.nsGiven = true;
    at += 2;
  }
  if (segs.size() <= at || segs.size() > at + 3) return std::nullopt;
  t.resource = segs[at];
  if (segs.size() > at + 1) t.name = segs[at + 1];
  if (segs.size() > at + 2) t.sub = segs[at + 2];
  const bool known =
      core ? t.resource == "pods" || t.resource == "nodes" ||
                 ((t.resource == "configmaps" || t.resource == "events") &&
                  (t.nsGiven || t.name.empty()))
      : coordination ? t.resource == "leases" && t.nsGiven
      : dra          ? (t.resource == "resourceclaims" && (t.nsGiven || t.name.empty())) ||
                  ((t.resource == "resourceslices" || t.resource == "deviceclasses") && !t.nsGiven)
            : t.resource == "modeldeployments";
  if (!known) return std::nullopt;
  if ((t.resource == "leases" || t.resource == "configmaps" || t.resource == "events" ||
       t.resource == "resourceslices" || t.resource == "deviceclasses") &&
      !t.sub.empty()) {
    return std::nullopt;
  }
  if (t.resource == "nodes" && t.nsGiven) return std::nullopt;
  const bool binding = t.sub == "binding" && t.resource == "pods" && t.nsGiven;
  if (!t.sub.empty() && !binding && (t.sub != "status" || t.resource == "nodes")) {
    return std::nullopt;
  }
  return t;
}

std::string kindOf(const std::string& resource) {
  if (resource == "pods") return "Pod";
  if (resource == "nodes") return "Node";
  if (resource == "leases") return "Lease";
  if (resource == "configmaps") return "ConfigMap";
  if (resource == "events") return "Event";
  if (resource == "resourceslices") return "ResourceSlice";
  if (resource == "deviceclasses") return "DeviceClass";
  if (resource == "resourceclaims") return "ResourceClaim";
  return "ModelDeployment";
}

std::string apiVersionOf(const std::string& resource) {
  if (resource == "leases") return "coordination.k8s.io/v1";
  if (resource == "resourceslices" || resource == "deviceclasses" || resource == "resourceclaims") {
    return "resource.k8s.io/v1";
  }
  return resource == "modeldeployments" ? "tessera.io/v1alpha1" : "v1";
}

namespace {

// A label or field selector's terms: its comma-separated parts, empty ones dropped.
std::vector<std::string> selectorTerms(const std::string& selector) {
  std::vector<std::string> terms;
  std::size_t i = 0;
  while (i <= selector.size()) {
    std::size_t j = selector.find(',', i);
    if (j == std::string::npos) j = selector.size();
    if (j > i) terms.push_back(selector.substr(i, j - i));
    i = j + 1;
  }
  return terms;
}

}  // namespace

bool labelsMatch(const json& obj, const std::string& selector) {
  if (selector.empty()) return true;
  json labels = json::object();
  if (const auto m = obj.find("metadata"); m != obj.end()) {
    if (const auto l = m->find("labels"); l != m->end() && l->is_object()) labels = *l;
  }
  for (const std::string& term : selectorTerms(selector)) {
    auto value = [&](const std::string& k) -> std::optional<std::string> {
      const auto it = labels.find(k);
      if (it == labels.end() || !it->is_string()) return std::nullopt;
      return it->get<std::string>();
    };
    if (const auto ne = term.find("!="); ne != std::string::npos) {
      if (value(term.substr(0, ne)) == term.substr(ne + 2)) return false;
    } else if (const auto eq = term.find('='); eq != std::string::npos) {
      const std::size_t vAt = term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
      if (value(term.substr(0, eq)) != term.substr(vAt)) return false;
    } else if (term[0] == '!') {
      if (value(term.substr(1))) return false;
    } else if (!value(term)) {
      return false;
    }
  }
  return true;
}

bool fieldsMatch(const json& obj, const std::string& selector) {
  if (selector.empty()) return true;
  for (const std::string& term : selectorTerms(selector)) {
    bool negate = false;
    std::size_t op = term.find("!=");
    std::size_t vAt = 0;
    if (op != std::string::npos) {
      negate = true;
      vAt = op + 2;
    } else {
      op = term.find('=');
      if (op == std::string::npos) return false;
      vAt = term.compare(op, 2, "==") == 0 ? op + 2 : op + 1;
    }
    const std::string path = term.substr(0, op), want = term.substr(vAt);
    const json* at = &obj;
    std::size_t p = 0;
    while (at != nullptr && p <= path.size()) {
      std::size_t q = path.find('.', p);
      if (q == std::string::npos) q = path.size();
      const std::string part = path.substr(p, q - p);
      p = q + 1;
      if (!at->is_object() || !at->contains(part)) {
        at = nullptr;
      } else {
        at = &(*at)[part];
      }
    }
    const std::string have = at != nullptr && at->is_string() ? at->get<std::string>() : "";
    if ((have == want) == negate) return false;
  }
  return true;
}

std::string nowTimestamp() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace tessera::k8s::testing::wire
