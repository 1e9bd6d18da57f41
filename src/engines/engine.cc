#include "engines/engine.h"

#include "engines/triton_engine.h"
#include "engines/vllm_engine.h"

namespace tessera::engines {

const char* modelPhaseName(ModelPhase phase) {
  switch (phase) {
    case ModelPhase::kAvailable:
      return "available";
    case ModelPhase::kLoading:
      return "loading";
    case ModelPhase::kReady:
      return "ready";
    case ModelPhase::kUnloading:
      return "unloading";
    case ModelPhase::kUnavailable:
      return "unavailable";
    case ModelPhase::kSleeping:
      return "sleeping";
  }
  return "unknown";
}

Result<void> Engine::sleep(SleepLevel) {
  return fail(Error::precondition(std::string(kind()) + " at " + url() + ": has no sleep mode"));
}

Result<void> Engine::wakeUp(const std::vector<WakeTag>&) {
  return fail(Error::precondition(std::string(kind()) + " at " + url() + ": has no sleep mode"));
}

Result<bool> Engine::sleeping() {
  return fail(Error::precondition(std::string(kind()) + " at " + url() + ": has no sleep mode"));
}

Result<std::unique_ptr<Engine>> makeEngine(const EngineConfig& config) {
  auto endpoint = internal::parseUrl(config.url);
  if (!endpoint) return fail(std::move(endpoint.error()));
  if (config.timeoutMs <= 0 || config.loadTimeoutMs <= 0) {
    return fail(Error::invalid("engine " + config.url + ": timeouts must be positive"));
  }
  if (config.retries < 0 || config.retryBackoffMs < 0) {
    return fail(Error::invalid("engine " + config.url +
                               ": retries and retryBackoffMs must not be negative"));
  }
  if (config.kind == "triton") {
    return std::unique_ptr<Engine>(std::make_unique<TritonEngine>(config, std::move(*endpoint)));
  }
  if (config.kind == "vllm") {
    return std::unique_ptr<Engine>(std::make_unique<VllmEngine>(config, std::move(*endpoint)));
  }
  return fail(Error::invalid("engine " + config.url + ": kind '" + config.kind +
                             "' is not one of triton, vllm"));
}

}  // namespace tessera::engines
