#pragma once
// The HTTP transport the adapters share: one request with a deadline, retried only when
// the caller says it changes nothing, every failure worded with engine, URL and request.
//
// Threading: HttpCall keeps only settings; call() opens its own connection, so any number
// of threads may call at once.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace tessera::engines::internal {

struct Endpoint {
  std::string schemeHostPort;  // "http://127.0.0.1:8000"
  std::string pathPrefix;      // "" or "/prefix" (no trailing slash)
};
// Accepts http:// and https:// URLs with a host; a trailing slash is dropped.
Result<Endpoint> parseUrl(std::string_view url);

struct Reply {
  int status = 0;
  std::string body;
};

struct RetryPolicy {
  int retries = 0;
  Millis backoffMs = 0;
};

enum class Idempotent { kNo, kYes };

class HttpCall {
 public:
  HttpCall(std::string engineKind, std::string url, Endpoint endpoint, RetryPolicy retry);

  // Sends one request; `path` starts with '/' and may carry a query. A reply with any
  // status comes back as a Reply; errors are transport failures only (refused, reset,
  // timed out). An idempotent request is tried again after a transport failure or a 503.
  Result<Reply> send(std::string_view method, const std::string& path, const std::string& body,
                     Millis timeoutMs, Idempotent idempotent) const;

  // "triton at http://h:p: POST /v2/repository/index" — the head of every message.
  std::string where(std::string_view method, const std::string& path) const;
  const std::string& url() const { return url_; }

 private:
  Result<Reply> sendOnce(std::string_view method, const std::string& path, const std::string& body,
                         Millis timeoutMs, bool& timedOut) const;

  std::string kind_;
  std::string url_;
  Endpoint endpoint_;
  RetryPolicy retry_;
};

// The body parsed as JSON, or kInternal naming the request and quoting the start of the
// body.
Result<nlohmann::json> parseJsonBody(const HttpCall& http, std::string_view method,
                                     const std::string& path, const Reply& reply);

// A refusal: the server answered `status` and said `message`. 400 (and other 4xx) is
// kInvalidArgument, 404 kNotFound, 5xx kInternal.
Error statusError(const std::string& where, int status, const std::string& message);

// The first characters of a body, on one line, for messages.
std::string excerpt(std::string_view body, std::size_t maxChars = 200);

// `text` percent-encoded for use as one path segment or query value.
std::string urlEncode(std::string_view text);

}  // namespace tessera::engines::internal
