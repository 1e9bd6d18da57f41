// ModelDeployment objects (controller.h): reading and checking a spec, the canary split, the
// pod of one replica, and the label values they write.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>

#include "k8s/controller.h"
#include "k8s/informer.h"
#include "k8s/pod.h"
#include "k8s/quantity.h"

namespace tessera::k8s {

using nlohmann::json;

// A label value: at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric.
std::string labelValue(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    out += ok ? c : '_';
    if (out.size() == 63) break;
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) out.erase(0, 1);
  return out;
}

namespace {

std::string hex8(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(h & 0xffffffffu));
  return buf;
}

Error fieldError(const std::string& field, const std::string& what) {
  return Error::invalid(field + ": " + what);
}

Result<int> intField(const json& obj, const char* key, const std::string& path, int min, int max,
                     int fallback) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<std::int64_t>() < min || it->get<std::int64_t>() > max) {
    return fail(fieldError(path + "." + key, "expected a whole number from " + std::to_string(min) +
                                                 " to " + std::to_string(max)));
  }
  return it->get<int>();
}

// A list of text written as a list or as one comma-separated text.
Result<std::string> commaList(const json& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return fail(fieldError(path, "expected a list of text"));
  std::string out;
  for (const json& e : v) {
    if (!e.is_string()) return fail(fieldError(path, "expected a list of text"));
    if (!out.empty()) out += ",";
    out += e.get<std::string>();
  }
  return out;
}

}  // namespace

int canaryReplicas(int total, int weight) {
  if (total <= 0 || weight <= 0) return 0;
  if (weight >= 100) return total;
  const int n = (total * weight + 50) / 100;
  return std::clamp(n, 1, total);
}

