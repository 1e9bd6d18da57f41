#include "agent/agent_config.h"

#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "config/yaml_field.h"
#include "engines/engine_config.h"
#include "model/gpu_catalog.h"

namespace tessera::agent {
namespace {

using config::Field;

constexpr std::string_view kKind = "AgentConfig";
constexpr std::int64_t kMaxMib = std::int64_t{1} << 32;  // 4 PiB: far beyond any node

Result<void> readSeconds(const Field& parent, std::string_view key, double min, double max,
                         Millis& out) {
  const Field f = parent.child(key);
  if (f.absent()) return {};
  auto v = config::readNumber(f, min, max);
  if (!v) return fail(std::move(v.error()));
  out = secondsToMillis(*v);
  return {};
}

// `enabled`: true, false or auto (unquoted; nullopt). Absent or null keeps `out`.
Result<void> readEnabled(const Field& parent, std::optional<bool>& out) {
  const Field e = parent.child("enabled");
  if (e.isNull()) return {};
  if (e.isScalar() && e.node().Scalar() == "auto" && !e.isQuoted()) {
    out.reset();
    return {};
  }
  auto v = config::readBool(e);
  if (!v) return fail(e.error("must be true, false or auto, got " + e.describe()));
  out = *v;
  return {};
}

Result<void> readBytes(const Field& parent, std::string_view mibKey, std::string_view quantityKey,
                       std::int64_t minMib, std::int64_t& outBytes) {
  auto mib = config::readMemory(parent, config::MemoryField{mibKey, quantityKey, minMib, kMaxMib,
                                                            /*capacity=*/true});
  if (!mib) return fail(std::move(mib.error()));
  if (*mib) outBytes = **mib << 20;
  return {};
}

Result<void> readVirtualGpus(const Field& list, AgentConfig& out) {
  TESSERA_RETURN_IF_ERROR(config::expectSequence(list));
  out.virtualGpus.clear();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Field g = list.item(i);
    TESSERA_RETURN_IF_ERROR(
        config::expectMap(g, {"type", "count", "nvlinkGroup", "numa", "memoryMib", "memory"}));
    VirtualGpuDecl d;
    TESSERA_RETURN_IF_ERROR(config::require(g.child("type")));
    auto type = config::readName(g.child("type"));
    if (!type) return fail(std::move(type.error()));
    d.type = *type;
    // Checked here, where the line is known (the agent uses the built-in catalogue).
    static const model::GpuCatalog catalog = model::GpuCatalog::builtin();
    const model::GpuType* known = catalog.find(d.type);
    if (known == nullptr) {
      const std::string message = catalog.checkKnown({d.type}, "type").error().message;
      return fail(g.child("type").error(message.substr(message.find(':') + 2) +
                                        " (tessera catalog lists them)"));
    }
    TESSERA_RETURN_IF_ERROR(config::readOptional(g, "count", d.count, 1, 64));
    TESSERA_RETURN_IF_ERROR(config::readOptional(g, "nvlinkGroup", d.nvlinkGroup, -1, 1023));
    if (d.nvlinkGroup >= 0 && !known->nvlinkGBps) {
      return fail(g.child("nvlinkGroup").error("type " + known->name +
                                               " has no NVLink; leave nvlinkGroup out"));
    }
    TESSERA_RETURN_IF_ERROR(config::readOptional(g, "numa", d.numaNode, -1, 1023));
    auto mem = config::readMemory(g, config::MemoryField{"memoryMib", "memory", 1, kMaxMib, true});
    if (!mem) return fail(std::move(mem.error()));
    d.memoryMib = *mem;
    out.virtualGpus.push_back(std::move(d));
  }
  return {};
}

Result<void> readCache(const Field& c, CacheConfig& out) {
  TESSERA_RETURN_IF_ERROR(config::expectMap(
      c, {"dir", "diskCapacity", "diskCapacityMib", "hostMemoryCapacity", "hostMemoryCapacityMib",
          "warnAtFraction", "minFreeDisk", "minFreeDiskMib"}));
  TESSERA_RETURN_IF_ERROR(config::readOptional(c, "dir", out.dir));
  if (out.dir.empty()) return fail(c.child("dir").error("must not be empty"));
  TESSERA_RETURN_IF_ERROR(
      readBytes(c, "diskCapacityMib", "diskCapacity", 1, out.diskCapacityBytes));
  TESSERA_RETURN_IF_ERROR(
      readBytes(c, "hostMemoryCapacityMib", "hostMemoryCapacity", 0, out.hostMemoryCapacityBytes));
  TESSERA_RETURN_IF_ERROR(readBytes(c, "minFreeDiskMib", "minFreeDisk", 0, out.minFreeDiskBytes));
  TESSERA_RETURN_IF_ERROR(config::readOptional(c, "warnAtFraction", out.warnAtFraction, 0.01, 1.0));
  return {};
}

Result<void> readSources(const Field& list, AgentConfig& out) {
  TESSERA_RETURN_IF_ERROR(config::expectSequence(list));
  out.modelSources.clear();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Field s = list.item(i);
    TESSERA_RETURN_IF_ERROR(config::expectMap(s, {"name", "path", "url"}));
    ModelSourceConfig m;
    m.name = "source" + std::to_string(i);
    TESSERA_RETURN_IF_ERROR(config::readOptional(s, "name", m.name));
    TESSERA_RETURN_IF_ERROR(config::readOptional(s, "path", m.path));
    TESSERA_RETURN_IF_ERROR(config::readOptional(s, "url", m.url));
    if (m.path.empty() == m.url.empty()) {
      return fail(s.error("needs exactly one of path (a directory) or url (http:// or https://)"));
    }
    if (!m.url.empty() && m.url.rfind("http://", 0) != 0 && m.url.rfind("https://", 0) != 0) {
      return fail(
          s.child("url").error("must start with http:// or https://, got \"" + m.url + "\""));
    }
    for (const ModelSourceConfig& earlier : out.modelSources) {
      if (earlier.name == m.name) {
        return fail(s.child("name").error("duplicate source name \"" + m.name + "\""));
      }
    }
    out.modelSources.push_back(std::move(m));
  }
  return {};
}

