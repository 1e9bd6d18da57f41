#include "k8s/claim_admission.h"

#include <chrono>
#include <ctime>

#include "common/text.h"
#include "k8s/dra_claims.h"
#include "k8s/internal/controller_objects.h"
#include "k8s/pod.h"
#include "k8s/quantity.h"

namespace tessera::k8s {
namespace {

using json = nlohmann::json;

constexpr int kMaxClaimGpus = 16;  // a ModelDeployment's gpusPerReplica bound
// The API server may cut a warning longer than this; the event carries the whole reason up to
// the second bound (the engine's summary of a large cluster can be long).
constexpr std::size_t kWarningBytes = 256;
constexpr std::size_t kEventMessageBytes = 1024;

// `text` cut to at most `maxBytes`, at a UTF-8 character boundary, marked with "...".
std::string shortened(const std::string& text, std::size_t maxBytes) {
  if (text.size() <= maxBytes) return text;
  std::size_t cut = maxBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

std::string reviewText(const json& object, const char* key) {
  const auto v = object.find(key);
  return v != object.end() && v->is_string() ? v->get<std::string>() : "";
}

const json& reviewMember(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  const auto v = object.find(key);
  return v == object.end() ? kNull : *v;
}

std::string reviewMetaText(const json& object, const char* key) {
  return reviewText(reviewMember(object, "metadata"), key);
}

// JSON Pointer (RFC 6901) escaping of one reference token.
std::string pointerToken(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Ops that set metadata.<map>[key] = value for each entry, whether or not the map exists.
void setMetadataMap(json& ops, const json& claim, const char* map, const json& entries) {
  const json& existing = reviewMember(reviewMember(claim, "metadata"), map);
  if (!existing.is_object()) {
    ops.push_back({{"op", "add"}, {"path", std::string("/metadata/") + map}, {"value", entries}});
    return;
  }
  for (const auto& [k, v] : entries.items()) {
    ops.push_back({{"op", "add"},
                   {"path", std::string("/metadata/") + map + "/" + pointerToken(k)},
                   {"value", v}});
  }
}

// Whether a container of the pod asks for GPUs through extended resources as well.
std::string extendedGpuAsk(const json& pod) {
  const json& containers = reviewMember(reviewMember(pod, "spec"), "containers");
  if (!containers.is_array()) return "";
  for (const json& c : containers) {
    for (const char* part : {"requests", "limits"}) {
      const json& r = reviewMember(reviewMember(c, "resources"), part);
      if (!r.is_object()) continue;
      for (const auto& [k, v] : r.items()) {
        if (k.starts_with("tessera.io/") || k == kResourceWholeGpu) return k;
      }
    }
  }
  return "";
}

}  // namespace

Result<AdmissionRequest> readAdmissionReview(const json& review) {
  if (!review.is_object()) return fail(Error::invalid("body: expected an AdmissionReview object"));
  if (const std::string v = reviewText(review, "apiVersion"); v != "admission.k8s.io/v1") {
    return fail(Error::invalid("apiVersion: expected admission.k8s.io/v1, got " +
                               (v.empty() ? std::string("none") : "\"" + v + "\"")));
  }
  if (const std::string k = reviewText(review, "kind"); k != "AdmissionReview") {
    return fail(Error::invalid("kind: expected AdmissionReview, got " +
                               (k.empty() ? std::string("none") : "\"" + k + "\"")));
  }
  const json& request = reviewMember(review, "request");
  if (!request.is_object()) return fail(Error::invalid("request: missing (expected an object)"));
  AdmissionRequest out;
  out.uid = reviewText(request, "uid");
  if (out.uid.empty()) return fail(Error::invalid("request.uid: missing"));
  out.operation = reviewText(request, "operation");
  if (out.operation != "CREATE" && out.operation != "UPDATE" && out.operation != "DELETE" &&
      out.operation != "CONNECT") {
    return fail(Error::invalid("request.operation: expected CREATE, UPDATE, DELETE or CONNECT"));
  }
  const json& kind = reviewMember(request, "kind");
  if (!kind.is_object() || reviewText(kind, "kind").empty()) {
    return fail(Error::invalid("request.kind: expected {group, version, kind}"));
  }
  out.group = reviewText(kind, "group");
  out.kind = reviewText(kind, "kind");
  out.ns = reviewText(request, "namespace");
  const json& dryRun = reviewMember(request, "dryRun");
  if (!dryRun.is_null() && !dryRun.is_boolean()) {
    return fail(Error::invalid("request.dryRun: expected true or false"));
  }
  out.dryRun = dryRun.is_boolean() && dryRun.get<bool>();
  out.object = reviewMember(request, "object");
  if (out.operation == "CREATE" && !out.object.is_object()) {
    return fail(Error::invalid("request.object: expected the object being created"));
  }
  return out;
}

json admissionAnswer(const std::string& uid, bool allowed, const json& patch,
                     const std::vector<std::string>& warnings, const std::string& refusal) {
  json response = {{"uid", uid}, {"allowed", allowed}};
  if (!patch.is_null()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = base64Encode(patch.dump());
  }
  if (!warnings.empty()) response["warnings"] = warnings;
  if (!allowed) response["status"] = {{"code", 503}, {"message", refusal}};
  return {
      {"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}};
}

Result<std::optional<ClaimAsk>> readClaimAsk(const json& claim) {
  const json& requests =
      reviewMember(reviewMember(reviewMember(claim, "spec"), "devices"), "requests");
  if (!requests.is_array()) return std::optional<ClaimAsk>();
  std::optional<ClaimAsk> ask;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const json& r = requests[i];
    const std::string at = "spec.devices.requests[" + std::to_string(i) + "]";
    const json& first = reviewMember(r, "firstAvailable");
    if (first.is_array()) {
      for (const json& sub : first) {
        if (reviewText(sub, "deviceClassName") == kDeviceClassName) {
          return fail(Error::invalid(at + ".firstAvailable: Tessera pins `exactly` requests "
                                          "only; ask for GPU types with the pod annotation "
                                          "tessera.io/gpu-types"));
        }
      }
      continue;
    }
    const json& exactly = reviewMember(r, "exactly");
    if (reviewText(exactly, "deviceClassName") != kDeviceClassName) continue;
    if (ask) {
      return fail(Error::invalid(at + ": a second request of class " +
                                 std::string(kDeviceClassName) +
                                 "; Tessera pins one per claim (ask for several GPUs with count)"));
    }
    ClaimAsk a;
    a.index = i;
    a.requestName = reviewText(r, "name");
    if (a.requestName.empty()) return fail(Error::invalid(at + ".name: missing"));
    const std::string mode = reviewText(exactly, "allocationMode");
    if (!mode.empty() && mode != "ExactCount") {
      return fail(Error::invalid(at + ".exactly.allocationMode: " + mode +
                                 " cannot be pinned; Tessera places ExactCount requests"));
    }
    if (const json& count = reviewMember(exactly, "count"); !count.is_null()) {
      if (!count.is_number_integer() || count.get<std::int64_t>() < 1 ||
          count.get<std::int64_t>() > kMaxClaimGpus) {
        return fail(Error::invalid(at + ".exactly.count: expected a whole number from 1 to " +
                                   std::to_string(kMaxClaimGpus)));
      }
      a.gpus = count.get<int>();
    }
    if (const json& sel = reviewMember(exactly, "selectors"); sel.is_array() && !sel.empty()) {
      return fail(Error::invalid(at + ".exactly.selectors: Tessera replaces the selectors by its "
                                      "pin; ask for GPU types with the pod annotation "
                                      "tessera.io/gpu-types"));
    }
    if (reviewMember(exactly, "adminAccess") == true) {
      return fail(Error::invalid(at + ".exactly.adminAccess: an admin request is not placed"));
    }
    const json& caps = reviewMember(reviewMember(exactly, "capacity"), "requests");
    if (!caps.is_null() && !caps.is_object()) {
      return fail(Error::invalid(at + ".exactly.capacity.requests: expected a map"));
    }
    if (caps.is_object()) {
      for (const auto& [name, value] : caps.items()) {
        const std::string field = at + ".exactly.capacity.requests." + name;
        if (!value.is_string()) return fail(Error::invalid(field + ": expected a quantity"));
        if (name == "memory") {
          auto mib = bytesToMib(value.get<std::string>());
          if (!mib || *mib < 1) {
            return fail(Error::invalid(field + ": quantity \"" + value.get<std::string>() +
                                       "\": expected a size such as 20Gi"));
          }
          a.memoryMib = *mib;
        } else if (name == "compute") {
          auto milli = wholeNumber(value.get<std::string>());
          if (!milli || *milli < 0 || *milli > kDraComputeMilli) {
            return fail(Error::invalid(field + ": quantity \"" + value.get<std::string>() +
                                       "\": expected thousandths of a card, 0 to 1000"));
          }
          a.computeMilli = *milli;
        } else {
          return fail(Error::invalid(field + ": Tessera's GPUs have the capacities memory and "
                                             "compute only"));
        }
      }
    }
    a.tolerations = reviewMember(exactly, "tolerations");
    ask = std::move(a);
  }
  if (ask && ask->gpus > 1) {
    const json& constraints =
        reviewMember(reviewMember(reviewMember(claim, "spec"), "devices"), "constraints");
    if (constraints.is_array() && !constraints.empty()) {
      return fail(
          Error::invalid("spec.devices.constraints: a request for several GPUs is split "
                         "into one pinned request per GPU, which the constraints do not "
                         "name; NVLink and NUMA are the engine's choice "
                         "(tessera.io/* annotations)"));
    }
  }
  return ask;
}

json podAsking(json pod, const ClaimAsk& ask) {
  json& containers = pod["spec"]["containers"];
  if (!containers.is_array() || containers.empty()) containers = json::array({json::object()});
  json& requests = containers[0]["resources"]["requests"];
  if (!requests.is_object()) requests = json::object();
  if (!ask.memoryMib) {
    requests[std::string(kResourceWholeGpu)] = std::to_string(ask.gpus);
    return pod;
  }
  requests[std::string(kResourceGpus)] = std::to_string(ask.gpus);
  requests[std::string(kResourceGpuMemory)] = std::to_string(*ask.memoryMib);
  if (ask.computeMilli && *ask.computeMilli > 0) {
    requests[std::string(kResourceGpuCompute)] = std::to_string(*ask.computeMilli);
  }
  return pod;
}

json pinPatch(const json& claim, const ClaimAsk& ask, const json& choice) {
  ClaimChoice c;
  c.node = choice.value("node", "");
  c.replica = choice.value("replica", "");
  c.gpus = pinnedGpus(choice);
  json pinned = resourceClaim(c)["spec"]["devices"]["requests"];
  for (std::size_t i = 0; i < pinned.size(); ++i) {
    pinned[i]["name"] =
        pinned.size() == 1 ? ask.requestName : ask.requestName + "-" + std::to_string(i);
    if (ask.tolerations.is_array()) pinned[i]["exactly"]["tolerations"] = ask.tolerations;
  }
  const json& before = claim.at("spec").at("devices").at("requests");
  json requests = json::array();
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (i != ask.index) {
      requests.push_back(before[i]);
      continue;
    }
    for (const json& p : pinned) requests.push_back(p);
  }
  json ops = json::array();
  ops.push_back({{"op", "replace"}, {"path", "/spec/devices/requests"}, {"value", requests}});
  setMetadataMap(ops, claim, "labels",
                 {{std::string(kLabelPinned), std::string(kPinnedByAdmission)}});
  setMetadataMap(ops, claim, "annotations",
                 {{"tessera.io/node", c.node}, {"tessera.io/replica", c.replica}});
  return ops;
}

ClaimAdmission::Stats ClaimAdmission::stats() const {
  return {pinned_.load(), notPinned_.load(), refused_.load(), events_.load()};
}

void ClaimAdmission::event(const std::string& ns, const std::string& pod, const std::string& uid,
                           const std::string& message) {
  const json e = controller_internal::podWarningEvent(ns, pod, uid, "TesseraClaimNotPinned",
                                                      message, "tessera-admission");
  // Best effort: the warning in the answer says the same to whoever created the claim.
  auto res = client_.request("POST", "/api/v1/namespaces/" + ns + "/events", e.dump());
  if (res && (res->status == 201 || res->status == 200)) ++events_;
}

Result<json> ClaimAdmission::review(const json& body, const Book& book) {
  auto req = readAdmissionReview(body);
  if (!req) return fail(req.error());
  const std::string& uid = req->uid;
  auto allow = [&](std::vector<std::string> warnings = {}) {
    return admissionAnswer(uid, true, nullptr, warnings);
  };
  if (req->operation != "CREATE" || req->group != "resource.k8s.io" ||
      req->kind != "ResourceClaim") {
    return allow();
  }
  const json& claim = req->object;
  const std::string ns = req->ns.empty() ? reviewMetaText(claim, "namespace") : req->ns;
  const std::string claimName = reviewMetaText(claim, "name").empty()
                                    ? reviewMetaText(claim, "generateName") + "*"
                                    : reviewMetaText(claim, "name");
  // The pod the claim is made for: kube-controller-manager's claims from a template only.
  const json& annotations = reviewMember(reviewMember(claim, "metadata"), "annotations");
  std::string podName, podUid;
  const json& owners = reviewMember(reviewMember(claim, "metadata"), "ownerReferences");
  if (owners.is_array()) {
    for (const json& o : owners) {
      if (reviewText(o, "kind") == "Pod" && reviewText(o, "apiVersion") == "v1" &&
          reviewMember(o, "controller") == true) {
        podName = reviewText(o, "name");
        podUid = reviewText(o, "uid");
      }
    }
  }
  if (podName.empty() || !annotations.is_object() ||
      !annotations.contains(std::string(kAnnotationPodClaimName))) {
    return allow();  // not made from a pod's template (the controller's claims are pinned)
  }
  // Already pinned (a reinvocation, or a client that sent our own answer back): the pin stands.
  const json& labels = reviewMember(reviewMember(claim, "metadata"), "labels");
  if (labels.is_object() && labels.value(std::string(kLabelPinned), "") == kPinnedByAdmission) {
    return allow();
  }
  auto notPinned = [&](const std::string& why) {
    ++notPinned_;
    const std::string message = "Tessera did not pin claim " + ns + "/" + claimName + " of pod " +
                                podName + ": " + why + "; kube-scheduler allocates it by first fit";
    event(ns, podName, podUid, shortened(message, kEventMessageBytes));
    return allow({shortened(message, kWarningBytes)});
  };
  auto ask = readClaimAsk(claim);
  if (!ask) return notPinned(ask.error().message);
  if (!*ask) return allow();  // no request of Tessera's class
  if (req->dryRun) return allow({"dry run: Tessera books nothing and leaves the claim as it is"});

  auto refuse = [&](const std::string& why) {
    ++refused_;
    return admissionAnswer(uid, false, nullptr, {},
                           "Tessera cannot pin claim " + ns + "/" + claimName + " now: " + why +
                               " (the claim is created again)");
  };
  auto got = client_.request("GET", "/api/v1/namespaces/" + ns + "/pods/" + podName);
  if (!got) return refuse("reading pod " + ns + "/" + podName + ": " + got.error().message);
  if (got->status == 404) return allow();  // the pod is gone; its claim goes with it
  if (got->status != 200) {
    return refuse("reading pod " + ns + "/" + podName + ": " + describeFailure(*got));
  }
  json pod = json::parse(got->body, nullptr, false);
  if (!pod.is_object()) return refuse("pod " + ns + "/" + podName + ": the answer is not JSON");
  if (!podUid.empty() && reviewMetaText(pod, "uid") != podUid) {
    return allow();  // a pod of the same name made since: this claim's pod is gone
  }
  if (const std::string r = extendedGpuAsk(pod); !r.empty()) {
    return notPinned("the pod asks for GPUs through the extended resource " + r +
                     " as well; ask either by the claim or by resources");
  }
  auto choice = book(podAsking(std::move(pod), **ask));
  if (!choice) {
    const ErrorCode code = choice.error().code;
    if (code == ErrorCode::kInternal || code == ErrorCode::kFailedPrecondition) {
      return refuse(choice.error().message);
    }
    return notPinned(choice.error().message);
  }
  ++pinned_;
  return admissionAnswer(uid, true, pinPatch(claim, **ask, *choice));
}

}  // namespace tessera::k8s
