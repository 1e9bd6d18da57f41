#pragma once
// The request lists of the HTTP fuzz targets (http_fuzz, agent_admin_fuzz): one JSON object per
// request, {"method", "path", "query", "body" (JSON, or text sent as it is), "contentType",
// "auth": false}, read into a request an httplib client can send, and sent.

#include <optional>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tessera::fuzz {

struct FuzzRequest {
  std::string method;  // GET, POST, PUT, PATCH or DELETE
  std::string path;    // percent-encoded, with its query
  std::string body;
  std::string contentType = "application/json";
  bool auth = true;  // send the target's bearer token
  // "request N METHOD PATH", for messages.
  std::string describe(std::size_t index) const;
};

// nullopt when the object cannot be a request (no path starting with '/', an unknown method).
std::optional<FuzzRequest> readFuzzRequest(const nlohmann::json& request);

// Sends it with `headers`; with TESSERA_FUZZ_TRACE set, prints it and the answer to stderr.
httplib::Result sendFuzzRequest(httplib::Client& client, const FuzzRequest& request,
                                const httplib::Headers& headers, std::size_t index);

}  // namespace tessera::fuzz
