#pragma once
// The agent's host for the kubelet device plugin (src/deviceplugin, docs/device-plugin.md):
// one DevicePlugin per configured resource, fed by the agent's GPU discovery and reading the
// node's bookings from the control plane the agent already talks to.
//
//  - start(): builds the inventory from discovery's first view, then serves and registers
//    each plugin with kubelet (at once when kubelet.sock exists, else when it appears);
//  - gpusSampled(): a GPU whose health changed is pushed to every plugin (setGpuHealth), so
//    kubelet's ListAndWatch sees its slots Unhealthy (or Healthy again);
//  - drain(): stops the plugins (no new containers get GPUs from a drained node; running
//    ones keep theirs: kubelet checkpoints them);
//  - status(): resources, sockets, registrations, GPUs and their health.
//
// Threading: see component.h. mu_ guards the last health view; the plugins are safe from
// any thread.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "agent/component.h"
#include "deviceplugin/bookings.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/plugin.h"

namespace tessera::agent {

// Discovery's GPUs as the plugin's inventory: id, index (the id of an NVML card), UUID,
// type, memory, NUMA node, NVLink group, MIG instances, health, and /dev/nvidia<index> for
// real cards. Virtual GPUs have no UUID and no device nodes (the plugin then names them by
// index). `controlDeviceNodes` are the node-wide nodes (/dev/nvidiactl, ...).
deviceplugin::Inventory inventoryFromGpus(const std::vector<AgentGpu>& gpus,
                                          std::vector<std::string> controlDeviceNodes);

// The node-wide NVIDIA device nodes that exist under `devRoot` ("/dev").
std::vector<std::string> nvidiaControlNodes(const std::string& devRoot = "/dev");

// Whether the configuration turns the plugin on: `enabled`, or (unset) whether `dir` exists.
bool devicePluginWanted(const DevicePluginConfig& config);

struct DevicePluginHostOptions {
  DevicePluginConfig config;
  std::string nodeName;
  // The control plane, as the agent reaches it.
  std::string server;
  std::optional<std::string> token;
  std::optional<std::string> caFile;
  // Node-wide device nodes handed to every GPU container (real GPUs only).
  std::vector<std::string> controlDeviceNodes;
  // GPUs it leaves alone: the DRA driver's in GPU mode `both` (agent_config.h).
  std::vector<std::string> excludedGpus;
  std::function<void(const std::string&)> log;  // nullptr: silent
  // The plugin was not asked for explicitly (devicePlugin.enabled: auto): a start that
  // fails is logged and the agent runs without it, instead of failing the agent's start.
  bool bestEffort = false;
};

class DevicePluginHost final : public AgentComponent {
 public:
  explicit DevicePluginHost(DevicePluginHostOptions options);
  ~DevicePluginHost() override;

  std::string name() const override { return "devicePlugin"; }
  Result<void> start(const std::vector<AgentGpu>& gpus) override;
  void gpusSampled(const std::vector<AgentGpu>& gpus) override;
  std::vector<std::string> drain(std::size_t workLeft) override;
  void stop() override;
  nlohmann::json status() const override;

  // The running plugins (tests): one per resource, in the configured order.
  std::vector<deviceplugin::DevicePlugin*> plugins() const;

 private:
  Result<void> startPlugins(const std::vector<AgentGpu>& gpus);
  DevicePluginHostOptions options_;
  std::unique_ptr<deviceplugin::BookingSource> bookings_;
  std::vector<std::unique_ptr<deviceplugin::DevicePlugin>> plugins_;
  mutable std::mutex mu_;
  std::map<std::string, bool> health_;  // GPU id -> healthy, as last pushed
  bool stopped_ = false;
  std::string startError_;  // best effort: why the plugin is not running
};

}  // namespace tessera::agent