Result<void> readDraDriver(const Field& d, DraDriverConfig& out) {
  TESSERA_RETURN_IF_ERROR(
      config::expectMap(d, {"enabled", "registryDir", "pluginDir", "cdiDir", "gpus",
                            "kubeApiServer", "kubeTokenFile", "kubeCaFile", "watchSeconds"}));
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "enabled", out.enabled));
  for (const auto& [key, slot] :
       {std::pair{"registryDir", &out.registryDir}, std::pair{"pluginDir", &out.pluginDir},
        std::pair{"cdiDir", &out.cdiDir}}) {
    TESSERA_RETURN_IF_ERROR(config::readOptional(d, key, *slot));
    if (slot->empty()) return fail(d.child(key).error("must not be empty"));
  }
  if (const Field g = d.child("gpus"); !g.absent()) {
    auto list = config::readStringList(g);
    if (!list) return fail(std::move(list.error()));
    for (std::size_t i = 0; i < list->size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if ((*list)[j] == (*list)[i]) return fail(g.item(i).error("duplicate GPU " + (*list)[i]));
      }
    }
    out.gpus = std::move(*list);
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "kubeApiServer", out.kubeApiServer));
  if (!out.kubeApiServer.empty() && out.kubeApiServer.rfind("http://", 0) != 0 &&
      out.kubeApiServer.rfind("https://", 0) != 0) {
    return fail(
        d.child("kubeApiServer")
            .error("must start with http:// or https://, got \"" + out.kubeApiServer + "\""));
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "kubeTokenFile", out.kubeTokenFile));
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "kubeCaFile", out.kubeCaFile));
  TESSERA_RETURN_IF_ERROR(readSeconds(d, "watchSeconds", 0.01, 3600, out.watchMs));
  return {};
}

