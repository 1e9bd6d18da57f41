#include "http_request.h"

#include <cstdio>
#include <cstdlib>

#include "fuzz_support.h"

namespace tessera::fuzz {
namespace {

std::string stringField(const nlohmann::json& request, const char* key, std::string fallback) {
  const auto it = request.find(key);
  return it != request.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

std::string FuzzRequest::describe(std::size_t index) const {
  return "request " + std::to_string(index) + " " + method + " " + path;
}

std::optional<FuzzRequest> readFuzzRequest(const nlohmann::json& request) {
  if (!request.is_object()) return std::nullopt;
  FuzzRequest r;
  r.method = stringField(request, "method", "GET");
  if (r.method != "GET" && r.method != "POST" && r.method != "PUT" && r.method != "PATCH" &&
      r.method != "DELETE") {
    return std::nullopt;
  }
  const std::string path = stringField(request, "path", "");
  if (path.empty() || path[0] != '/' || path.size() > 4096) return std::nullopt;
  r.path = encodeUrlPath(path);
  if (const auto q = request.find("query"); q != request.end() && q->is_string()) {
    r.path += "?" + encodeUrlPath(q->get<std::string>(), "=&,");
  }
  if (const auto b = request.find("body"); b != request.end()) {
    r.body = b->is_string() ? b->get<std::string>()
                            : b->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  r.contentType = stringField(request, "contentType", r.contentType);
  if (const auto a = request.find("auth"); a != request.end() && *a == false) r.auth = false;
  return r;
}

httplib::Result sendFuzzRequest(httplib::Client& client, const FuzzRequest& r,
                                const httplib::Headers& headers, std::size_t index) {
  httplib::Result answer =
      r.method == "GET"    ? client.Get(r.path, headers)
      : r.method == "POST" ? client.Post(r.path, headers, r.body, r.contentType)
      : r.method == "PUT"  ? client.Put(r.path, headers, r.body, r.contentType)
      : r.method == "PATCH"
          ? client.Patch(r.path, headers, r.body, r.contentType)
          : client.Delete(r.path, headers, r.body, r.contentType);
  TESSERA_FUZZ_CHECK(static_cast<bool>(answer), r.describe(index) + ": no answer (" +
                                                    httplib::to_string(answer.error()) + ")");
  if (std::getenv("TESSERA_FUZZ_TRACE") != nullptr) {
    std::fprintf(stderr, "%s -> %d %.200s\n", r.describe(index).c_str(), answer->status,
                 answer->body.c_str());
  }
  return answer;
}

}  // namespace tessera::fuzz
