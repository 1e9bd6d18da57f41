#include "fuzz_support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "api/json_body.h"
#include "sched/plugin.h"
#include "sched/profile.h"
#include "sched/state_json.h"

namespace tessera::fuzz {

std::optional<nlohmann::json> decodeBody(const std::uint8_t* data, std::size_t size) {
  auto parsed = api::parseJsonBody(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed) {
    TESSERA_FUZZ_CHECK(parsed.error().message.starts_with("body: "), parsed.error().message);
    return std::nullopt;
  }
  return std::move(*parsed);
}

void checkSerialises(const nlohmann::json& answer, std::string_view what) {
  try {
    (void)answer.dump();
  } catch (const nlohmann::json::exception& e) {
    checkFailed("answer.dump()", std::string(what) + ": " + e.what(), __FILE__, __LINE__);
  }
}

std::string encodeUrlPath(std::string_view raw, std::string_view alsoPlain) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : raw) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~' || c == '%' ||
                       alsoPlain.find(static_cast<char>(c)) != std::string_view::npos;
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool isErrorObject(std::string_view text, const std::vector<std::string>& codes) {
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  if (!body.is_object()) return false;
  const auto error = body.find("error");
  if (error == body.end() || !error->is_object()) return false;
  const auto code = error->find("code");
  if (code == error->end() || !code->is_string()) return false;
  return codes.empty() ||
         std::find(codes.begin(), codes.end(), code->get<std::string>()) != codes.end();
}

namespace {

model::GpuSpec gpu(std::string id, std::string type, int nvlinkGroup = -1) {
  model::GpuSpec g;
  g.id = std::move(id);
  g.type = std::move(type);
  g.nvlinkGroup = nvlinkGroup;
  return g;
}

model::NodeSpec node(std::string name, std::vector<model::GpuSpec> gpus) {
  model::NodeSpec n;
  n.name = std::move(name);
  n.cpuMilli = 64000;
  n.hostMemoryMib = 512 * 1024;
  n.gpus = std::move(gpus);
  n.labels["tessera.io/pool"] = "inference";
  n.taints.push_back({"nvidia.com/gpu", "present", "NoSchedule"});
  return n;
}

void require(const Result<void>& r, const char* what) {
  if (!r) checkFailed(what, r.error().message, __FILE__, __LINE__);
}

}  // namespace

std::optional<model::ModelProfile> SmallCluster::lookup(std::string_view name) {
  if (name != "llama-7b" && name != "llama-70b") return std::nullopt;
  model::ModelProfile p;
  p.name = std::string(name);
  if (name == "llama-7b") {
    p.weightsMib = 13'000;
    p.kvCacheMib = 4'000;
    p.overheadMib = 2'000;
  } else {
    p.weightsMib = 135'000;
    p.kvCacheMib = 16'000;
    p.gpusPerReplica = 4;
    p.nvlinkRequired = true;
    p.priority = 5;
  }
  return p;
}

SmallCluster::SmallCluster() {
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  const sched::Profile profile = sched::defaultProfile();
  auto plugins = sched::buildPlugins(profile, registry);
  if (!plugins) checkFailed("buildPlugins", plugins.error().message, __FILE__, __LINE__);
  engine = std::make_unique<sched::PlacementEngine>(std::move(*plugins), profile.options);
  require(
      state.apply(sched::NodeAdded{node("gpu-a", {gpu("0", "A100-80GB"), gpu("1", "A100-80GB")})}),
      "gpu-a");
  require(state.apply(sched::NodeAdded{node("gpu-b", {gpu("0", "A100-80GB")})}), "gpu-b");
  require(state.apply(sched::NodeAdded{node("gpu-t4", {gpu("0", "T4")})}), "gpu-t4");
  model::NodeSpec tainted = node("gpu-c", {gpu("0", "A100-80GB")});
  tainted.taints.push_back({"dedicated", "training", "NoSchedule"});
  require(state.apply(sched::NodeAdded{tainted}), "gpu-c");
  require(state.apply(sched::NodeAdded{node("gpu-d", {gpu("0", "A100-80GB")})}), "gpu-d");
  require(state.apply(sched::NodeAdded{
              node("gpu-h", {gpu("0", "H100-80GB", 0), gpu("1", "H100-80GB", 0),
                             gpu("2", "H100-80GB", 0), gpu("3", "H100-80GB", 0)})}),
          "gpu-h");
  model::GpuSpec mig = gpu("0", "A100-40GB");
  mig.migEnabled = true;
  require(state.apply(sched::NodeAdded{node("gpu-mig", {mig})}), "gpu-mig");
  auto placeOn = [&](const std::string& nodeName, const std::string& id, std::int64_t mib,
                     int prio) {
    model::PlacementRequest r;
    r.replicaId = id;
    r.deployment = id;
    r.model.name = id;
    r.model.weightsMib = mib;
    r.model.priority = prio;
    r.tolerations.push_back({"", "Exists", "", ""});
    sched::DecideOptions only;
    only.onlyNode = state.findNode(nodeName);
    if (!engine->place(state, r, only).placement) {
      checkFailed("place", "cannot seed replica " + id, __FILE__, __LINE__);
    }
  };
  placeOn("gpu-b", "batch/old-job", 50'000, -5);
  placeOn("gpu-d", "batch/small", 10'000, 0);
  placeOn("gpu-h", "serving/llama-70b-0", 40'000, 5);
  extender =
      std::make_unique<k8s::Extender>(state, *engine, &SmallCluster::lookup,
                                      [](const std::string&, const std::string& name,
                                         const std::string&, const std::string&) -> Result<void> {
                                        if (name.find("fail-bind") != std::string::npos) {
                                          return fail(Error::internal("the API server said 409"));
                                        }
                                        return {};
                                      });
}

std::string stateDigest(const sched::ClusterState& state) {
  nlohmann::json out = nlohmann::json::array();
  for (const sched::GpuRecord& g : state.gpus()) {
    if (g.node >= 0 && !state.node(g.node).removed) out.push_back(sched::gpuJson(state, g));
  }
  for (const sched::ReplicaRecord& r : state.replicas()) {
    if (!r.removed) out.push_back(sched::placementJson(state, r.placement));
  }
  for (const sched::NodeRecord& n : state.nodes()) {
    if (!n.removed) out.push_back({n.spec.name, n.spec.cordoned, n.spec.healthy});
  }
  return out.dump();
}

}  // namespace tessera::fuzz