Result<void> readDevicePlugin(const Field& d, DevicePluginConfig& out) {
  TESSERA_RETURN_IF_ERROR(config::expectMap(
      d, {"enabled", "dir", "resources", "slotsPerGpu", "mpsPipeDirectory", "watchSeconds",
          "podResourcesSocket"}));
  TESSERA_RETURN_IF_ERROR(readEnabled(d, out.enabled));
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "dir", out.dir));
  if (out.dir.empty()) return fail(d.child("dir").error("must not be empty"));
  if (const Field r = d.child("resources"); !r.absent()) {
    auto list = config::readStringList(r);
    if (!list) return fail(std::move(list.error()));
    if (list->empty()) return fail(r.error("must name at least one resource"));
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string& name = (*list)[i];
      if (name != "tessera.io/gpus" && name != "nvidia.com/gpu") {
        return fail(
            r.item(i).error("must be tessera.io/gpus or nvidia.com/gpu, got \"" + name + "\""));
      }
      for (std::size_t j = 0; j < i; ++j) {
        if ((*list)[j] == name) return fail(r.item(i).error("duplicate resource " + name));
      }
    }
    out.resources = std::move(*list);
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "slotsPerGpu", out.slotsPerGpu, 1, 64));
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "mpsPipeDirectory", out.mpsPipeDirectory));
  TESSERA_RETURN_IF_ERROR(readSeconds(d, "watchSeconds", 0.01, 3600, out.watchMs));
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "podResourcesSocket", out.podResourcesSocket));
  return {};
}

Result<void> readDevicePool(const Field& d, DevicePoolConfig& out) {
  TESSERA_RETURN_IF_ERROR(config::expectMap(
      d, {"enabled", "backend", "size", "sizeMib", "blockSize", "blockSizeMib", "readerThreads"}));
  TESSERA_RETURN_IF_ERROR(readEnabled(d, out.enabled));
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "backend", out.backend));
  if (out.backend != "auto" && out.backend != "host" && out.backend != "cuda") {
    return fail(
        d.child("backend").error("must be auto, host or cuda, got \"" + out.backend + "\""));
  }
  TESSERA_RETURN_IF_ERROR(readBytes(d, "sizeMib", "size", 1, out.sizeBytes));
  TESSERA_RETURN_IF_ERROR(readBytes(d, "blockSizeMib", "blockSize", 1, out.blockBytes));
  if (out.blockBytes > (std::int64_t{1} << 30)) {
    return fail(d.child("blockSize").error("must be at most 1Gi"));
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(d, "readerThreads", out.readerThreads, 0, 64));
  return {};
}

Result<void> readEngines(const Field& list, AgentConfig& out) {
  TESSERA_RETURN_IF_ERROR(config::expectSequence(list));
  out.engines.clear();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Field e = list.item(i);
    TESSERA_RETURN_IF_ERROR(
        config::expectMap(e, {"name", "kind", "url", "timeoutMs", "loadTimeoutMs", "retries",
                              "retryBackoffMs", "onDrain"}));
    AgentEngineConfig c;
    TESSERA_RETURN_IF_ERROR(config::readOptional(e, "name", c.name));
    std::string onDrain = "auto";
    TESSERA_RETURN_IF_ERROR(config::readOptional(e, "onDrain", onDrain));
    auto drain = parseEngineDrain(onDrain);
    if (!drain) {
      return fail(
          e.child("onDrain").error("must be auto, none, sleep or unload, got \"" + onDrain + "\""));
    }
    c.onDrain = *drain;
    // The adapter's own keys go through the engines library's reader, as JSON; the
    // millisecond keys keep the adapter's names and units.
    nlohmann::json entry = nlohmann::json::object();
    for (const char* key : {"kind", "url"}) {
      if (const Field f = e.child(key); !f.absent()) {
        auto v = config::readString(f);
        if (!v) return fail(std::move(v.error()));
        entry[key] = *v;
      }
    }
    for (const char* key : {"timeoutMs", "loadTimeoutMs", "retries", "retryBackoffMs"}) {
      if (const Field f = e.child(key); !f.absent()) {
        auto v = config::readInt(f, -1'000'000'000, 1'000'000'000);
        if (!v) return fail(std::move(v.error()));
        entry[key] = *v;
      }
    }
    const std::string where =
        std::string(e.source()) + ":" + std::to_string(e.line()) + ": " + e.path();
    auto engine = engines::engineConfigFromJson(entry, where);
    if (!engine) return fail(std::move(engine.error()));
    c.engine = std::move(*engine);
    if (c.name.empty()) c.name = c.engine.kind + "-" + std::to_string(i);
    for (const AgentEngineConfig& earlier : out.engines) {
      if (earlier.name == c.name) {
        return fail(e.child("name").error("duplicate engine name \"" + c.name + "\""));
      }
    }
    out.engines.push_back(std::move(c));
  }
  return {};
}

}  // namespace

