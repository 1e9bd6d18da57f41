#include "agent/admin_http.h"

#include <httplib.h>

namespace tessera::agent::admin {

void sendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void sendError(httplib::Response& res, const Error& e, int internalStatus) {
  sendJson(res, httpStatusFor(e.code, internalStatus),
           {{"error", {{"code", errorCodeName(e.code)}, {"message", e.message}}}});
}

}  // namespace tessera::agent::admin
