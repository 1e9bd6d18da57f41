// loadFleetFile / parseFleetYaml: a fleet of your own for `tessera simulate fleet --fleet FILE`
// and `tessera plan --fleet FILE` (docs/fleet-simulator.md, "Fleet file"). Every error names the
// file, line and field.

#include <filesystem>

#include "config/yaml_field.h"
#include "sim/fleet.h"
#include "sim/fleet_traffic.h"
#include "sim/serving_model_yaml.h"

namespace tessera::sim {
namespace {

using config::Field;

std::string resolve(const std::string& baseDir, const std::string& path) {
  if (path.empty() || path.front() == '/' || baseDir.empty()) return path;
  return (std::filesystem::path(baseDir) / path).string();
}

Result<loop::NodeGroup> readNodes(const Field& f, std::size_t index) {
  TESSERA_RETURN_IF_ERROR(
      config::expectMap(f, {"gpuType", "count", "gpusPerNode", "cpuMilli", "hostMemoryMib"}));
  loop::NodeGroup g;
  g.namePrefix = "group" + std::to_string(index);
  const Field type = f.child("gpuType");
  TESSERA_RETURN_IF_ERROR(config::require(type));
  auto t = config::readName(type);
  if (!t) return fail(std::move(t.error()));
  g.gpuType = std::move(*t);
  TESSERA_RETURN_IF_ERROR(config::require(f.child("count")));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "count", g.nodes, 1, 100000));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "gpusPerNode", g.gpusPerNode, 1, 64));
  TESSERA_RETURN_IF_ERROR(
      config::readOptional(f, "cpuMilli", g.cpuMilliPerNode, 1, std::int64_t{1} << 40));
  TESSERA_RETURN_IF_ERROR(
      config::readOptional(f, "hostMemoryMib", g.hostMemoryMibPerNode, 1, std::int64_t{1} << 40));
  return g;
}

// One deployment's traffic: a request trace, a QPS shape or the built-in chat trace, at a rate
// and phase shift, over the span.
Result<ServingTrace> readTraffic(const Field& f, const std::string& baseDir, double spanSeconds,
                                 const std::string& name, std::uint64_t defaultSeed) {
  TESSERA_RETURN_IF_ERROR(
      config::expectMap(f, {"trace", "format", "qps", "container", "meanRate", "tokensFrom",
                            "builtin", "rate", "shiftSeconds", "seed"}));
  const int sources =
      !f.child("trace").isNull() + !f.child("qps").isNull() + !f.child("builtin").isNull();
  if (sources != 1) return fail(f.error("give exactly one of trace, qps or builtin"));
  double rate = 1, shift = 0;
  std::int64_t seed = static_cast<std::int64_t>(defaultSeed % (std::uint64_t{1} << 62));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "rate", rate, 1e-6, 1000));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "shiftSeconds", shift, 0, 1e9));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "seed", seed, 0, std::int64_t{1} << 62));
  auto tokensOf = [&]() -> Result<ServingTrace> {
    std::string from;
    TESSERA_RETURN_IF_ERROR(config::readOptional(f, "tokensFrom", from));
    if (from.empty()) return builtinChatTrace(static_cast<std::uint64_t>(seed));
    const std::string path = resolve(baseDir, from);
    auto format = servingTraceFormatOf(path);
    if (!format) return fail(f.child("tokensFrom").error(format.error().message));
    auto t = readServingTrace(path, *format);
    if (!t) return fail(f.child("tokensFrom").error(t.error().message));
    return t;
  };
  ServingTrace base;
  if (!f.child("trace").isNull()) {
    auto file = config::readName(f.child("trace"));
    if (!file) return fail(std::move(file.error()));
    const std::string path = resolve(baseDir, *file);
    std::string formatName;
    TESSERA_RETURN_IF_ERROR(config::readOptional(f, "format", formatName));
    Result<ServingTraceFormat> format = ServingTraceFormat::kAzure;
    if (formatName.empty()) {
      format = servingTraceFormatOf(path);
      if (!format) return fail(f.child("trace").error(format.error().message));
    } else if (formatName == "mooncake") {
      format = ServingTraceFormat::kMooncake;
    } else if (formatName != "azure") {
      return fail(
          f.child("format").error("expected azure or mooncake, got \"" + formatName + "\""));
    }
    auto t = readServingTrace(path, *format);
    if (!t) return fail(f.child("trace").error(t.error().message));
    base = std::move(*t);
  } else if (!f.child("qps").isNull()) {
    auto file = config::readName(f.child("qps"));
    if (!file) return fail(std::move(file.error()));
    const std::string path = resolve(baseDir, *file);
    std::string container;
    TESSERA_RETURN_IF_ERROR(config::readOptional(f, "container", container));
    std::vector<QpsPoint> series;
    if (container.empty()) {
      auto s = readQpsSeries(path);
      if (!s) return fail(f.child("qps").error(s.error().message));
      series = std::move(*s);
    } else {
      auto all = readQpsByContainer(path, "");
      if (!all) return fail(f.child("qps").error(all.error().message));
      auto it = all->find(container);
      if (it == all->end()) {
        return fail(f.child("container").error("no container \"" + container + "\" in " + path));
      }
      series = std::move(it->second);
    }
    double mean = 0;
    TESSERA_RETURN_IF_ERROR(config::require(f.child("meanRate")));
    TESSERA_RETURN_IF_ERROR(config::readOptional(f, "meanRate", mean, 1e-6, 1e6));
    auto tokens = tokensOf();
    if (!tokens) return fail(tokens.error());
    QpsShapeOptions qo;
    qo.spanSeconds = spanSeconds;
    qo.meanRatePerSec = mean;
    qo.seed = static_cast<std::uint64_t>(seed);
    auto t = shapeTrace(series, *tokens, qo, name);
    if (!t) return fail(f.child("qps").error(t.error().message));
    base = std::move(*t);
  } else {
    auto which = config::readName(f.child("builtin"));
    if (!which) return fail(std::move(which.error()));
    if (*which != "chat") {
      return fail(f.child("builtin").error("expected chat, got \"" + *which + "\""));
    }
    base = builtinChatTrace(static_cast<std::uint64_t>(seed));
  }
  auto t = reshapeTrace(base, rate, shift, spanSeconds, static_cast<std::uint64_t>(seed), name);
  if (!t) return fail(f.error(t.error().message));
  if (t->requests.empty()) return fail(f.error("the traffic has no requests within the span"));
  return t;
}

