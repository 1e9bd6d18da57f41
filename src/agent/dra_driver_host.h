#pragma once
// The agent's host for Tessera's DRA driver (src/dra, docs/dra.md), on when
// draDriver.enabled:
//
//  - start(): the inventory of the driver's GPUs (draDriver.gpus, or all) from discovery's
//    first view; serves the DRAPlugin endpoint and the registration socket (kubelet's plugin
//    watcher registers it), then publishes the node's ResourceSlice pool. An API server that
//    does not answer yet does not stop the agent: the pool is published at the next sample;
//  - gpusSampled(): hands the driver the sample (its health stream to kubelet is stamped with
//    it); a health change (or a pool not published yet) publishes the pool again, the
//    unhealthy GPU tainted;
//  - drain(): withdraws the pool, so kube-scheduler allocates no new claim here; the gRPC
//    service stays up until stop() so that kubelet can still unprepare claims of pods that
//    end;
//  - status(): sockets, registrations, the pool's generation and devices, the last error.
//
// Threading: see component.h; mu_ guards the state below, the driver and publisher are safe
// from any thread.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "agent/component.h"
#include "deviceplugin/inventory.h"

namespace tessera::k8s {
class KubeClient;
}
namespace tessera::model {
class GpuCatalog;
}
namespace tessera::dra {
class ClaimSource;
class Driver;
class SlicePublisher;
}  // namespace tessera::dra

namespace tessera::agent {

// The GPUs the device plugin must leave alone on this node: the DRA driver's (every GPU in
// mode `dra`, draDriver.gpus in mode `both`); none when the driver is off.
std::vector<std::string> draDriverGpus(const DraDriverConfig& config,
                                       const std::vector<AgentGpu>& gpus);
// Whether the device plugin runs next to the driver: off when the driver takes every GPU and
// the device plugin was not asked for explicitly.
bool devicePluginWanted(const AgentConfig& config);

struct DraDriverHostOptions {
  DraDriverConfig config;
  std::string nodeName;
  std::string mpsPipeDirectory = "/tmp/nvidia-mps";
  std::vector<std::string> controlDeviceNodes;
  const model::GpuCatalog* catalog = nullptr;   // productName/architecture figures; may be null
  // How often the agent samples its GPUs (gpusSampled, once per heartbeat): kubelet is told to
  // treat a device's health as unknown after three samples without news, at least 30 s.
  Millis sampleIntervalMs = 10'000;
  std::function<void(const std::string&)> log;  // nullptr: silent
};

class DraDriverHost final : public AgentComponent {
 public:
  explicit DraDriverHost(DraDriverHostOptions options);
  ~DraDriverHost() override;

  std::string name() const override { return "draDriver"; }
  Result<void> start(const std::vector<AgentGpu>& gpus) override;
  void gpusSampled(const std::vector<AgentGpu>& gpus) override;
  std::vector<std::string> drain(std::size_t workLeft) override;
  void stop() override;
  nlohmann::json status() const override;

  dra::Driver* driver() const { return driver_.get(); }  // tests

 private:
  deviceplugin::Inventory inventoryOf(const std::vector<AgentGpu>& gpus) const;
  void publish(const deviceplugin::Inventory& inventory);

  DraDriverHostOptions options_;
  std::unique_ptr<k8s::KubeClient> client_;
  std::unique_ptr<dra::ClaimSource> claims_;
  std::unique_ptr<dra::Driver> driver_;
  std::unique_ptr<dra::SlicePublisher> publisher_;
  mutable std::mutex mu_;
  deviceplugin::Inventory published_;  // as last published
  bool publishedOk_ = false;
  bool withdrawn_ = false;
  bool stopped_ = false;
  std::int64_t generation_ = 0;
  int devices_ = 0;
  std::string lastError_;
};

}  // namespace tessera::agent
