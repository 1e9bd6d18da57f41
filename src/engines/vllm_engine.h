#pragma once
// vLLM's OpenAI-compatible server. The base model is fixed when vLLM starts; at run time
// the adapter loads and unloads LoRA adapters on it and puts the whole engine to sleep.
//
//   list()    GET  /v1/models (base model and adapters; an adapter has a `parent`), and
//             GET  /is_sleeping where the sleep endpoints exist
//   load()    POST /v1/load_lora_adapter   {"lora_name", "lora_path"[, "load_inplace"]}
//   unload()  POST /v1/unload_lora_adapter {"lora_name"}
//   ready()   the model is listed and the engine is awake
//   healthy() GET  /health
//   sleep()   POST /sleep?level=1|2       wakeUp() POST /wake_up[?tags=weights&tags=kv_cache]
//   sleeping() GET /is_sleeping -> {"is_sleeping": bool}
//
// The LoRA endpoints exist only with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (and
// --enable-lora), the sleep endpoints only with VLLM_SERVER_DEV_MODE=1 and
// --enable-sleep-mode; without them vLLM answers 404 {"detail": "Not Found"}, which the
// adapter reports as kFailedPrecondition naming the missing setting.

#include "engines/engine.h"
#include "engines/internal/http_call.h"

namespace tessera::engines {

class VllmEngine final : public Engine {
 public:
  VllmEngine(const EngineConfig& config, internal::Endpoint endpoint);

  std::string_view kind() const override { return "vllm"; }
  const std::string& url() const override { return http_.url(); }
  Capabilities capabilities() const override {
    return {.repository = false, .versions = false, .adapters = true, .sleep = true};
  }

  Result<bool> healthy() override;
  Result<std::vector<ModelState>> list() override;
  Result<void> load(const LoadRequest& request) override;
  Result<void> unload(const std::string& model) override;
  Result<bool> ready(const std::string& model,
                     std::optional<std::int64_t> version = std::nullopt) override;

  Result<void> sleep(SleepLevel level) override;
  Result<void> wakeUp(const std::vector<WakeTag>& tags = {}) override;
  Result<bool> sleeping() override;

 private:
  // `missingSetting` names what turns the route on, for a 404 that means "no such route".
  Result<internal::Reply> post(const std::string& path, const std::string& body,
                               const char* missingSetting);
  Error refusal(std::string_view method, const std::string& path,
                const internal::Reply& reply) const;
  // nullopt when the sleep endpoints are off (the engine then never sleeps).
  Result<std::optional<bool>> sleepingIfKnown();

  internal::HttpCall http_;
  Millis timeoutMs_;
  Millis loadTimeoutMs_;
};

}  // namespace tessera::engines