Result<ModelDeploymentSpec> readModelDeployment(const json& object,
                                                const std::string& schedulerName) {
  ModelDeploymentSpec s;
  s.ns = metadataText(object, "namespace");
  s.name = metadataText(object, "name");
  s.uid = metadataText(object, "uid");
  if (s.name.empty()) return fail(fieldError("metadata.name", "required"));
  if (s.ns.empty()) s.ns = "default";
  if (const auto m = object.find("metadata");
      m != object.end() && m->contains("generation") && (*m)["generation"].is_number_integer()) {
    s.generation = (*m)["generation"].get<std::int64_t>();
  }
  s.tesseraName = s.ns + "." + s.name;
  if (s.tesseraName.size() > 63) {
    s.tesseraName =
        s.tesseraName.substr(0, 54) + "-" + hex8(std::hash<std::string>{}(s.tesseraName));
  }
  const auto specIt = object.find("spec");
  if (specIt == object.end() || !specIt->is_object()) {
    return fail(fieldError("spec", "required"));
  }
  const json& spec = *specIt;

  // spec.model: a registered profile's name, {name} alone, or a profile written inline.
  const auto model = spec.find("model");
  if (model == spec.end()) return fail(fieldError("spec.model", "required"));
  if (model->is_string()) {
    s.modelName = model->get<std::string>();
  } else if (model->is_object()) {
    const auto n = model->find("name");
    if (n == model->end() || !n->is_string()) {
      return fail(fieldError("spec.model.name", "required text"));
    }
    s.modelName = n->get<std::string>();
    if (model->size() > 1) s.modelProfile = *model;
  } else {
    return fail(fieldError("spec.model", "expected a model name or a model profile"));
  }
  if (s.modelName.empty()) return fail(fieldError("spec.model.name", "must not be empty"));

  if (const auto v = spec.find("version"); v != spec.end() && !v->is_null()) {
    if (!v->is_string()) return fail(fieldError("spec.version", "expected text"));
    s.version = v->get<std::string>();
  }

  // spec.rollout
  if (const auto r = spec.find("rollout"); r != spec.end() && !r->is_null()) {
    if (!r->is_object()) return fail(fieldError("spec.rollout", "expected an object"));
    const std::string strategy = r->value("strategy", "HotSwitch");
    if (strategy == "Canary") {
      s.canary = true;
    } else if (strategy != "HotSwitch") {
      return fail(fieldError("spec.rollout.strategy",
                             "expected HotSwitch or Canary, got \"" + strategy + "\""));
    }
    auto w = intField(*r, "canaryWeight", "spec.rollout", 0, 100, s.canary ? 0 : 100);
    if (!w) return fail(w.error());
    s.canaryWeight = *w;
  }

  // spec.replicas
  json replicas = json::object();
  if (const auto r = spec.find("replicas"); r != spec.end() && !r->is_null()) {
    if (!r->is_object()) return fail(fieldError("spec.replicas", "expected {min, max, warm}"));
    replicas = *r;
  }
  auto minR = intField(replicas, "min", "spec.replicas", 0, 1000, 1);
  if (!minR) return fail(minR.error());
  auto maxR = intField(replicas, "max", "spec.replicas", 1, 1000, std::max(*minR, 10));
  if (!maxR) return fail(maxR.error());
  if (*maxR < *minR) return fail(fieldError("spec.replicas.max", "must be at least min"));
  auto warm = intField(replicas, "warm", "spec.replicas", 0, 1000, 0);
  if (!warm) return fail(warm.error());
  s.minReplicas = *minR;

  // The Tessera deployment.
  json autoscaling = json::object();
  if (const auto a = spec.find("autoscaling"); a != spec.end() && !a->is_null()) {
    if (!a->is_object()) return fail(fieldError("spec.autoscaling", "expected an object"));
    for (const auto& [k, v] : a->items()) {
      if (k == "policy") {
        if (!v.is_string()) return fail(fieldError("spec.autoscaling.policy", "expected text"));
        autoscaling["recommender"] = v;
      } else if (k == "targets") {
        if (!v.is_object()) {
          return fail(fieldError("spec.autoscaling.targets", "expected {name: number}"));
        }
        autoscaling["args"] = v;
      } else if (k == "syncPeriodSeconds" || k == "scaleUpStabilizationSeconds" ||
                 k == "scaleDownStabilizationSeconds" || k == "scaleDownPolicies") {
        autoscaling[k] = v;
      } else {
        return fail(fieldError("spec.autoscaling." + k, "unknown field"));
      }
    }
  }
  if (*warm > 0) autoscaling["warmReplicas"] = *warm;
  s.deployment = {{"name", s.tesseraName}, {"model", s.modelName}, {"version", s.version},
                  {"minReplicas", *minR},  {"maxReplicas", *maxR}, {"placedBy", "kubernetes"}};
  if (!autoscaling.empty()) s.deployment["autoscaling"] = autoscaling;
  if (const auto p = spec.find("priority"); p != spec.end() && !p->is_null()) {
    if (!p->is_number_integer())
      return fail(fieldError("spec.priority", "expected a whole number"));
    s.deployment["priority"] = *p;
  }
  if (const auto slo = spec.find("sloTtftMs"); slo != spec.end() && !slo->is_null()) {
    s.deployment["sloTtftMs"] = *slo;
  }

  // The pod: spec.template (a pod template) or spec.image.
  json pod{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", json::object()}};
  if (const auto t = spec.find("template"); t != spec.end() && !t->is_null()) {
    if (!t->is_object() || !t->contains("spec") || !(*t)["spec"].is_object()) {
      return fail(fieldError("spec.template", "expected a pod template {metadata, spec}"));
    }
    pod["metadata"] = t->value("metadata", json::object());
    pod["spec"] = (*t)["spec"];
  } else if (const auto image = spec.find("image"); image != spec.end() && image->is_string()) {
    pod["spec"] = {{"containers", json::array({{{"name", "server"}, {"image", *image}}})}};
  } else {
    return fail(
        fieldError("spec.template", "required (or spec.image): what the replicas' pods run"));
  }
  json& podSpec = pod["spec"];
  if (!podSpec.contains("containers") || !podSpec["containers"].is_array() ||
      podSpec["containers"].empty() || !podSpec["containers"][0].is_object()) {
    return fail(fieldError("spec.template.spec.containers", "at least one container"));
  }
  podSpec["schedulerName"] = schedulerName;
  json& meta = pod["metadata"];
  meta.erase("name");
  meta.erase("generateName");
  meta["namespace"] = s.ns;
  if (!meta.contains("labels") || !meta["labels"].is_object()) meta["labels"] = json::object();
  if (!meta.contains("annotations") || !meta["annotations"].is_object()) {
    meta["annotations"] = json::object();
  }
  meta["labels"][std::string(kLabelModelDeployment)] = labelValue(s.name);
  meta["labels"]["app.kubernetes.io/managed-by"] = "tessera";
  meta["annotations"]["tessera.io/model"] = s.modelName;
  meta["annotations"]["tessera.io/deployment"] = s.tesseraName;
  if (s.deployment.contains("priority")) {
    meta["annotations"]["tessera.io/priority"] =
        std::to_string(s.deployment["priority"].get<int>());
  }
  meta["ownerReferences"] = json::array({{{"apiVersion", "tessera.io/v1alpha1"},
                                          {"kind", "ModelDeployment"},
                                          {"name", s.name},
                                          {"uid", s.uid},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}});

  // spec.resources → the first container's tessera.io/* resources and the annotations.
  int gpus = 1;
  if (s.modelProfile) {
    if (const auto g = s.modelProfile->find("gpusPerReplica");
        g != s.modelProfile->end() && g->is_number_integer()) {
      gpus = std::max(1, g->get<int>());
    }
  }
  json extra = json::object();
  if (const auto r = spec.find("resources"); r != spec.end() && !r->is_null()) {
    if (!r->is_object()) return fail(fieldError("spec.resources", "expected an object"));
    auto g = intField(*r, "gpus", "spec.resources", 1, 64, gpus);
    if (!g) return fail(g.error());
    gpus = *g;
    if (const auto m = r->find("gpuMemory"); m != r->end() && !m->is_null()) {
      std::int64_t mib = 0;
      if (m->is_number_integer()) {
        mib = m->get<std::int64_t>();
      } else if (m->is_string()) {
        auto parsed = bytesToMib(m->get<std::string>());
        if (!parsed) return fail(fieldError("spec.resources.gpuMemory", parsed.error().message));
        mib = *parsed;
      }
      if (mib <= 0) {
        return fail(fieldError("spec.resources.gpuMemory",
                               "expected a quantity per GPU (\"20Gi\") or MiB"));
      }
      extra["tessera.io/gpu-memory"] = std::to_string(mib);
    }
    if (const auto c = r->find("gpuCompute"); c != r->end() && !c->is_null()) {
      std::int64_t milli = 0;
      if (c->is_number_integer()) {
        milli = c->get<std::int64_t>();
      } else if (c->is_string()) {
        auto parsed = cpuMilli(c->get<std::string>());
        if (!parsed) return fail(fieldError("spec.resources.gpuCompute", parsed.error().message));
        milli = *parsed;
      }
      if (milli <= 0 || milli > 1000) {
        return fail(fieldError("spec.resources.gpuCompute",
                               "expected thousandths of a GPU, 1 to 1000 (or \"500m\", \"0.5\")"));
      }
      extra["tessera.io/gpu-compute"] = std::to_string(milli);
    }
    if (const auto t = r->find("gpuTypes"); t != r->end() && !t->is_null()) {
      auto list = commaList(*t, "spec.resources.gpuTypes");
      if (!list) return fail(list.error());
      meta["annotations"]["tessera.io/gpu-types"] = *list;
    }
    if (const auto sh = r->find("sharing"); sh != r->end() && !sh->is_null()) {
      auto list = commaList(*sh, "spec.resources.sharing");
      if (!list) return fail(list.error());
      meta["annotations"]["tessera.io/sharing"] = *list;
    }
    if (const auto mig = r->find("migProfile"); mig != r->end() && mig->is_string()) {
      meta["annotations"]["tessera.io/mig-profile"] = *mig;
    }
  }
  extra["tessera.io/gpus"] = std::to_string(gpus);
  json& container = podSpec["containers"][0];
  if (!container.contains("resources") || !container["resources"].is_object()) {
    container["resources"] = json::object();
  }
  for (const char* part : {"requests", "limits"}) {
    json& r = container["resources"][part];
    if (!r.is_object()) r = json::object();
    for (const auto& [k, v] : extra.items()) r[k] = v;  // extended resources: limits = requests
  }
  s.pod = std::move(pod);
  return s;
}

json podFor(const ModelDeploymentSpec& spec, const std::string& version, const std::string& name) {
  json pod = spec.pod;
  pod["metadata"]["name"] = name;
  pod["metadata"]["labels"][std::string(kLabelVersion)] = labelValue(version);
  pod["metadata"]["annotations"][std::string(kAnnotationVersion)] = version;
  return pod;
}

}  // namespace tessera::k8s