Result<FleetDeployment> readDeployment(const Field& f, const std::string& baseDir,
                                       double spanSeconds, std::uint64_t seed) {
  TESSERA_RETURN_IF_ERROR(config::expectMap(f, {"name", "model", "gpuType", "sloTtftMs", "priority",
                                                "maxReplicas", "maxContextTokens", "traffic"}));
  FleetDeployment d;
  for (auto [key, out] : {std::pair{"name", &d.name}, std::pair{"model", &d.model}}) {
    TESSERA_RETURN_IF_ERROR(config::require(f.child(key)));
    auto v = config::readName(f.child(key));
    if (!v) return fail(std::move(v.error()));
    *out = std::move(*v);
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "gpuType", d.gpuType));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "sloTtftMs", d.sloTtftMs, 1, 3.6e6));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "priority", d.priority, -1000000, 1000000));
  TESSERA_RETURN_IF_ERROR(config::readOptional(f, "maxReplicas", d.maxReplicas, 0, 100000));
  TESSERA_RETURN_IF_ERROR(
      config::readOptional(f, "maxContextTokens", d.maxContextTokens, 1, std::int64_t{1} << 24));
  TESSERA_RETURN_IF_ERROR(config::require(f.child("traffic")));
  auto t = readTraffic(f.child("traffic"), baseDir, spanSeconds, d.name, seed);
  if (!t) return fail(t.error());
  d.trace = std::move(*t);
  d.traffic = "fleet file, " + std::to_string(d.trace.requests.size()) + " requests";
  return d;
}

}  // namespace

