#include "agent/gpu_source.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "agent/nvml.h"

namespace tessera::agent {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (char c : text) {
    if (c == ' ' || c == '-' || c == '_') {
      if (!word.empty()) out.push_back(upper(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(upper(word));
  return out;
}

std::string knownTypes(const model::GpuCatalog& catalog) {
  std::string out;
  for (const std::string& n : catalog.names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The catalogue MIG profile whose memory is closest to what NVML reports for an instance.
std::string migProfileFor(const model::GpuType& type, std::int64_t memoryMib) {
  const model::MigProfile* best = nullptr;
  for (const model::MigProfile& p : type.migProfiles) {
    if (best == nullptr ||
        std::llabs(p.memoryMib - memoryMib) < std::llabs(best->memoryMib - memoryMib)) {
      best = &p;
    }
  }
  if (best == nullptr || std::llabs(best->memoryMib - memoryMib) > best->memoryMib / 5) return "";
  return best->name;
}

class NvmlGpuSource final : public GpuSource {
 public:
  NvmlGpuSource(std::unique_ptr<Nvml> nvml, std::vector<AgentGpu> first)
      : nvml_(std::move(nvml)), known_(std::move(first)) {}

  std::string kind() const override { return "nvml"; }

  Result<std::vector<AgentGpu>> sample() override {
    for (const XidEvent& e : nvml_->pollXid(0)) {
      for (AgentGpu& g : known_) {
        if (g.uuid != e.uuid) continue;
        g.xids.push_back(e.xid);
        // Card faults stay until the agent restarts (after the card was reset or replaced).
        if (!xidIsApplicationError(e.xid)) g.healthy = false;
      }
    }
    auto devices = nvml_->devices();
    if (!devices) {
      // A driver that stopped answering: every card is reported unhealthy, not dropped.
      for (AgentGpu& g : known_) g.healthy = false;
      return known_;
    }
    for (AgentGpu& g : known_) {
      const auto it = std::find_if(devices->begin(), devices->end(),
                                   [&](const NvmlGpu& d) { return d.uuid == g.uuid; });
      if (it == devices->end()) {
        g.healthy = false;  // fell off the bus
        continue;
      }
      g.usedMib = it->memoryUsedMib;
      g.utilization = it->utilizationPercent < 0 ? -1 : it->utilizationPercent / 100.0;
      g.processes.clear();
      for (const NvmlProcess& p : it->processes) g.processes.push_back(p.pid);
    }
    return known_;
  }

 private:
  std::unique_ptr<Nvml> nvml_;
  std::vector<AgentGpu> known_;
};

class VirtualGpuSource final : public GpuSource {
 public:
  explicit VirtualGpuSource(std::vector<AgentGpu> gpus) : gpus_(std::move(gpus)) {}
  std::string kind() const override { return "virtual"; }
  Result<std::vector<AgentGpu>> sample() override { return gpus_; }

 private:
  std::vector<AgentGpu> gpus_;
};

Result<std::vector<AgentGpu>> virtualGpus(const AgentConfig& config,
                                          const model::GpuCatalog& catalog,
                                          const std::string& nodeName) {
  std::vector<AgentGpu> out;
  for (std::size_t i = 0; i < config.virtualGpus.size(); ++i) {
    const VirtualGpuDecl& d = config.virtualGpus[i];
    const model::GpuType* type = catalog.find(d.type);
    if (type == nullptr) {
      return fail(Error::invalid(
          "virtualGpus[" + std::to_string(i) + "].type: unknown GPU type \"" + d.type +
          "\"; known types: " + knownTypes(catalog) + " (tessera catalog lists them)"));
    }
    if (d.nvlinkGroup >= 0 && !type->nvlinkGBps) {
      return fail(Error::invalid("virtualGpus[" + std::to_string(i) + "].nvlinkGroup: type " +
                                 type->name + " has no NVLink; leave nvlinkGroup out"));
    }
    for (int c = 0; c < d.count; ++c) {
      AgentGpu g;
      g.id = std::to_string(out.size());
      g.uuid = "virtual-" + nodeName + "-" + g.id;
      g.type = type->name;
      g.isVirtual = true;
      g.memoryMib = d.memoryMib.value_or(type->memoryMib.value_or(0));
      g.numaNode = d.numaNode;
      g.nvlinkGroup = d.nvlinkGroup;
      out.push_back(std::move(g));
    }
  }
  return out;
}

Result<std::vector<AgentGpu>> nvmlGpus(Nvml& nvml, const model::GpuCatalog& catalog,
                                       std::vector<std::string>& warnings) {
  auto devices = nvml.devices();
  if (!devices) return fail(devices.error());
  const std::vector<int> groups = nvlinkGroups(*devices);
  std::vector<AgentGpu> out;
  for (std::size_t i = 0; i < devices->size(); ++i) {
    const NvmlGpu& d = (*devices)[i];
    std::string warning;
    auto type = mapGpuType(d.name, d.memoryTotalMib, catalog, warning);
    if (!type) {
      return fail(Error::invalid("GPU " + std::to_string(d.index) + " (" + d.uuid +
                                 "): " + type.error().message));
    }
    if (!warning.empty()) warnings.push_back("GPU " + std::to_string(d.index) + ": " + warning);
    AgentGpu g;
    g.id = std::to_string(d.index);
    g.uuid = d.uuid;
    g.type = *type;
    g.nvmlName = d.name;
    g.memoryMib = d.memoryTotalMib;
    g.usedMib = d.memoryUsedMib;
    g.utilization = d.utilizationPercent < 0 ? -1 : d.utilizationPercent / 100.0;
    g.numaNode = d.numaNode;
    g.computeCapability = d.computeCapability;
    g.nvlinkGroup = groups[i];
    g.cpuAffinity = d.cpuAffinity;
    for (const NvmlProcess& p : d.processes) g.processes.push_back(p.pid);
    const model::GpuType* t = catalog.find(*type);
    g.migEnabled = d.migEnabled && t != nullptr && t->migCapable();
    if (d.migEnabled && !g.migEnabled) {
      warnings.push_back("GPU " + g.id +
                         ": in MIG mode, but the catalogue has no MIG profiles for " + *type +
                         "; reported as a whole card");
    }
    if (g.migEnabled) {
      for (const NvmlMigInstance& m : d.migInstances) {
        const std::string profile = migProfileFor(*t, m.memoryMib);
        if (profile.empty()) {
          warnings.push_back("GPU " + g.id + ": MIG instance " + m.uuid + " (" +
                             std::to_string(m.memoryMib) +
                             " MiB) matches no catalogue profile; instances left out");
          g.migProfiles.clear();
          g.migUuids.clear();
          g.migStarts.clear();
          break;
        }
        g.migProfiles.push_back(profile);
        g.migUuids.push_back(m.uuid);
        g.migStarts.push_back(m.startSlot);
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

bool xidIsApplicationError(std::uint64_t xid) {
  // The XIDs NVIDIA documents as caused by user programs (also skipped by NVIDIA's device
  // plugin): the card itself is fine.
  static const std::set<std::uint64_t> kApplication = {13, 31, 43, 45, 68, 109};
  return kApplication.contains(xid);
}

Result<std::string> mapGpuType(const std::string& nvmlName, std::int64_t memoryMib,
                               const model::GpuCatalog& catalog, std::string& warning) {
  warning.clear();
  if (const model::GpuType* t = catalog.find(nvmlName)) return t->name;
  const std::vector<std::string> nameWords = words(nvmlName);
  // Without the vendor prefix ("NVIDIA L4" -> "L4", "Tesla T4" -> "T4").
  for (const char* prefix : {"NVIDIA ", "Tesla ", "NVIDIA Tesla "}) {
    if (nvmlName.rfind(prefix, 0) == 0) {
      if (const model::GpuType* t = catalog.find(nvmlName.substr(std::string(prefix).size()))) {
        return t->name;
      }
    }
  }
  const model::GpuType* best = nullptr;
  for (int i = 0; i < catalog.size(); ++i) {
    const model::GpuType& t = catalog.at(i);
    if (t.opaque || !t.memoryMib) continue;
    const std::string family = upper(t.name.substr(0, t.name.find('-')));
    if (std::find(nameWords.begin(), nameWords.end(), family) == nameWords.end()) continue;
    if (std::llabs(*t.memoryMib - memoryMib) > *t.memoryMib / 10) continue;
    if (best == nullptr ||
        std::llabs(*t.memoryMib - memoryMib) < std::llabs(*best->memoryMib - memoryMib)) {
      best = &t;
    }
  }
  if (best != nullptr) {
    warning = "NVML name \"" + nvmlName + "\" is not in the GPU catalogue; taken as " + best->name +
              " (same family, " + std::to_string(memoryMib) +
              " MiB of memory); add it to the type's aliases to silence this";
    return best->name;
  }
  return fail(Error::invalid(
      "NVML name \"" + nvmlName + "\" (" + std::to_string(memoryMib) +
      " MiB) matches no GPU type in the catalogue; known types: " + knownTypes(catalog)));
}

Result<std::unique_ptr<GpuSource>> openGpuSource(const AgentConfig& config,
                                                 const model::GpuCatalog& catalog,
                                                 const std::string& nodeName,
                                                 std::vector<std::string>& warnings) {
  if (config.discovery != GpuDiscovery::kVirtual) {
    auto nvml = Nvml::open(config.nvmlLibrary);
    if (nvml) {
      auto gpus = nvmlGpus(**nvml, catalog, warnings);
      if (!gpus) return fail(gpus.error());
      if (!config.virtualGpus.empty()) {
        warnings.push_back("NVML found " + std::to_string(gpus->size()) +
                           " GPU(s); the configured virtualGpus are ignored");
      }
      return std::unique_ptr<GpuSource>(
          std::make_unique<NvmlGpuSource>(std::move(*nvml), std::move(*gpus)));
    }
    if (config.discovery == GpuDiscovery::kNvml) return fail(nvml.error());
    if (config.virtualGpus.empty()) {
      return fail(Error::precondition(
          nvml.error().message +
          "; and no virtualGpus are declared in the agent configuration to fall back to"));
    }
    warnings.push_back(nvml.error().message + "; using the " +
                       std::to_string(config.virtualGpus.size()) +
                       " virtual GPU declaration(s) of the configuration (reported as virtual)");
  } else if (config.virtualGpus.empty()) {
    return fail(Error::invalid("gpuDiscovery is virtual but no virtualGpus are declared"));
  }
  auto gpus = virtualGpus(config, catalog, nodeName);
  if (!gpus) return fail(gpus.error());
  return std::unique_ptr<GpuSource>(std::make_unique<VirtualGpuSource>(std::move(*gpus)));
}

}  // namespace tessera::agent
