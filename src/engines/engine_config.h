#pragma once
// An engine entry of the agent's configuration, read from JSON (the YAML loaders turn YAML
// into the same JSON):
//
//   {"kind": "triton", "url": "http://127.0.0.1:8000", "timeoutMs": 5000,
//    "loadTimeoutMs": 600000, "retries": 2, "retryBackoffMs": 100}
//
// kind and url are required; the rest default as in EngineConfig. Unknown keys are errors.

#include <nlohmann/json_fwd.hpp>

#include "engines/engine.h"

namespace tessera::engines {

// `where` heads error messages ("agent.yaml: engines[0]").
Result<EngineConfig> engineConfigFromJson(const nlohmann::json& entry, const std::string& where);

}  // namespace tessera::engines