Result<FleetSpec> parseFleetYaml(const std::string& text, const std::string& source,
                                 const std::string& baseDir, const model::GpuCatalog& catalog) {
  auto document = config::parseYamlDocument(text, source);
  if (!document) return fail(std::move(document.error()));
  const Field root = Field::root(source, *document);
  if (root.isNull()) return fail(root.error("empty file; a fleet has nodes and deployments"));
  TESSERA_RETURN_IF_ERROR(
      config::expectMap(root, {"apiVersion", "kind", "name", "minutes", "warmupSeconds", "nodes",
                               "models", "deployments", "prices", "load"}));
  TESSERA_RETURN_IF_ERROR(config::checkApiHeader(root, "Fleet"));
  FleetSpec spec;
  spec.name = "fleet";
  spec.source = "fleet file " + source;
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "name", spec.name));
  double minutes = 60;
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "minutes", minutes, 10, 7 * 24 * 60));
  TESSERA_RETURN_IF_ERROR(
      config::readOptional(root, "warmupSeconds", spec.warmupSeconds, 0, 86400));
  const Field nodes = root.child("nodes");
  TESSERA_RETURN_IF_ERROR(config::require(nodes));
  TESSERA_RETURN_IF_ERROR(config::expectSequence(nodes));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto g = readNodes(nodes.item(i), i);
    if (!g) return fail(g.error());
    if (catalog.find(g->gpuType) == nullptr) {
      return fail(nodes.item(i).child("gpuType").error("unknown GPU type '" + g->gpuType + "'"));
    }
    spec.nodes.push_back(std::move(*g));
  }
  if (spec.nodes.empty()) return fail(nodes.error("at least one node group"));
  spec.models = builtinFleetModels();
  const Field models = root.child("models");
  TESSERA_RETURN_IF_ERROR(config::expectSequence(models));
  for (std::size_t i = 0; i < models.size(); ++i) {
    auto m = readServingModel(models.item(i), /*header=*/false);
    if (!m) return fail(m.error());
    std::erase_if(spec.models, [&](const ServingModel& x) { return x.name == m->name; });
    spec.models.push_back(std::move(*m));
  }
  const Field prices = root.child("prices");
  auto priceMap = config::readStringMap(prices);
  if (!priceMap) return fail(std::move(priceMap.error()));
  for (const auto& [type, value] : *priceMap) {
    const Field p = prices.child(type);
    if (catalog.find(type) == nullptr) return fail(p.error("unknown GPU type '" + type + "'"));
    auto v = config::readNumber(p, 0, 1e6);
    if (!v) return fail(std::move(v.error()));
    spec.pricePerGpuHour[type] = *v;
  }
  const Field load = root.child("load");
  if (!load.isNull()) {
    TESSERA_RETURN_IF_ERROR(config::expectMap(
        load, {"hostMemoryGBps", "localDiskGBps", "remoteGBps", "engineStartupSeconds"}));
    TESSERA_RETURN_IF_ERROR(
        config::readOptional(load, "hostMemoryGBps", spec.load.hostMemoryGBps, 0.001, 1e4));
    TESSERA_RETURN_IF_ERROR(
        config::readOptional(load, "localDiskGBps", spec.load.localDiskGBps, 0.001, 1e4));
    TESSERA_RETURN_IF_ERROR(
        config::readOptional(load, "remoteGBps", spec.load.remoteGBps, 0.001, 1e4));
    TESSERA_RETURN_IF_ERROR(config::readOptional(load, "engineStartupSeconds",
                                                 spec.load.engineStartupSeconds, 0, 3600));
  }
  const Field deployments = root.child("deployments");
  TESSERA_RETURN_IF_ERROR(config::require(deployments));
  TESSERA_RETURN_IF_ERROR(config::expectSequence(deployments));
  for (std::size_t i = 0; i < deployments.size(); ++i) {
    const Field item = deployments.item(i);
    auto d = readDeployment(item, baseDir, minutes * 60, i + 1);
    if (!d) return fail(d.error());
    for (const FleetDeployment& other : spec.deployments) {
      if (other.name == d->name) {
        return fail(item.child("name").error("deployment \"" + d->name + "\" is named twice"));
      }
    }
    bool known = false;
    for (const ServingModel& m : spec.models) known = known || m.name == d->model;
    if (!known) {
      std::vector<std::string> names;
      for (const ServingModel& m : spec.models) names.push_back(m.name);
      return fail(item.child("model").error("unknown model '" + d->model +
                                            "' (known: " + config::joinNames(names) + ")"));
    }
    if (!d->gpuType.empty() &&
        std::none_of(spec.nodes.begin(), spec.nodes.end(),
                     [&](const loop::NodeGroup& g) { return g.gpuType == d->gpuType; })) {
      return fail(item.child("gpuType").error("the fleet has no " + d->gpuType + " nodes"));
    }
    spec.deployments.push_back(std::move(*d));
  }
  if (spec.deployments.empty()) return fail(deployments.error("at least one deployment"));
  return spec;
}

Result<FleetSpec> loadFleetFile(const std::string& path, const model::GpuCatalog& catalog) {
  auto text = config::readTextFile(path);
  if (!text) return fail(std::move(text.error()));
  return parseFleetYaml(*text, path, std::filesystem::path(path).parent_path().string(), catalog);
}

}  // namespace tessera::sim
