#include "agent/device_plugin_host.h"

#include <algorithm>
#include <filesystem>

namespace tessera::agent {

using nlohmann::json;

deviceplugin::Inventory inventoryFromGpus(const std::vector<AgentGpu>& gpus,
                                          std::vector<std::string> controlDeviceNodes) {
  deviceplugin::Inventory inv;
  bool anyReal = false;
  for (const AgentGpu& g : gpus) {
    deviceplugin::GpuDevice d;
    d.id = g.id;
    // NVML's GPU ids are its indices; a virtual GPU's id is its position too.
    try {
      d.index = std::stoi(g.id);
    } catch (const std::exception&) {
      d.index = static_cast<int>(inv.gpus.size());
    }
    d.type = g.type;
    d.computeCapability = g.computeCapability;
    d.memoryMib = g.memoryMib;
    d.numaNode = g.numaNode;
    d.nvlinkGroup = g.nvlinkGroup;
    d.healthy = g.healthy;
    if (!g.isVirtual) {
      anyReal = true;
      d.uuid = g.uuid;
      d.deviceNodes = {"/dev/nvidia" + std::to_string(d.index)};
      if (g.migEnabled) {
        d.migEnabled = true;
        for (std::size_t i = 0; i < g.migProfiles.size() && i < g.migUuids.size(); ++i) {
          deviceplugin::MigDevice m;
          m.uuid = g.migUuids[i];
          m.profile = g.migProfiles[i];
          // NVML's placement start; -1 when the driver did not say, and then a booking that
          // names a start slice is refused rather than handed the wrong instance.
          m.startSlot = i < g.migStarts.size() ? g.migStarts[i] : -1;
          d.migDevices.push_back(std::move(m));
        }
      }
    }
    inv.gpus.push_back(std::move(d));
  }
  if (anyReal) inv.controlDeviceNodes = std::move(controlDeviceNodes);
  return inv;
}

std::vector<std::string> nvidiaControlNodes(const std::string& devRoot) {
  std::vector<std::string> out;
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    std::error_code ec;
    const std::string path = devRoot + "/" + name;
    if (std::filesystem::exists(path, ec)) out.push_back("/dev/" + std::string(name));
  }
  return out;
}

bool devicePluginWanted(const DevicePluginConfig& config) {
  if (config.enabled) return *config.enabled;
  std::error_code ec;
  return std::filesystem::is_directory(config.dir, ec);
}

DevicePluginHost::DevicePluginHost(DevicePluginHostOptions options)
    : options_(std::move(options)) {}

DevicePluginHost::~DevicePluginHost() {
  stop();
}

Result<void> DevicePluginHost::start(const std::vector<AgentGpu>& gpus) {
  auto started = startPlugins(gpus);
  if (started || !options_.bestEffort) return started;
  stop();
  {
    std::lock_guard lock(mu_);
    startError_ = started.error().message;
  }
  if (options_.log) {
    options_.log("device plugin not started (devicePlugin.enabled: auto), running without it: " +
                 started.error().message);
  }
  return {};
}

