#pragma once
// A part of the node that the agent starts with itself, keeps informed of its GPUs, drains
// and stops: the kubelet device plugin (device_plugin_host.h) and the inference engines
// (engines_host.h). The agent knows them only through this interface.
//
// Threading: start() and stop() come from the thread that starts or stops the agent;
// gpusSampled() from the heartbeat thread; drain() from the drain thread; status() and the
// admin routes from the admin API's threads. Implementations guard their own state.

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/gpu_source.h"
#include "common/result.h"

namespace httplib {
class Server;
}

namespace tessera::agent {

class AgentComponent {
 public:
  virtual ~AgentComponent() = default;
  // The key of its section in GET /status ("devicePlugin", "engines").
  virtual std::string name() const = 0;
  // Called by Agent::start with discovery's first view, before the heartbeat starts. An
  // error stops the agent's start (components started before are stopped again).
  virtual Result<void> start(const std::vector<AgentGpu>& gpus) = 0;
  // Every successful GPU sample (heartbeat thread): keep it quick.
  virtual void gpusSampled(const std::vector<AgentGpu>& gpus) { (void)gpus; }
  // The drain, after the wait for work in flight: `workLeft` items were still running when
  // it ended (0: all finished). Returns lines for the drain log.
  virtual std::vector<std::string> drain(std::size_t workLeft) {
    (void)workLeft;
    return {};
  }
  // Stops for good; idempotent, also without start().
  virtual void stop() = 0;
  virtual nlohmann::json status() const = 0;
  // Fields it adds to every heartbeat (docs/api.md, "Heartbeats"); none by default.
  virtual nlohmann::json heartbeatFields() const { return nlohmann::json::object(); }
  // Adds its admin API routes (called once, before the admin API serves).
  virtual void adminRoutes(httplib::Server& server) { (void)server; }
};

}  // namespace tessera::agent
