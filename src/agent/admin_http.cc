#include "agent/admin_http.h"

#include <httplib.h>

namespace tessera::agent::admin {

int statusOf(const Error& e, int internalStatus) {
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kResourceExhausted:
      return 409;
    case ErrorCode::kInternal:
      return internalStatus;
  }
  return internalStatus;
}

void sendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void sendError(httplib::Response& res, const Error& e, int internalStatus) {
  sendJson(res, statusOf(e, internalStatus),
           {{"error", {{"code", errorCodeName(e.code)}, {"message", e.message}}}});
}

}  // namespace tessera::agent::admin
