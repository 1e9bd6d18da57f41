#include "api/json_api.h"

#include <algorithm>
#include <string>

#include "api/device_pool_report.h"
#include "api/json_fields.h"
#include "common/names.h"
#include "config/items.h"
#include "config/model_yaml.h"
#include "config/yaml_field.h"
#include "config/yaml_json.h"

namespace tessera::api::json_api {
namespace {

using nlohmann::json;

constexpr std::string_view kBody = "body";

// Node, model and replica request bodies are decoded by the file loaders' own per-item decoders
// (config/items.h), straight from their JSON value: config::jsonToYaml builds the tree a YAML
// parser would have built from the JSON text, in memory, and Field::tree reads it without
// lines. So a body obeys the rules of docs/configuration.md to the letter (one copy of them),
// and its errors name the field relative to the body ("gpus[1].type: ...", "body: ..." for the
// whole of it) as written, with nothing to rewrite. A source-neutral view over both JSON and
// YAML was the other way; it would have meant re-implementing every reader of
// config/yaml_field.h (quoting, null, integer vs float spelling) for a second source, two
// places for one rule to drift apart.

// An optional whole number in [min, max]; nullopt when absent or null.
Result<std::optional<int>> readInt(const json& obj, std::string_view key, int min, int max) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<int>();
  if (!it->is_number_integer() || it->get<std::int64_t>() < min || it->get<std::int64_t>() > max) {
    return fail(fieldError(
        key, "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max)));
  }
  return std::optional<int>(it->get<int>());
}

Result<std::optional<double>> readNumber(const json& obj, std::string_view key, double min,
                                         double max) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number() || it->get<double>() < min || it->get<double>() > max) {
    return fail(fieldError(
        key, "expected a number from " + std::to_string(min) + " to " + std::to_string(max)));
  }
  return std::optional<double>(it->get<double>());
}

Result<GpuReport> decodeGpuReport(const json& g, const std::string& path) {
  TESSERA_RETURN_IF_ERROR(
      onlyKeys(g, path, {"id", "usedMib", "utilization", "healthy", "replicaUsedMib"}));
  GpuReport r;
  const auto id = g.find("id");
  if (id == g.end() || !id->is_string()) return fail(fieldError(path + ".id", "required text"));
  r.id = id->get<std::string>();
  // The range (0 to the card's memory) is the plane's to check: the card is the node's.
  if (const json* used = member(g, "usedMib"); used != nullptr) {
    if (!used->is_number_integer())
      return fail(fieldError(path + ".usedMib", "expected an integer"));
    r.usedMib = used->get<std::int64_t>();
  }
  if (const auto u = g.find("utilization"); u != g.end()) {
    if (!u->is_number() || u->get<double>() < 0 || u->get<double>() > 1) {
      return fail(fieldError(path + ".utilization", "expected a number from 0 to 1"));
    }
    r.utilizationMilli = static_cast<std::int32_t>(u->get<double>() * 1000 + 0.5);
  }
  if (const auto h = g.find("healthy"); h != g.end()) {
    if (!h->is_boolean()) return fail(fieldError(path + ".healthy", "expected true or false"));
    r.healthy = h->get<bool>();
  }
  if (const auto used = g.find("replicaUsedMib"); used != g.end()) {
    if (!used->is_object()) return fail(fieldError(path + ".replicaUsedMib", "expected an object"));
    for (const auto& [rid, mib] : used->items()) {
      r.replicaUsedMib.emplace_back(rid, mib.is_number_integer()
                                             ? std::optional<std::int64_t>(mib.get<std::int64_t>())
                                             : std::nullopt);
    }
  }
  return r;
}

Result<std::vector<std::string>> textList(const json* list, const char* field) {
  std::vector<std::string> out;
  if (list == nullptr) return out;
  if (!list->is_array()) return fail(fieldError(field, "expected an array of text"));
  for (const json& x : *list) {
    if (!x.is_string()) return fail(fieldError(field, "expected an array of text"));
    out.push_back(x.get<std::string>());
  }
  return out;
}

// HPA's scaling policies: [{"type": "Pods" | "Percent", "value": N, "periodSeconds": S}], as
// Kubernetes bounds them (a value above 0, a period of 1 to 1800 s), one to ten of them.
Result<std::vector<scale::ScalingPolicy>> decodeScalingPolicies(const json& list,
                                                                const std::string& field) {
  if (!list.is_array() || list.empty() || list.size() > 10) {
    return fail(fieldError(field, "expected an array of 1 to 10 policies"));
  }
  std::vector<scale::ScalingPolicy> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    const json& p = list[i];
    if (!p.is_object()) return fail(fieldError(at, "expected an object"));
    TESSERA_RETURN_IF_ERROR(onlyKeys(p, at, {"type", "value", "periodSeconds"}));
    scale::ScalingPolicy policy;
    const auto type = p.find("type");
    const std::optional<scale::PolicyType> parsed =
        type != p.end() && type->is_string()
            ? scale::parsePolicyType(type->get_ref<const std::string&>())
            : std::nullopt;
    if (!parsed) return fail(fieldError(at + ".type", "expected Pods or Percent"));
    policy.type = *parsed;
    auto value = readInt(p, "value", 1, 100000);
    auto period = readInt(p, "periodSeconds", 1, 1800);
    for (auto* r : {&value, &period}) {
      if (!*r) return fail(Error::invalid(at + "." + r->error().message));
    }
    if (!*value || !*period) {
      return fail(fieldError(at, "value and periodSeconds are required"));
    }
    policy.value = **value;
    policy.periodSeconds = **period;
    out.push_back(policy);
  }
  return out;
}

