#pragma once
// The device memory pool hosted by the agent (docs/agent.md, "Device pool"; src/devpool):
// one arena pre-allocated when the agent starts, the loader and the model registry on it, and
// the admin routes that load models from the node cache into it.
//
//  - Backend: devicePool.backend host | cuda | auto. auto takes cuda when the node's GPUs
//    were discovered through NVML and libcudart loads and answers; with virtual GPUs, or
//    when CUDA is not usable, it takes host and says why (log and /status).
//  - Size: devicePool.size, or by default 90% of GPU 0's free memory (cuda) or 1/16 of the
//    host's physical memory, at most 512 MiB (host: the host backend stands in for a device).
//  - enabled: true (the default) fails the start-up when the pool cannot be created; auto
//    logs the reason and runs without a pool (the load routes answer 409); false: no pool.
//
// Admin routes: POST /models/{m}/load {"version": "v2"} (202; the cache entry "m@v2" when
// the cache or a source has it, else "m", staged from the sources first when not cached and
// pinned while a version loaded from it is loading or resident), POST /models/{m}/cancel,
// DELETE /models/{m} (drains the leases, then unloads; 202), GET /models.
//
// Threading: every method is safe from any thread. Loads, stages and unloads run on worker
// threads of their own, joined by stop(). mu_ guards the jobs and pins; it is never held
// across a stage, a load or a registry call that blocks.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent_config.h"
#include "agent/component.h"
#include "agent/devpool_work.h"
#include "agent/model_cache.h"
#include "agent/model_source.h"
#include "agent/work.h"
#include "common/clock.h"
#include "devpool/backend.h"
#include "devpool/block_pool.h"
#include "devpool/loader.h"
#include "devpool/registry.h"

namespace tessera::agent {

struct DevicePoolHostOptions {
  DevicePoolConfig config;
  ModelCache* cache = nullptr;  // loads need it
  std::vector<ModelSource*> sources;
  int drainTimeoutMs = 30'000;  // leases of a version being switched out or unloaded
  std::string gpuSource;        // GpuSource::kind(): "nvml", "virtual", ...
  std::function<void(const std::string&)> log;
  // Tests: runs on the load's worker once the cache entry is pinned, before the registry load.
  std::function<void(const std::string& model)> beforeLoad;
};

// The default pool size when devicePool.size is not given.
std::uint64_t defaultHostPoolBytes(std::uint64_t physicalBytes);
std::uint64_t defaultCudaPoolBytes(std::uint64_t freeBytes);

class DevicePoolHost final : public AgentComponent {
 public:
  explicit DevicePoolHost(DevicePoolHostOptions options);
  ~DevicePoolHost() override;
  DevicePoolHost(const DevicePoolHost&) = delete;
  DevicePoolHost& operator=(const DevicePoolHost&) = delete;

  std::string name() const override { return "devicePool"; }
  // Creates the backend, the arena, the loader and the registry.
  Result<void> start(const std::vector<AgentGpu>& gpus) override;
  void stop() override;
  nlohmann::json status() const override;
  // "devicePool": the pool's blocks and which model versions it holds or is loading, so the
  // control plane (GET /api/v1/nodes) sees what is resident in GPU memory.
  nlohmann::json heartbeatFields() const override;
  void adminRoutes(httplib::Server& server) override;

  // For AgentParts: loads and leases count as work in flight; the drain releases the pool.
  WorkTracker* work() { return &work_; }
  DeviceMemory* deviceMemory() { return &memory_; }
  // False while the node takes no new work (a drain): loads are refused with 409.
  void setAcceptingWork(std::function<bool()> accepting);

  // Starts loading `version` of `model` (the checks that answer at once: 404, 409, 400),
  // returns the 202 body.
  Result<nlohmann::json> startLoad(const std::string& model, const std::string& version);
  Result<void> cancel(const std::string& model);
  Result<void> startUnload(const std::string& model);
  nlohmann::json models() const;

  bool active() const { return registry_ != nullptr; }
  // The pool's parts (tests); null before start() or without a pool.
  devpool::ModelRegistry* registry() { return registry_.get(); }
  devpool::BlockPool* pool() { return pool_.get(); }
  devpool::DeviceBackend* backend() { return backend_.get(); }

 private:
  struct Job {
    std::string version, entry;
    std::string phase;  // "staging", "loading", "unloading"
    Millis startedMs = 0;
    std::shared_ptr<devpool::CancelToken> cancel;
  };
  class Work final : public WorkTracker {
   public:
    explicit Work(DevicePoolHost& host) : host_(host) {}
    std::string name() const override { return "device pool"; }
    std::size_t inFlight() const override;

   private:
    DevicePoolHost& host_;
  };
  class Memory final : public DeviceMemory {
   public:
    explicit Memory(DevicePoolHost& host) : host_(host) {}
    std::string name() const override { return "device pool"; }
    Result<void> releaseAll() override;

   private:
    DevicePoolHost& host_;
  };

  Result<void> create(const std::vector<AgentGpu>& gpus);
  void say(const std::string& line) const;
  void runLoad(std::string model, std::string version, std::string entry, bool staged,
               std::shared_ptr<devpool::CancelToken> cancel);
  void runUnload(std::string model);
  void unpinVersion(const std::string& model, const std::string& version);
  void spawn(std::function<void()> fn);

  DevicePoolHostOptions options_;
  SteadyClock clock_;
  std::unique_ptr<devpool::DeviceBackend> backend_;
  std::unique_ptr<devpool::BlockPool> pool_;
  std::unique_ptr<devpool::Loader> loader_;
  std::unique_ptr<devpool::ModelRegistry> registry_;
  std::unique_ptr<RegistryWork> registryWork_;
  std::unique_ptr<RegistryDeviceMemory> registryMemory_;
  Work work_{*this};
  Memory memory_{*this};
  std::string backendName_ = "none", backendReason_, createError_;

  mutable std::mutex mu_;
  bool stopped_ = false;
  std::function<bool()> accepting_;
  std::map<std::string, Job> jobs_;              // by model: staging, loading, unloading
  std::map<std::string, std::string> pins_;      // "model\nversion" -> pinned cache entry
  std::map<std::string, std::string> failures_;  // model -> last failure (staging)
  std::map<std::string, double> lastBandwidth_;  // model -> MB/s of its last load
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<Worker> workers_;  // finished ones are joined by the next spawn()
};

}  // namespace tessera::agent
