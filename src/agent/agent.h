#pragma once
// The node agent: ties a node to the control plane.
//
//  - registers the node (its GPUs from NVML or the configured virtual GPUs, host CPU and
//    memory, labels, cached models) and heartbeats its telemetry and cache contents every
//    period; on failure it retries with exponential backoff and jitter, and when the server
//    answers 404 (it restarted without its state) it registers again;
//  - keeps the node model cache: preloads configured models, stages more on request;
//  - serves a local admin API (loopback only, no auth): GET /status, /healthz, /readyz;
//    POST /drain; POST /models/{model}/stage; POST /leases, DELETE /leases/{id}; and the
//    routes of its components (component.h: the device plugin, the engines);
//  - drains: stop taking new work (leases refused, /readyz 503, node cordoned and drained at
//    the control plane), wait the stop-new-work window, wait for in-flight work (every
//    WorkTracker at 0) up to the in-flight limit, drain the components (engines sleep or
//    unload, the device plugin stops), release device memory, then stop.
//
// Threading: public methods are safe from any thread. Locks: mu_ guards the agent's state;
// it is never held across network calls, cache staging or a tracker/device callback. The
// cache has its own lock (taken after mu_ is released, never the other way round).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent_config.h"
#include "agent/component.h"
#include "agent/control_client.h"
#include "agent/gpu_source.h"
#include "agent/model_cache.h"
#include "agent/work.h"
#include "api/log.h"
#include "common/clock.h"

namespace httplib {
class Server;
}

namespace tessera::agent {

struct AgentParts {
  GpuSource* gpus = nullptr;        // required
  ControlClient* client = nullptr;  // required
  ModelCache* cache = nullptr;      // optional: no cache, no cachedModels
  std::vector<ModelSource*> sources;
  std::vector<WorkTracker*> trackers;  // besides the agent's own leases
  DeviceMemory* device = nullptr;      // optional
  // Started with the agent, drained after work in flight, stopped with it (the device
  // plugin, the engines); in this order.
  std::vector<AgentComponent*> components;
  api::Logger* log = nullptr;  // required
};

struct AgentTimings {
  Millis backoffInitialMs = 500;
  Millis backoffMaxMs = 30'000;
  Millis drainPollMs = 50;
  // After a drain the admin API stays up this long so that `tessera agent drain` sees the
  // "drained" state before the process exits.
  Millis lingerMs = 1'000;
};

enum class AgentPhase { kRunning, kDraining, kDrained };

// Where an agent with a model cache whose admin address has port 0 writes the address it
// bound (HOST:PORT and a newline), so that `tessera agent status` and `agent drain` with the
// same file find it: <cache.dir>/admin-address. Removed when the agent stops.
std::string adminAddressPath(const AgentConfig& config);

class Agent {
 public:
  Agent(AgentConfig config, AgentParts parts, AgentTimings timings = {});
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Binds the admin API (returns its port) and starts the heartbeat and preload threads.
  // Fails only on local problems (the admin address, a port in use); an unreachable server is
  // retried. With port 0 the address bound is written to adminAddressPath(config).
  Result<int> start();
  // Starts a drain (idempotent); wait() returns once it finished.
  void drain(const std::string& reason);
  // Blocks until the agent stopped (a drain finished, or stop()); returns the exit code.
  int wait();
  // Stops at once, without draining (tests, second signal).
  void stop();

  nlohmann::json status() const;
  AgentPhase phase() const;
  // True once wait() would return at once (drained, or stopped).
  bool finished() const;
  const std::string& nodeName() const { return config_.nodeName; }

  // Work the agent tracks itself: a lease on `model` (may be empty) pins it in the cache.
  Result<std::string> acquireLease(const std::string& model);
  Result<void> releaseLease(const std::string& id);
  std::size_t inFlight() const;

  // The registration body (a cluster-file node entry) and the heartbeat body.
  nlohmann::json registrationBody(const std::vector<AgentGpu>& gpus) const;
  nlohmann::json heartbeatBody(const std::vector<AgentGpu>& gpus) const;

 private:
  void heartbeatLoop();
  // Stages the models queued by `preload` and by POST /models/{m}/stage, one at a time, on
  // its own thread: a copy of many GiB never holds an admin thread, so /drain (the preStop
  // hook) and /status stay answered.
  void stageLoop();
  // Queues `model` for the stage worker unless it is queued or staging already.
  void enqueueStageLocked(const std::string& model);
  nlohmann::json stageJsonLocked(const std::string& model) const;
  void drainSequence(std::string reason);
  void reconcileRegistration(const std::vector<AgentGpu>& gpus);
  std::string drainMarkerPath() const;
  void adminRoutes();
  void wake();
  void stopComponents();
  void writeAdminAddress(const std::string& address);
  void removeAdminAddress();
  // Sleeps up to `ms` or until woken; false when the agent is stopping.
  bool sleepFor(Millis ms);
  // Sleeps `ms` unless the agent stops (wake() does not cut it short); false when stopping.
  bool pauseFor(Millis ms);

  AgentConfig config_;
  AgentParts parts_;
  AgentTimings timings_;
  SteadyClock clock_;

  mutable std::mutex mu_;
  // Held across a registration's look at the node's cordon and the drain marker, and across a
  // drain's cordon and marker write: a drain that starts while the agent registers must not
  // have its fresh marker taken for the previous agent's and removed.
  std::mutex markerMu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool wakeRequested_ = false;
  bool done_ = false;
  AgentPhase phase_ = AgentPhase::kRunning;
  bool registered_ = false;
  std::int64_t registrations_ = 0, heartbeats_ = 0, heartbeatFailures_ = 0;
  std::string lastError_;
  // What registering found wrong with the server's record of this node (a cordon this agent
  // did not set, other GPUs than discovered), shown in /status.
  std::vector<std::string> registrationWarnings_;
  std::string drainReason_;
  std::vector<std::string> drainLog_;
  std::vector<AgentGpu> lastGpus_;
  std::map<std::string, std::string> leases_;  // id -> model ("" for none)
  std::uint64_t nextLease_ = 0;
  std::vector<std::string> preloadErrors_;
  // Staging: what the worker has to do, and what it did (per model, the last request).
  struct StageState {
    std::string state;  // queued | staging | staged | failed
    std::optional<Error> error;
    std::int64_t diskBytes = 0;
  };
  std::deque<std::string> stageQueue_;
  std::map<std::string, StageState> stages_;
  std::condition_variable stageCv_;
  std::once_flag componentsStopped_;

  std::string adminAddressWritten_;  // adminAddressPath, once written (port 0)
  std::unique_ptr<httplib::Server> admin_;
  std::thread adminThread_, heartbeatThread_, stageThread_, drainThread_;
};

const char* phaseName(AgentPhase phase);

}  // namespace tessera::agent