Result<DeploymentSpec::Autoscaling> decodeAutoscaling(const json& a) {
  TESSERA_RETURN_IF_ERROR(onlyKeys(
      a, "autoscaling",
      {"recommender", "args", "warmReplicas", "syncPeriodSeconds", "scaleUpStabilizationSeconds",
       "scaleDownStabilizationSeconds", "scaleDownPolicies"}));
  DeploymentSpec::Autoscaling out;
  if (const auto r = a.find("recommender"); r != a.end()) {
    if (!r->is_string()) return fail(fieldError("autoscaling.recommender", "expected text"));
    out.recommender = r->get<std::string>();
  }
  if (const auto args = a.find("args"); args != a.end()) {
    if (!args->is_object()) return fail(fieldError("autoscaling.args", "expected an object"));
    out.args.emplace();
    for (const auto& [k, v] : args->items()) {
      if (!v.is_number()) return fail(fieldError("autoscaling.args." + k, "expected a number"));
      out.args->emplace_back(k, v.get<double>());
    }
  }
  auto warm = readInt(a, "warmReplicas", 0, 1000);
  auto sync = readInt(a, "syncPeriodSeconds", 1, 3600);
  auto up = readInt(a, "scaleUpStabilizationSeconds", 0, 3600);
  auto down = readInt(a, "scaleDownStabilizationSeconds", 0, 3600);
  for (auto* r : {&warm, &sync, &up, &down}) {
    if (!*r) return fail(Error::invalid("autoscaling." + r->error().message));
  }
  out.warmReplicas = *warm;
  out.syncPeriodSeconds = *sync;
  out.scaleUpStabilizationSeconds = *up;
  out.scaleDownStabilizationSeconds = *down;
  if (const auto list = a.find("scaleDownPolicies"); list != a.end() && !list->is_null()) {
    auto policies = decodeScalingPolicies(*list, "autoscaling.scaleDownPolicies");
    if (!policies) return fail(policies.error());
    out.scaleDownPolicies = std::move(*policies);
  }
  return out;
}

}  // namespace

Result<RegisterNode> decodeRegisterNode(const json& body, const model::GpuCatalog& catalog) {
  if (!body.is_object()) return fail(Error::invalid("body: expected a node object"));
  const YAML::Node tree = config::jsonToYaml(body);
  auto spec = config::parseNodeEntry(config::Field::tree(kBody, tree), catalog);
  if (!spec) return fail(spec.error());
  return RegisterNode{std::move(*spec)};
}