Result<EngineDrain> parseEngineDrain(const std::string& text) {
  if (text == "auto") return EngineDrain::kAuto;
  if (text == "none") return EngineDrain::kNone;
  if (text == "sleep") return EngineDrain::kSleep;
  if (text == "unload") return EngineDrain::kUnload;
  return fail(
      Error::invalid("onDrain: expected auto, none, sleep or unload, got \"" + text + "\""));
}

const char* engineDrainName(EngineDrain d) {
  switch (d) {
    case EngineDrain::kAuto:
      return "auto";
    case EngineDrain::kNone:
      return "none";
    case EngineDrain::kSleep:
      return "sleep";
    case EngineDrain::kUnload:
      return "unload";
  }
  return "auto";
}

Millis secondsToMillis(double seconds) {
  return static_cast<Millis>(std::llround(seconds * 1000));
}

const char* discoveryName(GpuDiscovery d) {
  switch (d) {
    case GpuDiscovery::kAuto:
      return "auto";
    case GpuDiscovery::kNvml:
      return "nvml";
    case GpuDiscovery::kVirtual:
      return "virtual";
  }
  return "auto";
}

Result<GpuDiscovery> parseDiscovery(const std::string& text) {
  if (text == "auto") return GpuDiscovery::kAuto;
  if (text == "nvml") return GpuDiscovery::kNvml;
  if (text == "virtual") return GpuDiscovery::kVirtual;
  return fail(
      Error::invalid("GPU discovery: expected auto, nvml or virtual, got \"" + text + "\""));
}

