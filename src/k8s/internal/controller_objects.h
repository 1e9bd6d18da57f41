#pragma once
// What the ModelDeployment controller (controller.cc) and its GPU mode dra part
// (controller_dra.cc) both read off Kubernetes objects, and the paths they write to.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "k8s/informer.h"

namespace tessera::k8s::controller_internal {

using nlohmann::json;

inline std::string annotationOf(const json& object, std::string_view key) {
  const auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  const auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return "";
  const auto v = a->find(std::string(key));
  return v != a->end() && v->is_string() ? v->get<std::string>() : "";
}

inline bool terminating(const json& object) {
  const auto m = object.find("metadata");
  return m != object.end() && m->is_object() && m->contains("deletionTimestamp") &&
         !(*m)["deletionTimestamp"].is_null();
}

inline std::string podPhase(const json& pod) {
  const auto s = pod.find("status");
  if (s == pod.end() || !s->is_object()) return "";
  return s->value("phase", "");
}

inline bool finished(const json& pod) {
  const std::string phase = podPhase(pod);
  return phase == "Succeeded" || phase == "Failed";
}

inline std::int64_t rvNumber(const json& object) {
  const std::string rv = resourceVersionOf(object);
  return rv.empty() ? 0 : std::atoll(rv.c_str());
}

inline std::string nowRfc3339() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A Warning event on a pod (core/v1 Event, as `kubectl describe pod` lists them), sent by
// `component`.
inline json podWarningEvent(const std::string& ns, const std::string& pod, const std::string& uid,
                            const std::string& reason, const std::string& message,
                            const std::string& component) {
  const std::string now = nowRfc3339();
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"generateName", pod + "."}, {"namespace", ns}}},
          {"involvedObject",
           {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", ns}, {"name", pod}, {"uid", uid}}},
          {"reason", reason},
          {"message", message},
          {"type", "Warning"},
          {"source", {{"component", component}}},
          {"firstTimestamp", now},
          {"lastTimestamp", now},
          {"count", 1}};
}

inline std::string controllerPodPath(const std::string& ns, const std::string& name = "") {
  return "/api/v1/namespaces/" + ns + "/pods" + (name.empty() ? "" : "/" + name);
}

}  // namespace tessera::k8s::controller_internal