Result<Heartbeat> decodeHeartbeat(const json& body) {
  TESSERA_RETURN_IF_ERROR(onlyKeys(body, "", {"gpus", "cachedModels", "healthy", "devicePool"}));
  Heartbeat hb;
  if (const json* pool = member(body, "devicePool"); pool != nullptr) {
    auto parsed = parseDevicePool(*pool);
    if (!parsed) return fail(parsed.error());
    hb.devicePool = std::move(*parsed);
  }
  if (const json* gpus = member(body, "gpus"); gpus != nullptr) {
    if (!gpus->is_array()) return fail(fieldError("gpus", "expected an array"));
    for (std::size_t i = 0; i < gpus->size(); ++i) {
      auto gpu = decodeGpuReport((*gpus)[i], "gpus[" + std::to_string(i) + "]");
      if (!gpu) return fail(gpu.error());
      hb.gpus.push_back(std::move(*gpu));
    }
  }
  if (const auto c = body.find("cachedModels"); c != body.end()) {
    if (!c->is_array()) return fail(fieldError("cachedModels", "expected an array of names"));
    hb.cachedModels.emplace();
    for (std::size_t i = 0; i < c->size(); ++i) {
      const json& m = (*c)[i];
      if (!m.is_string()) {
        return fail(fieldError("cachedModels[" + std::to_string(i) + "]", "expected a model name"));
      }
      hb.cachedModels->push_back(m.get<std::string>());
    }
  }
  if (const auto h = body.find("healthy"); h != body.end()) {
    if (!h->is_boolean()) return fail(fieldError("healthy", "expected true or false"));
    hb.healthy = h->get<bool>();
  }
  return hb;
}

Result<PutModel> decodePutModel(const json& body) {
  if (!body.is_object()) return fail(Error::invalid("body: expected a model profile object"));
  const YAML::Node tree = config::jsonToYaml(body);
  auto profile = config::parseModelProfile(config::Field::tree(kBody, tree));
  if (!profile) return fail(profile.error());
  return PutModel{std::move(*profile)};
}

Result<PlaceReplicas> decodePlaceReplicas(const json& body, const model::GpuCatalog& catalog) {
  if (!body.is_object()) return fail(Error::invalid("body: expected a replica request object"));
  const YAML::Node tree = config::jsonToYaml(body);
  const config::Field field = config::Field::tree(kBody, tree);
  PlaceReplicas out;
  // A model named by name is the registered one, which only the plane knows: the request is
  // decoded against a stand-in of that name, and the plane puts the profile in.
  std::vector<model::ModelProfile> standIn;
  if (const config::Field m = field.child("model"); !m.absent() && m.isScalar()) {
    if (auto name = config::readName(m)) {
      standIn.emplace_back().name = *name;
      out.registeredModel = std::move(*name);
    }
  }
  auto requests = config::parseRequestEntry(field, {&standIn}, &catalog);
  if (!requests) return fail(requests.error());
  out.requests = std::move(*requests);
  return out;
}

Result<PutDeployment> decodePutDeployment(const json& body) {
  TESSERA_RETURN_IF_ERROR(onlyKeys(body, "",
                                   {"name", "model", "version", "minReplicas", "maxReplicas",
                                    "priority", "sloTtftMs", "autoscaling", "placedBy"}));
  DeploymentSpec d;
  const auto name = body.find("name");
  if (name == body.end() || !name->is_string()) return fail(fieldError("name", "required text"));
  // A subdomain of at most 63 characters: a label value on the pods it runs, and the stem of its
  // replicas' ids.
  if (auto why = checkName(name->get<std::string>(), NameKind::kSubdomain, 63)) {
    return fail(fieldError("name", *why));
  }
  d.name = name->get<std::string>();
  const auto model = body.find("model");
  if (model == body.end() || !model->is_string()) return fail(fieldError("model", "required text"));
  d.model = model->get<std::string>();
  if (const auto v = body.find("version"); v != body.end()) {
    if (!v->is_string()) return fail(fieldError("version", "expected text"));
    d.version = v->get<std::string>();
  }
  if (const auto p = body.find("placedBy"); p != body.end() && !p->is_null()) {
    if (!p->is_string() || (*p != "tessera" && *p != "kubernetes")) {
      return fail(fieldError("placedBy", "expected \"tessera\" or \"kubernetes\""));
    }
    d.placedByKubernetes = *p == "kubernetes";
    d.placedByGiven = true;
  }
  auto minR = readInt(body, "minReplicas", 0, 1000);
  if (!minR) return fail(minR.error());
  d.minReplicas = *minR;
  auto maxR = readInt(body, "maxReplicas", 1, 1000);
  if (!maxR) return fail(maxR.error());
  d.maxReplicas = *maxR;
  if (d.effectiveMaxReplicas() < d.effectiveMinReplicas()) {
    return fail(fieldError("maxReplicas", "must be at least minReplicas"));
  }
  // Absent: the model's priority, which the plane takes when it books the deployment.
  auto prio = readInt(body, "priority", -1000000, 1000000);
  if (!prio) return fail(prio.error());
  d.priority = *prio;
  auto slo = readNumber(body, "sloTtftMs", 1, 3.6e6);
  if (!slo) return fail(slo.error());
  d.sloTtftMs = *slo;
  if (const auto a = body.find("autoscaling"); a != body.end() && !a->is_null()) {
    auto autoscaling = decodeAutoscaling(*a);
    if (!autoscaling) return fail(autoscaling.error());
    d.autoscaling = std::move(*autoscaling);
  }
  // The recommender checks its own arguments: a deployment it refuses is a malformed body.
  if (auto scaler = scale::Autoscaler::create(d.autoscalerConfig()); !scaler) {
    return fail(Error::invalid("autoscaling: " + scaler.error().message));
  }
  return PutDeployment{std::move(d)};
}