Result<AgentConfig> parseAgentYaml(const std::string& text, const std::string& sourceName,
                                   AgentConfig base) {
  auto document = config::parseYamlDocument(text, sourceName);
  if (!document) return fail(std::move(document.error()));
  const Field root = Field::root(sourceName, *document);
  AgentConfig out = std::move(base);
  if (root.isNull()) return out;
  TESSERA_RETURN_IF_ERROR(config::checkApiHeader(root, kKind));
  TESSERA_RETURN_IF_ERROR(config::expectMap(root, {"apiVersion",
                                                   "kind",
                                                   "nodeName",
                                                   "server",
                                                   "tokenFile",
                                                   "tlsCa",
                                                   "heartbeatSeconds",
                                                   "cpu",
                                                   "cpuMilli",
                                                   "hostMemory",
                                                   "hostMemoryMib",
                                                   "labels",
                                                   "gpuDiscovery",
                                                   "nvmlLibrary",
                                                   "virtualGpus",
                                                   "cache",
                                                   "modelSources",
                                                   "preload",
                                                   "admin",
                                                   "drain",
                                                   "logFormat",
                                                   "devicePlugin",
                                                   "draDriver",
                                                   "engines",
                                                   "devicePool"}));
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "nodeName", out.nodeName));
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "server", out.server));
  if (out.server.rfind("http://", 0) != 0 && out.server.rfind("https://", 0) != 0) {
    return fail(root.child("server").error("must start with http:// or https://, got \"" +
                                           out.server + "\""));
  }
  for (const auto& [key, slot] :
       {std::pair{"tokenFile", &out.tokenFile}, std::pair{"tlsCa", &out.tlsCa}}) {
    if (const Field f = root.child(key); !f.absent()) {
      auto v = config::readName(f);
      if (!v) return fail(std::move(v.error()));
      *slot = *v;
    }
  }
  TESSERA_RETURN_IF_ERROR(readSeconds(root, "heartbeatSeconds", 0.01, 3600, out.heartbeatMs));
  auto cpu = config::readCpu(root, 10'000'000);
  if (!cpu) return fail(std::move(cpu.error()));
  if (*cpu) out.cpuMilli = **cpu;
  auto host = config::readMemory(
      root, config::MemoryField{"hostMemoryMib", "hostMemory", 0, kMaxMib, true});
  if (!host) return fail(std::move(host.error()));
  if (*host) out.hostMemoryMib = **host;
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "labels", out.labels));
  if (const Field f = root.child("gpuDiscovery"); !f.absent()) {
    auto v = config::readName(f);
    if (!v) return fail(std::move(v.error()));
    auto d = parseDiscovery(*v);
    if (!d) return fail(f.error("must be auto, nvml or virtual, got \"" + *v + "\""));
    out.discovery = *d;
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "nvmlLibrary", out.nvmlLibrary));
  if (const Field f = root.child("virtualGpus"); !f.absent()) {
    TESSERA_RETURN_IF_ERROR(readVirtualGpus(f, out));
  }
  if (const Field f = root.child("cache"); !f.isNull())
    TESSERA_RETURN_IF_ERROR(readCache(f, out.cache));
  if (const Field f = root.child("modelSources"); !f.absent()) {
    TESSERA_RETURN_IF_ERROR(readSources(f, out));
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "preload", out.preload));
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "admin", out.admin));
  if (const Field admin = root.child("admin"); !admin.absent()) {
    // The same check the agent makes when it binds, here with the file and line.
    if (auto ok = parseAdminAddress(out.admin); !ok) {
      const std::string& message = ok.error().message;
      return fail(admin.error(message.starts_with("admin: ") ? message.substr(7) : message));
    }
  }
  if (const Field d = root.child("drain"); !d.isNull()) {
    TESSERA_RETURN_IF_ERROR(config::expectMap(d, {"stopNewWorkSeconds", "inFlightMaxSeconds"}));
    TESSERA_RETURN_IF_ERROR(readSeconds(d, "stopNewWorkSeconds", 0, 3600, out.stopNewWorkMs));
    TESSERA_RETURN_IF_ERROR(readSeconds(d, "inFlightMaxSeconds", 0, 3600, out.inFlightMaxMs));
  }
  TESSERA_RETURN_IF_ERROR(config::readOptional(root, "logFormat", out.logFormat));
  if (out.logFormat != "text" && out.logFormat != "json") {
    return fail(
        root.child("logFormat").error("must be text or json, got \"" + out.logFormat + "\""));
  }
  if (const Field d = root.child("devicePlugin"); !d.isNull()) {
    TESSERA_RETURN_IF_ERROR(readDevicePlugin(d, out.devicePlugin));
  }
  if (const Field d = root.child("draDriver"); !d.isNull()) {
    TESSERA_RETURN_IF_ERROR(readDraDriver(d, out.draDriver));
    if (out.draDriver.enabled && out.draDriver.gpus.empty() && out.devicePlugin.enabled &&
        *out.devicePlugin.enabled) {
      return fail(d.error(
          "draDriver takes every GPU (no draDriver.gpus) while devicePlugin.enabled is true: a GPU "
          "must not be handed out by both; list the driver's GPUs in draDriver.gpus (the device "
          "plugin serves the others) or turn the device plugin off"));
    }
  }
  if (const Field e = root.child("engines"); !e.absent()) {
    TESSERA_RETURN_IF_ERROR(readEngines(e, out));
  }
  if (const Field d = root.child("devicePool"); !d.isNull()) {
    TESSERA_RETURN_IF_ERROR(readDevicePool(d, out.devicePool));
  }
  return out;
}

Result<AgentConfig> loadAgentFile(const std::string& path, AgentConfig base) {
  auto text = config::readTextFile(path);
  if (!text) return fail(std::move(text.error()));
  return parseAgentYaml(*text, path, std::move(base));
}

Result<std::pair<std::string, int>> parseAdminAddress(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return fail(
        Error::invalid("admin: expected HOST:PORT on a loopback address, got \"" + address + "\""));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = -1;
  try {
    std::size_t used = 0;
    port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return fail(Error::invalid("admin: port must be 0 to 65535, got \"" +
                               address.substr(colon + 1) + "\""));
  }
  // The admin API has no authentication: it must not be reachable from the network.
  if (host != "127.0.0.1" && host != "::1" && host != "localhost") {
    return fail(Error::invalid("admin: " + host +
                               " is not a loopback address; the admin API has no authentication, "
                               "so it listens on 127.0.0.1, ::1 or localhost only"));
  }
  return std::pair{host, port};
}

}  // namespace tessera::agent
