#pragma once
// The inference servers on the node, as the agent drives them (docs/agent.md, "Engines";
// the adapters are src/engines, docs/engines.md).
//
//  - a refresh thread reads each engine's health, models and sleep state every period; GET
//    /status shows that view under "engines" (so a hung engine never slows /status);
//  - POST /models/{model}/switch drives a version switch through the engine that serves the
//    model: Triton loads the version with a version policy (the old version serves until the
//    new one is ready) and the agent checks the version is ready; vLLM loads the LoRA adapter
//    from `path`, replacing one of the same name in place;
//  - POST /engines/{name}/sleep and /engines/{name}/wake put a vLLM engine to sleep (only
//    with no work in flight: vLLM's sleep aborts running requests) and wake it;
//  - the drain, once work in flight is over, sleeps or unloads per engine (`onDrain`).
//
// Threading: see component.h. mu_ guards the cached view and the switch records; it is never
// held across an engine call. Switches of one engine run one at a time (switchMu_).

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_config.h"
#include "agent/component.h"
#include "engines/engine.h"

namespace tessera::agent {

class EnginesHost final : public AgentComponent {
 public:
  // Builds the adapters (nothing is contacted yet). Errors: an entry makeEngine refuses.
  static Result<std::unique_ptr<EnginesHost>> create(std::vector<AgentEngineConfig> configs,
                                                     Millis refreshMs);
  ~EnginesHost() override;

  // The agent's count of work in flight; sleep refuses while it is above 0. Unset: 0.
  void setInFlight(std::function<std::size_t()> inFlight);
  void setLog(std::function<void(const std::string&)> log);
  // Whether the node takes new work (the agent is running, not draining); switches and
  // wake-ups are refused when not. Unset: always.
  void setAccepting(std::function<bool()> accepting);

  std::string name() const override { return "engines"; }
  Result<void> start(const std::vector<AgentGpu>& gpus) override;
  std::vector<std::string> drain(std::size_t workLeft) override;
  void stop() override;
  nlohmann::json status() const override;
  void adminRoutes(httplib::Server& server) override;

  // POST /models/{model}/switch. Body: {"version": N} (Triton; optional "config": a model
  // configuration object for a model not loaded yet), {"path": "/adapters/x", "version":
  // "v2"} (vLLM; "version" is a label the agent reports), optional "engine": a name.
  Result<nlohmann::json> switchModel(const std::string& model, const nlohmann::json& body);
  // Sleep (level 1 or 2) or wake one engine by name. Sleep refuses with work in flight
  // unless `force`.
  Result<nlohmann::json> sleepEngine(const std::string& name, int level, bool force);
  Result<nlohmann::json> wakeEngine(const std::string& name);
  // Reads every engine now and stores the view status() shows.
  void refresh();

 private:
  struct Slot {
    AgentEngineConfig config;
    std::unique_ptr<engines::Engine> engine;
    std::unique_ptr<std::mutex> switchMu;  // one switch at a time per engine
  };
  EnginesHost(std::vector<Slot> slots, Millis refreshMs);
  Slot* find(const std::string& name);
  // The engine serving `model` (by its list), or the only one configured.
  Result<Slot*> engineFor(const std::string& model, const nlohmann::json& body);
  nlohmann::json probe(Slot& slot);
  void say(const std::string& line) const;

  std::vector<Slot> slots_;
  Millis refreshMs_;
  std::function<std::size_t()> inFlight_;
  std::function<void(const std::string&)> log_;
  std::function<bool()> accepting_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, nlohmann::json> view_;         // engine name -> last probe
  std::map<std::string, nlohmann::json> lastSwitch_;   // engine name -> last switch
  std::map<std::string, nlohmann::json> adapterTags_;  // "engine/model" -> version label
  std::thread refresher_;
};

}  // namespace tessera::agent