Result<ReportReplicaSignals> decodeReplicaSignals(const json& body) {
  TESSERA_RETURN_IF_ERROR(
      onlyKeys(body, "",
               {"waiting", "running", "kvCacheUsage", "gpuUtilization", "computeActive",
                "prefillsPerSec", "maxConcurrency", "expectedReadyMs"}));
  auto waiting = readNumber(body, "waiting", 0, 1e9);
  auto running = readNumber(body, "running", 0, 1e9);
  auto kv = readNumber(body, "kvCacheUsage", 0, 1);
  auto gpu = readNumber(body, "gpuUtilization", 0, 1);
  auto compute = readNumber(body, "computeActive", 0, 1);
  auto prefills = readNumber(body, "prefillsPerSec", 0, 1e9);
  auto maxC = readInt(body, "maxConcurrency", 0, 1'000'000);
  auto ready = readNumber(body, "expectedReadyMs", 0, 9e15);
  for (auto* r : {&waiting, &running, &kv, &gpu, &compute, &prefills, &ready}) {
    if (!*r) return fail(r->error());
  }
  if (!maxC) return fail(maxC.error());
  return ReportReplicaSignals{.waiting = *waiting,
                              .running = *running,
                              .kvCacheUsage = *kv,
                              .gpuUtilization = *gpu,
                              .computeActive = *compute,
                              .prefillsPerSec = *prefills,
                              .expectedReadyMs = *ready,
                              .maxConcurrency = *maxC};
}

Result<ReportDeploymentSignals> decodeDeploymentSignals(const json& body) {
  TESSERA_RETURN_IF_ERROR(onlyKeys(body, "body",
                                   {"arrivalRatePerSec", "meanServiceMs", "ttftP99Ms",
                                    "meanPrefillMs", "prefillP99Ms", "bufferedRequests"}));
  auto rate = readNumber(body, "arrivalRatePerSec", 0, 1e9);
  auto service = readNumber(body, "meanServiceMs", 0, 1e9);
  auto ttft = readNumber(body, "ttftP99Ms", 0, 1e9);
  auto prefill = readNumber(body, "meanPrefillMs", 0, 1e9);
  auto prefillP99 = readNumber(body, "prefillP99Ms", 0, 1e9);
  auto buffered = readNumber(body, "bufferedRequests", 0, 1e9);
  for (auto* r : {&rate, &service, &ttft, &prefill, &prefillP99, &buffered}) {
    if (!*r) return fail(r->error());
  }
  return ReportDeploymentSignals{.arrivalRatePerSec = *rate,
                                 .meanServiceMs = *service,
                                 .ttftP99Ms = *ttft,
                                 .meanPrefillMs = *prefill,
                                 .prefillP99Ms = *prefillP99,
                                 .bufferedRequests = *buffered};
}

