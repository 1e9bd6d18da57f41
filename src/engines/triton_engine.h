#pragma once
// Triton Inference Server through the KServe v2 protocol and Triton's model repository
// extension. Triton must run with --model-control-mode=explicit, or it refuses every load
// and unload with a 503 (reported as kFailedPrecondition naming the flag; docs/engines.md).
//
//   list()    POST v2/repository/index {}          every model and version with its state
//   load()    POST v2/repository/models/<m>/load   {"parameters": {"config": "<json>",
//                                                   "file:<path>": "<base64>"}} (optional)
//   unload()  POST v2/repository/models/<m>/unload
//   ready()   GET  v2/models/<m>[/versions/<v>]/ready   200 ready, 400/404 not
//   healthy() GET  v2/health/ready
//
// A version switch is one reload: load() with `version` sends the model's configuration
// with version_policy {"specific": {"versions": [v]}}. Triton loads that version while the
// old one keeps serving, then retires the old one; if the new version fails, the old one
// stays. The HTTP API cannot unload a single version, so the adapter does not pretend to.

#include "engines/engine.h"
#include "engines/internal/http_call.h"

namespace tessera::engines {

class TritonEngine final : public Engine {
 public:
  TritonEngine(const EngineConfig& config, internal::Endpoint endpoint);

  std::string_view kind() const override { return "triton"; }
  const std::string& url() const override { return http_.url(); }
  Capabilities capabilities() const override {
    return {.repository = true, .versions = true, .adapters = false, .sleep = false};
  }

  Result<bool> healthy() override;
  Result<std::vector<ModelState>> list() override;
  Result<void> load(const LoadRequest& request) override;
  Result<void> unload(const std::string& model) override;
  Result<bool> ready(const std::string& model,
                     std::optional<std::int64_t> version = std::nullopt) override;

  // The configuration Triton serves the loaded model with (GET v2/models/<m>/config).
  Result<std::string> configJson(const std::string& model);

 private:
  Result<bool> probe(const std::string& path);
  Error refusal(std::string_view method, const std::string& path,
                const internal::Reply& reply) const;

  internal::HttpCall http_;
  Millis timeoutMs_;
  Millis loadTimeoutMs_;
};

}  // namespace tessera::engines
