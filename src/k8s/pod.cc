#include "k8s/pod.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include <nlohmann/json.hpp>

#include "k8s/quantity.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

Error at(const std::string& path, const std::string& what) {
  return Error::invalid(path + ": " + what);
}

// obj[key] as a string, or "" when absent; an error when present with another type.
Result<std::string> optionalString(const json& obj, std::string_view key, const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return fail(at(path + "." + std::string(key), "expected a string"));
  return it->get<std::string>();
}

Result<const json*> optionalObject(const json& obj, std::string_view key, const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return static_cast<const json*>(nullptr);
  if (!it->is_object()) return fail(at(path + "." + std::string(key), "expected an object"));
  return &*it;
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  std::stringstream ss{std::string(text)};
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Bounds on one container's figures: memory and CPU as the configuration files have them
// (config/limits.h); counts far beyond the per-pod checks below, which name them better.
constexpr std::int64_t kMaxGpus = 64;  // per replica, checked on the sums
constexpr std::int64_t kMaxCount = 1'000'000;
constexpr std::int64_t kMaxGpuMemoryMib = std::int64_t{16} * 1024 * 1024;    // 16 TiB
constexpr std::int64_t kMaxCpuMilli = 10'000'000;                            // 10,000 cores
constexpr std::int64_t kMaxHostMemoryMib = std::int64_t{256} * 1024 * 1024;  // 256 TiB

// Summed resources of the pod's containers (requests, else limits).
struct Resources {
  std::int64_t wholeGpus = 0;
  std::int64_t gpus = 0;
  std::int64_t gpuMemoryMib = 0;  // per GPU: the largest any container asks for
  std::int64_t gpuComputeMilli = 0;
  std::int64_t cpuMilli = 0;
  std::int64_t memoryMib = 0;
  bool any = false;  // a GPU resource appeared
};

Result<void> addContainer(const json& container, const std::string& path, Resources& r) {
  if (!container.is_object()) return fail(at(path, "expected an object"));
  auto resources = optionalObject(container, "resources", path);
  if (!resources) return fail(resources.error());
  if (*resources == nullptr) return {};
  const std::string rpath = path + ".resources";
  auto requests = optionalObject(**resources, "requests", rpath);
  if (!requests) return fail(requests.error());
  auto limits = optionalObject(**resources, "limits", rpath);
  if (!limits) return fail(limits.error());
  // A resource's value: its request, else its limit (Kubernetes defaults requests to
  // limits), with the JSON path it was found at.
  struct Found {
    std::string text;
    std::string path;
  };
  auto value = [&](std::string_view name) -> Result<std::optional<Found>> {
    for (const auto& [table, label] : {std::pair{*requests, "requests"}, {*limits, "limits"}}) {
      if (table == nullptr) continue;
      const auto it = table->find(name);
      if (it == table->end()) continue;
      const std::string where = rpath + "." + label + "[\"" + std::string(name) + "\"]";
      if (it->is_string()) return std::optional<Found>(Found{it->get<std::string>(), where});
      if (it->is_number()) return std::optional<Found>(Found{it->dump(), where});
      return fail(at(where, "expected a quantity string"));
    }
    return std::optional<Found>();
  };
  // Each value is bounded (by far more than any machine has) so that the sums over containers
  // and the figures derived from them cannot overflow.
  auto read = [&](std::string_view name, auto parse, std::int64_t& into, bool gpuResource,
                  std::int64_t max, std::string_view unit) -> Result<void> {
    auto found = value(name);
    if (!found) return fail(found.error());
    if (!*found) return {};
    auto parsed = parse((*found)->text);
    if (!parsed) return fail(at((*found)->path, parsed.error().message));
    if (*parsed > max) {
      return fail(at((*found)->path, "quantity \"" + (*found)->text + "\": at most " +
                                         std::to_string(max) + std::string(unit)));
    }
    if (gpuResource) r.any = true;
    into = name == kResourceGpuMemory || name == kResourceGpuCompute ? std::max(into, *parsed)
                                                                     : into + *parsed;
    return {};
  };
  TESSERA_RETURN_IF_ERROR(read(kResourceWholeGpu, wholeNumber, r.wholeGpus, true, kMaxCount, ""));
  TESSERA_RETURN_IF_ERROR(read(kResourceGpus, wholeNumber, r.gpus, true, kMaxCount, ""));
  TESSERA_RETURN_IF_ERROR(
      read(kResourceGpuMemory, wholeNumber, r.gpuMemoryMib, true, kMaxGpuMemoryMib, " MiB"));
  TESSERA_RETURN_IF_ERROR(
      read(kResourceGpuCompute, wholeNumber, r.gpuComputeMilli, true, kMaxCount, ""));
  TESSERA_RETURN_IF_ERROR(read("cpu", cpuMilli, r.cpuMilli, false, kMaxCpuMilli, " millicores"));
  TESSERA_RETURN_IF_ERROR(
      read("memory", bytesToMib, r.memoryMib, false, kMaxHostMemoryMib, " MiB"));
  return {};
}

Result<model::SharingModes> sharingModes(std::string_view text, const std::string& path) {
  model::SharingModes modes = 0;
  for (const std::string& item : splitList(text)) {
    if (item == "exclusive") {
      modes |= static_cast<model::SharingModes>(model::SharingMode::kExclusive);
    } else if (item == "shared") {
      modes |= static_cast<model::SharingModes>(model::SharingMode::kShared);
    } else if (item == "mig") {
      modes |= static_cast<model::SharingModes>(model::SharingMode::kMig);
    } else {
      return fail(
          at(path, "unknown sharing mode \"" + item + "\" (known: exclusive, shared, mig)"));
    }
  }
  if (modes == 0) return fail(at(path, "names no sharing mode"));
  return modes;
}

Result<std::vector<model::Toleration>> tolerations(const json& spec) {
  std::vector<model::Toleration> out;
  const auto it = spec.find("tolerations");
  if (it == spec.end() || it->is_null()) return out;
  if (!it->is_array()) return fail(at("Pod.spec.tolerations", "expected an array"));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string path = "Pod.spec.tolerations[" + std::to_string(i) + "]";
    if (!t.is_object()) return fail(at(path, "expected an object"));
    model::Toleration tol;
    auto key = optionalString(t, "key", path);
    auto op = optionalString(t, "operator", path);
    auto value = optionalString(t, "value", path);
    auto effect = optionalString(t, "effect", path);
    for (auto* r : {&key, &op, &value, &effect}) {
      if (!*r) return fail(r->error());
    }
    tol.key = *key;
    tol.op = op->empty() ? "Equal" : *op;
    if (tol.op != "Equal" && tol.op != "Exists") {
      return fail(at(path + ".operator", "expected Equal or Exists, got \"" + tol.op + "\""));
    }
    tol.value = *value;
    tol.effect = *effect;
    out.push_back(std::move(tol));
  }
  return out;
}

}  // namespace

