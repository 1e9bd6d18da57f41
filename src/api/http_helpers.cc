#include "api/http_helpers.h"

#include <chrono>

#include <httplib.h>

namespace tessera::api {

void assumeNoBodyWithoutLength(const httplib::Request& req) {
  // The Request is httplib's own, not a const object: only the handler's declaration is.
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
    const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
  }
}

std::thread listenInBackground(httplib::Server& server) {
  std::thread t([&server] { server.listen_after_bind(); });
  for (int i = 0; i < 5000 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return t;
}

}  // namespace tessera::api