Result<ConfirmAllocation> decodeConfirmAllocation(const json& body) {
  if (!body.is_object()) return fail(Error::invalid("body: expected an object"));
  TESSERA_RETURN_IF_ERROR(onlyKeys(body, "", {"replica", "devices", "gpus"}));
  const json* replica = member(body, "replica");
  if (replica == nullptr || !replica->is_string() || replica->get<std::string>().empty()) {
    return fail(fieldError("replica", "required text"));
  }
  auto devices = textList(member(body, "devices"), "devices");
  if (!devices) return fail(devices.error());
  auto gpus = textList(member(body, "gpus"), "gpus");
  if (!gpus) return fail(gpus.error());
  return ConfirmAllocation{replica->get<std::string>(), std::move(*devices), std::move(*gpus)};
}

// ---- encoders

json encode(const HeartbeatAccepted& accepted) {
  return {{"node", accepted.node}, {"gpus", accepted.gpus}};
}

json encode(const SignalsAccepted& accepted) {
  return {{accepted.kind, accepted.name}, {"accepted", true}};
}

json encode(const NodeDraining& draining) {
  return {{"node", draining.node}, {"cordoned", true}, {"draining", draining.draining}};
}

json encode(const Removed& removed) {
  json out = {{removed.kind, removed.name}, {removed.deleted ? "deleted" : "removed", true}};
  if (removed.draining) out["draining"] = *removed.draining;
  return out;
}

json encode(const AllocationConfirmed& confirmed) {
  json out = {{"replica", confirmed.replica},
              {"node", confirmed.node},
              {"confirmed", true},
              {"devices", confirmed.devices},
              {"gpus", confirmed.gpus}};
  if (confirmed.swappedWith) out["swappedWith"] = *confirmed.swappedWith;
  return out;
}

// ---- a plane's operations on JSON bodies

namespace {

// The answer's JSON: the view as it is, or the typed result encoded.
template <typename T>
Result<json> encoded(Result<T> result) {
  if (!result) return fail(std::move(result.error()));
  return encode(*result);
}

// `decoded`'s error, unless `missing` (what the path names does not exist): the 404 the plane
// answers before it looks at a body.
template <typename T>
Error refusal(const Result<T>& decoded, std::optional<Error> missing) {
  return missing ? std::move(*missing) : decoded.error();
}

}  // namespace

Result<json> registerNode(ControlPlane& plane, const json& body) {
  auto request = decodeRegisterNode(body, plane.catalog());
  if (!request) return fail(request.error());
  return plane.registerNode(std::move(*request));
}

Result<json> heartbeat(ControlPlane& plane, std::string_view node, const json& body) {
  auto request = decodeHeartbeat(body);
  if (!request) return fail(refusal(request, plane.unknownNode(node)));
  return encoded(plane.heartbeat(node, std::move(*request)));
}

Result<json> putModel(ControlPlane& plane, const json& body) {
  auto request = decodePutModel(body);
  if (!request) return fail(request.error());
  return plane.putModel(std::move(*request));
}

std::expected<json, DetailedError> placeReplicas(ControlPlane& plane, const json& body) {
  auto request = decodePlaceReplicas(body, plane.catalog());
  if (!request) return std::unexpected(DetailedError{request.error(), nullptr});
  return plane.placeReplicas(std::move(*request));
}

Result<json> explain(ControlPlane& plane, const json& body) {
  auto request = decodePlaceReplicas(body, plane.catalog());
  if (!request) return fail(request.error());
  return plane.explain(std::move(*request));
}

Result<json> putDeployment(ControlPlane& plane, const json& body) {
  auto request = decodePutDeployment(body);
  if (!request) return fail(request.error());
  return plane.putDeployment(std::move(*request));
}

Result<json> replicaSignals(ControlPlane& plane, std::string_view id, const json& body) {
  auto request = decodeReplicaSignals(body);
  if (!request) return fail(refusal(request, plane.unknownReplica(id)));
  return encoded(plane.replicaSignals(id, *request));
}

Result<json> deploymentSignals(ControlPlane& plane, std::string_view name, const json& body) {
  auto request = decodeDeploymentSignals(body);
  if (!request) return fail(refusal(request, plane.unknownDeployment(name)));
  return encoded(plane.deploymentSignals(name, *request));
}

Result<json> confirmAllocation(ControlPlane& plane, std::string_view node, const json& body) {
  auto request = decodeConfirmAllocation(body);
  if (!request) return fail(refusal(request, plane.unknownNode(node)));
  return encoded(plane.confirmAllocation(node, *request));
}

}  // namespace tessera::api::json_api
