#include "api/http_no_body.h"

#include <httplib.h>

namespace tessera::api {

void assumeNoBodyWithoutLength(const httplib::Request& req) {
  // The Request is httplib's own, not a const object: only the handler's declaration is.
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
    const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
  }
}

}  // namespace tessera::api