Result<void> DevicePluginHost::startPlugins(const std::vector<AgentGpu>& all) {
  const DevicePluginConfig& c = options_.config;
  std::vector<AgentGpu> gpus;
  for (const AgentGpu& g : all) {
    if (std::ranges::find(options_.excludedGpus, g.id) == options_.excludedGpus.end()) {
      gpus.push_back(g);
    }
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(c.dir, ec)) {
    return fail(Error::invalid("devicePlugin.dir: " + c.dir +
                               " is not a directory (is kubelet running on this node, and is "
                               "the directory mounted into the agent's container?)"));
  }
  deviceplugin::ControlPlaneBookingsConfig cp;
  cp.url = options_.server;
  cp.node = options_.nodeName;
  cp.token = options_.token.value_or("");
  cp.caFile = options_.caFile.value_or("");
  bookings_ = deviceplugin::controlPlaneBookings(cp);
  const deviceplugin::Inventory inventory = inventoryFromGpus(gpus, options_.controlDeviceNodes);
  {
    std::lock_guard lock(mu_);
    for (const AgentGpu& g : gpus) health_[g.id] = g.healthy;
  }
  for (const std::string& resource : c.resources) {
    deviceplugin::PluginConfig pc;
    pc.resourceName = resource;
    pc.slotsPerGpu = resource == "nvidia.com/gpu" ? 1 : c.slotsPerGpu;
    pc.directory = c.dir;
    pc.nodeName = options_.nodeName;
    pc.env.mpsPipeDirectory = c.mpsPipeDirectory;
    pc.watchInterval = std::chrono::milliseconds(c.watchMs);
    pc.podResourcesSocket = c.podResourcesSocket;
    pc.log = options_.log;
    auto plugin = std::make_unique<deviceplugin::DevicePlugin>(pc, *bookings_, inventory);
    if (auto started = plugin->start(); !started) {
      for (auto& p : plugins_) p->stop();
      plugins_.clear();
      return fail(
          Error::internal("device plugin for " + resource + ": " + started.error().message));
    }
    if (options_.log) {
      options_.log("device plugin for " + resource + " serving on " + plugin->socketPath() + " (" +
                   std::to_string(inventory.gpus.size()) + " GPUs x " +
                   std::to_string(pc.slotsPerGpu) + " slots)");
    }
    plugins_.push_back(std::move(plugin));
  }
  return {};
}

void DevicePluginHost::gpusSampled(const std::vector<AgentGpu>& gpus) {
  std::vector<std::pair<std::string, bool>> changed;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    for (const AgentGpu& g : gpus) {
      auto it = health_.find(g.id);
      if (it == health_.end() || it->second == g.healthy) continue;
      it->second = g.healthy;
      changed.emplace_back(g.id, g.healthy);
    }
  }
  for (const auto& [id, healthy] : changed) {
    for (auto& p : plugins_) {
      if (auto set = p->setGpuHealth(id, healthy); !set && options_.log) {
        options_.log("device plugin: GPU " + id + ": " + set.error().message);
      }
    }
    if (options_.log) {
      options_.log("device plugin: GPU " + id + " is now " + (healthy ? "healthy" : "unhealthy") +
                   "; kubelet told");
    }
  }
}

std::vector<std::string> DevicePluginHost::drain(std::size_t) {
  if (plugins_.empty()) return {};
  stop();
  return {"device plugin stopped (kubelet gives this node's GPUs to no new container)"};
}

void DevicePluginHost::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  for (auto& p : plugins_) p->stop();
}

std::vector<deviceplugin::DevicePlugin*> DevicePluginHost::plugins() const {
  std::vector<deviceplugin::DevicePlugin*> out;
  for (const auto& p : plugins_) out.push_back(p.get());
  return out;
}

json DevicePluginHost::status() const {
  json s{{"enabled", true}, {"dir", options_.config.dir}};
  {
    std::lock_guard lock(mu_);
    s["state"] = !startError_.empty() ? "not started" : stopped_ ? "stopped" : "serving";
    if (!startError_.empty()) s["error"] = startError_;
  }
  json resources = json::array();
  for (const auto& p : plugins_) {
    const deviceplugin::Inventory inv = p->inventory();
    json gpus = json::array();
    for (const deviceplugin::GpuDevice& g : inv.gpus) {
      gpus.push_back({{"id", g.id}, {"healthy", g.healthy}});
    }
    resources.push_back(
        {{"socket", p->socketPath()}, {"registrations", p->registrations()}, {"gpus", gpus}});
  }
  for (std::size_t i = 0; i < resources.size() && i < options_.config.resources.size(); ++i) {
    resources[i]["resource"] = options_.config.resources[i];
  }
  s["resources"] = resources;
  return s;
}

}  // namespace tessera::agent
