#pragma once
// The devicePool section of a node agent's heartbeat (docs/api.md, "Heartbeats"): checked
// field by field and rebuilt, so nothing but the documented fields is kept.

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace tessera::api {

Result<nlohmann::json> parseDevicePool(const nlohmann::json& pool);

}  // namespace tessera::api
