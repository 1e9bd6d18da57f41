#pragma once
// A stand-in for vLLM's OpenAI-compatible server over real HTTP: /health, /v1/models, the
// runtime LoRA endpoints (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True) and the dev-mode sleep
// endpoints (VLLM_SERVER_DEV_MODE=1 --enable-sleep-mode), with vLLM's paths, bodies,
// status codes and messages:
//   - errors are {"error": {"message", "type", "param", "code"}};
//   - a LoRA route hit without the setting, or a sleep route without dev mode, is 404
//     {"detail": "Not Found"} (the route does not exist);
//   - load_lora_adapter needs Content-Type application/json (415), both fields (422 when
//     absent, 400 when empty), an unused name unless load_inplace (400 "has already been
//     loaded"), and a directory holding adapter_config.json (404 "No adapter found");
//   - unload_lora_adapter of an unknown name is 404 "cannot be found";
//   - sleep?level= takes 1 or 2 (anything else is a 500, as vLLM fails inside the engine);
//     wake_up with tags wakes those parts only, and is_sleeping stays true until both
//     weights and kv_cache are back.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engines/testing/fake_server.h"

namespace tessera::engines::testing {

struct FakeVllmOptions {
  std::string baseModel = "meta-llama/Llama-3.1-8B-Instruct";
  std::string baseRoot = "/models/llama-3.1-8b";
  bool devMode = true;      // VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode
  bool runtimeLora = true;  // VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora
  int maxModelLen = 8192;
};

class FakeVllm final : public FakeServer {
 public:
  explicit FakeVllm(FakeVllmOptions options);
  ~FakeVllm() override;

  int sleepLevel() const;                     // 0 when awake
  std::set<std::string> asleepParts() const;  // "weights", "kv_cache"
  std::vector<std::string> adapters() const;  // in load order

 private:
  struct Adapter {
    std::string name;
    std::string path;
    int id = 0;
  };

  void routes(httplib::Server& server) override;
  void handleModels(httplib::Response& res);
  void handleLoad(const httplib::Request& req, httplib::Response& res);
  void handleUnload(const httplib::Request& req, httplib::Response& res);
  void handleSleep(const httplib::Request& req, httplib::Response& res);
  void handleWake(const httplib::Request& req, httplib::Response& res);

  FakeVllmOptions options_;
  mutable std::mutex stateMu_;
  std::vector<Adapter> adapters_;
  int nextId_ = 1;
  int sleepLevel_ = 0;
  std::set<std::string> asleep_;
};

}  // namespace tessera::engines::testing
