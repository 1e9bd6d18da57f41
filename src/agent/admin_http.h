#pragma once
// Answers of the agent's admin API, shared by the agent and the components that add routes to
// it: JSON bodies, and errors as {"error": {"code", "message"}} with the status the error's
// code maps to (400 invalid, 404 not found, 409 exists / precondition / no room, else
// `internalStatus`: 500 for the agent's own failures, 502 where it fronts an engine).

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace httplib {
struct Response;
}

namespace tessera::agent::admin {

void sendJson(httplib::Response& res, int status, const nlohmann::json& body);
void sendError(httplib::Response& res, const Error& e, int internalStatus = 500);

}  // namespace tessera::agent::admin
