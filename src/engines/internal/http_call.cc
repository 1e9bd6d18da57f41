#include "engines/internal/http_call.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <thread>

#include "common/text.h"

namespace tessera::engines::internal {
namespace {

Millis nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string formatMs(Millis ms) {
  return std::to_string(ms) + " ms";
}

// A closed connection fails at once, an expired deadline after all of it; the margin only
// guards against a poll that wakes a little early.
Millis nearly(Millis timeoutMs) {
  return timeoutMs - timeoutMs / 10;
}

}  // namespace

Result<Endpoint> parseUrl(std::string_view url) {
  std::string_view rest;
  std::string scheme;
  if (url.starts_with("http://")) {
    scheme = "http://";
  } else if (url.starts_with("https://")) {
    scheme = "https://";
  } else {
    return fail(Error::invalid("engine url '" + std::string(url) +
                               "': must start with http:// or https://"));
  }
  rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  std::string_view hostPort = rest.substr(0, slash);
  std::string prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (hostPort.empty() || hostPort.starts_with(':')) {
    return fail(Error::invalid("engine url '" + std::string(url) + "': no host"));
  }
  if (prefix.find_first_of("?#") != std::string::npos) {
    return fail(Error::invalid("engine url '" + std::string(url) +
                               "': a query or fragment has no place in a base URL"));
  }
  return Endpoint{scheme + std::string(hostPort), std::move(prefix)};
}

HttpCall::HttpCall(std::string engineKind, std::string url, Endpoint endpoint, RetryPolicy retry)
    : kind_(std::move(engineKind)),
      url_(std::move(url)),
      endpoint_(std::move(endpoint)),
      retry_(retry) {}

std::string HttpCall::where(std::string_view method, const std::string& path) const {
  return kind_ + " at " + url_ + ": " + std::string(method) + " " + endpoint_.pathPrefix + path;
}

Result<Reply> HttpCall::sendOnce(std::string_view method, const std::string& path,
                                 const std::string& body, Millis timeoutMs, bool& timedOut) const {
  timedOut = false;
  httplib::Client client(endpoint_.schemeHostPort);
  if (!client.is_valid()) {
    return fail(Error::invalid(where(method, path) + ": unusable URL"));
  }
  const auto timeout = std::chrono::milliseconds(timeoutMs);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  client.set_keep_alive(false);

  const std::string target = endpoint_.pathPrefix + path;
  const Millis start = nowMs();
  if (method != "GET" && method != "POST") {
    return fail(Error::internal("unsupported HTTP method " + std::string(method)));
  }
  httplib::Result result = method == "GET" ? client.Get(target)
                           : body.empty()  ? client.Post(target)
                                           : client.Post(target, body, "application/json");
  if (result) return Reply{result->status, result->body};

  const Millis elapsed = nowMs() - start;
  std::string what;
  switch (result.error()) {
    case httplib::Error::Connection:
      what = "cannot connect (refused or unreachable; is the server running?)";
      break;
    case httplib::Error::ConnectionTimeout:
      timedOut = true;
      what = "timed out after " + formatMs(timeoutMs) + " connecting";
      break;
    case httplib::Error::Read:
      // httplib reports an expired read deadline and a closed connection alike; the
      // elapsed time tells them apart.
      timedOut = elapsed >= nearly(timeoutMs);
      what = timedOut ? "timed out after " + formatMs(timeoutMs) + " waiting for an answer"
                      : "connection closed before a full answer";
      break;
    case httplib::Error::Write:
      timedOut = elapsed >= nearly(timeoutMs);
      what = timedOut ? "timed out after " + formatMs(timeoutMs) + " sending"
                      : "connection closed while sending";
      break;
    default:
      what = httplib::to_string(result.error());
      break;
  }
  return fail(Error::internal(where(method, path) + ": " + what));
}

Result<Reply> HttpCall::send(std::string_view method, const std::string& path,
                             const std::string& body, Millis timeoutMs,
                             Idempotent idempotent) const {
  const int tries = idempotent == Idempotent::kYes ? 1 + retry_.retries : 1;
  Millis backoff = retry_.backoffMs;
  Result<Reply> last = fail(Error::internal("not sent"));
  int attempt = 1;
  for (;; ++attempt) {
    bool timedOut = false;
    last = sendOnce(method, path, body, timeoutMs, timedOut);
    // A timeout is not retried: a hung server would only make the caller wait again.
    const bool transient = last ? last->status == 503 : !timedOut;
    if (!transient || attempt == tries) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff));
    backoff *= 2;
  }
  if (!last && attempt > 1) {
    last.error().message += " (tried " + std::to_string(attempt) + " times)";
  }
  return last;
}

Error statusError(const std::string& where, int status, const std::string& message) {
  std::string text = where + ": HTTP " + std::to_string(status) + ": " +
                     (message.empty() ? "(no message)" : message);
  if (status == 404) return Error::notFound(std::move(text));
  if (status >= 400 && status < 500) return Error::invalid(std::move(text));
  return Error::internal(std::move(text));
}

std::string excerpt(std::string_view body, std::size_t maxChars) {
  std::string out;
  for (char c : body.substr(0, maxChars)) out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  if (body.size() > maxChars) out += "...";
  return out;
}

Result<nlohmann::json> parseJsonBody(const HttpCall& http, std::string_view method,
                                     const std::string& path, const Reply& reply) {
  auto parsed = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return fail(Error::internal(http.where(method, path) + ": answer (HTTP " +
                                std::to_string(reply.status) + ") is not JSON: '" +
                                excerpt(reply.body) + "'"));
  }
  return parsed;
}

std::string urlEncode(std::string_view text) { return percentEncode(text); }

}  // namespace tessera::engines::internal