Result<PodRequest> readPod(const json& pod, const ModelLookup& models) {
  if (!pod.is_object()) return fail(at("Pod", "expected a v1.Pod object"));
  auto metadata = optionalObject(pod, "metadata", "Pod");
  if (!metadata) return fail(metadata.error());
  if (*metadata == nullptr) return fail(at("Pod.metadata", "missing"));
  const json& meta = **metadata;
  PodRequest out;
  auto name = optionalString(meta, "name", "Pod.metadata");
  if (!name) return fail(name.error());
  if (name->empty()) return fail(at("Pod.metadata.name", "missing"));
  auto ns = optionalString(meta, "namespace", "Pod.metadata");
  if (!ns) return fail(ns.error());
  auto uid = optionalString(meta, "uid", "Pod.metadata");
  if (!uid) return fail(uid.error());
  out.name = *name;
  out.ns = ns->empty() ? "default" : *ns;
  out.uid = *uid;

  std::map<std::string, std::string> annotations;
  auto ann = optionalObject(meta, "annotations", "Pod.metadata");
  if (!ann) return fail(ann.error());
  if (*ann != nullptr) {
    for (const auto& [k, v] : (*ann)->items()) {
      if (!v.is_string()) {
        return fail(at("Pod.metadata.annotations[\"" + k + "\"]", "expected a string"));
      }
      annotations[k] = v.get<std::string>();
    }
  }
  auto annotation = [&](std::string_view key) -> const std::string* {
    const auto it = annotations.find(std::string(key));
    return it == annotations.end() ? nullptr : &it->second;
  };

  auto specField = optionalObject(pod, "spec", "Pod");
  if (!specField) return fail(specField.error());
  if (*specField == nullptr) return fail(at("Pod.spec", "missing"));
  const json& spec = **specField;

  Resources res;
  for (const char* list : {"containers", "initContainers"}) {
    const auto it = spec.find(list);
    if (it == spec.end() || it->is_null()) continue;
    if (!it->is_array()) return fail(at(std::string("Pod.spec.") + list, "expected an array"));
    // Init containers run one at a time before the others: only GPU asks are counted (a
    // pod's GPU share is held for its whole life), not their CPU and memory.
    Resources one;
    for (std::size_t i = 0; i < it->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(addContainer(
          (*it)[i], "Pod.spec." + std::string(list) + "[" + std::to_string(i) + "]", one));
    }
    res.any = res.any || one.any;
    res.wholeGpus = std::max(res.wholeGpus, one.wholeGpus);
    res.gpus = std::max(res.gpus, one.gpus);
    res.gpuMemoryMib = std::max(res.gpuMemoryMib, one.gpuMemoryMib);
    res.gpuComputeMilli = std::max(res.gpuComputeMilli, one.gpuComputeMilli);
    if (std::string_view(list) == "containers") {
      res.cpuMilli = one.cpuMilli;
      res.memoryMib = one.memoryMib;
    }
  }

  model::PlacementRequest& req = out.request;
  req.replicaId = out.ns + "/" + out.name;
  const std::string* modelName = annotation(kAnnotationModel);
  if (modelName != nullptr) {
    std::optional<model::ModelProfile> profile = models ? models(*modelName) : std::nullopt;
    if (!profile) {
      return fail(at("Pod.metadata.annotations[\"tessera.io/model\"]",
                     "unknown model \"" + *modelName + "\" (register its profile first)"));
    }
    req.model = *profile;
  } else {
    req.model.name = out.ns + "/" + out.name;
  }
  out.managed = res.any || modelName != nullptr;
  if (!out.managed) return out;

  if (res.wholeGpus > 0 && (res.gpus > 0 || res.gpuMemoryMib > 0 || res.gpuComputeMilli > 0)) {
    return fail(at("Pod.spec.containers",
                   "nvidia.com/gpu (whole GPUs) cannot be combined with tessera.io/gpus, "
                   "gpu-memory or gpu-compute (GPU shares)"));
  }
  // Summed over containers the counts can pass the bound: refuse before narrowing to int.
  if (std::max(res.wholeGpus, res.gpus) > kMaxGpus) {
    return fail(
        at("Pod.spec.containers",
           "asks for " + std::to_string(std::max(res.wholeGpus, res.gpus)) + " GPUs per replica"));
  }
  if (res.wholeGpus > 0) {
    req.model.gpusPerReplica = static_cast<int>(res.wholeGpus);
    req.model.sharing = static_cast<model::SharingModes>(model::SharingMode::kExclusive);
    req.model.computeMilli = 1000;
  } else if (res.any) {
    req.model.gpusPerReplica = static_cast<int>(std::max<std::int64_t>(res.gpus, 1));
    if (res.gpuMemoryMib > 0) {
      // An explicit per-GPU figure replaces the profile's memory breakdown.
      req.model.weightsMib = res.gpuMemoryMib * req.model.gpusPerReplica;
      req.model.kvCacheMib = 0;
      req.model.overheadMib = 0;
    }
    if (res.gpuComputeMilli > 1000) {
      return fail(
          at("Pod.spec.containers", "tessera.io/gpu-compute is per GPU, at most 1000, got " +
                                        std::to_string(res.gpuComputeMilli)));
    }
    if (res.gpuComputeMilli > 0) req.model.computeMilli = static_cast<int>(res.gpuComputeMilli);
  }
  if (req.model.gpusPerReplica > 64) {
    return fail(at("Pod.spec.containers",
                   "asks for " + std::to_string(req.model.gpusPerReplica) + " GPUs per replica"));
  }
  if (res.cpuMilli > 0) req.model.cpuMilli = res.cpuMilli;
  if (res.memoryMib > 0) req.model.hostMemoryMib = res.memoryMib;

  if (const std::string* d = annotation(kAnnotationDeployment)) {
    req.deployment = *d;
  } else {
    const auto owners = meta.find("ownerReferences");
    if (owners != meta.end() && owners->is_array() && !owners->empty() &&
        (*owners)[0].is_object() && (*owners)[0].contains("name") &&
        (*owners)[0]["name"].is_string()) {
      req.deployment = out.ns + "/" + (*owners)[0]["name"].get<std::string>();
    } else {
      req.deployment = req.replicaId;
    }
  }
  if (const std::string* p = annotation(kAnnotationPriority)) {
    int prio = 0;
    const auto [end, ec] = std::from_chars(p->data(), p->data() + p->size(), prio);
    if (ec != std::errc() || end != p->data() + p->size()) {
      return fail(at("Pod.metadata.annotations[\"tessera.io/priority\"]",
                     "expected an integer, got \"" + *p + "\""));
    }
    req.model.priority = prio;
  } else if (const auto cls = spec.find("priorityClassName");
             cls != spec.end() && cls->is_string() && !cls->get<std::string>().empty()) {
    // A PriorityClass is the cluster's word on priority; without one, spec.priority is only
    // the default 0 and the model profile's priority stands.
    const auto it = spec.find("priority");
    if (it != spec.end() && it->is_number_integer()) req.model.priority = it->get<int>();
  }
  if (const std::string* t = annotation(kAnnotationGpuTypes)) req.gpuTypes = splitList(*t);
  if (const std::string* s = annotation(kAnnotationSharing)) {
    auto modes = sharingModes(*s, "Pod.metadata.annotations[\"tessera.io/sharing\"]");
    if (!modes) return fail(modes.error());
    req.model.sharing = *modes;
  }
  if (const std::string* m = annotation(kAnnotationMigProfile)) req.model.migProfile = *m;

  auto selector = optionalObject(spec, "nodeSelector", "Pod.spec");
  if (!selector) return fail(selector.error());
  if (*selector != nullptr) {
    for (const auto& [k, v] : (*selector)->items()) {
      if (!v.is_string()) {
        return fail(at("Pod.spec.nodeSelector[\"" + k + "\"]", "expected a string"));
      }
      req.nodeSelector[k] = v.get<std::string>();
    }
  }
  auto tols = tolerations(spec);
  if (!tols) return fail(tols.error());
  req.tolerations = std::move(*tols);
  return out;
}

}  // namespace tessera::k8s
