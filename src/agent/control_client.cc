#include "agent/control_client.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <httplib.h>

namespace tessera::agent {

using nlohmann::json;

ControlClient::~ControlClient() = default;

Result<std::unique_ptr<ControlClient>> ControlClient::create(ControlClientOptions options) {
  if (options.server.rfind("http://", 0) != 0 && options.server.rfind("https://", 0) != 0) {
    return fail(Error::invalid("server: expected http://HOST:PORT or https://HOST:PORT, got \"" +
                               options.server + "\""));
  }
  while (!options.server.empty() && options.server.back() == '/') options.server.pop_back();
  if (options.caFile && options.server.rfind("https://", 0) != 0) {
    return fail(
        Error::invalid("tlsCa is set but the server URL " + options.server + " is not https://"));
  }
  if (options.caFile) {
    std::ifstream probe(*options.caFile);
    if (!probe) return fail(Error::invalid("tlsCa: cannot read " + *options.caFile));
  }
  return std::unique_ptr<ControlClient>(new ControlClient(std::move(options)));
}

Result<ControlClient::Reply> ControlClient::call(const std::string& method, const std::string& path,
                                                 const json* body) {
  httplib::Client client(options_.server);
  client.set_connection_timeout(options_.timeoutSeconds);
  client.set_read_timeout(options_.timeoutSeconds);
  client.set_write_timeout(options_.timeoutSeconds);
  if (options_.caFile) client.set_ca_cert_path(options_.caFile->c_str());
  httplib::Headers headers;
  if (options_.token) headers.emplace("Authorization", "Bearer " + *options_.token);
  const std::string payload = body != nullptr ? body->dump() : std::string();
  httplib::Result r = method == "GET" ? client.Get(path, headers)
                                      : client.Post(path, headers, payload, "application/json");
  if (!r) {
    if (r.error() == httplib::Error::SSLServerVerification) {
      return fail(Error::internal(
          method + " " + options_.server + path +
          ": the server's TLS certificate does not chain to " +
          (options_.caFile ? "the CA in " + *options_.caFile : std::string("the system's CAs")) +
          " (tlsCa), or does not name this host"));
    }
    return fail(Error::internal(method + " " + options_.server + path + ": no answer (" +
                                httplib::to_string(r.error()) + ")"));
  }
  Reply reply;
  reply.status = r->status;
  reply.body = json::parse(r->body, nullptr, false);
  return reply;
}

namespace {

Error fromReply(const std::string& what, int status, const json& body) {
  std::string message = what + ": HTTP " + std::to_string(status);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    message += ": " + body["error"].value("message", body["error"].value("code", ""));
  }
  if (status == 404) return Error::notFound(message);
  if (status == 400 || status == 401 || status == 403) return Error::invalid(message);
  if (status == 409) return Error::exists(message);
  return Error::internal(message);
}

}  // namespace

Result<void> ControlClient::registerNode(const json& node) {
  auto r = call("POST", "/api/v1/nodes", &node);
  if (!r) return fail(r.error());
  if (r->status == 200 || r->status == 201 || r->status == 409) return {};
  return fail(fromReply("register node", r->status, r->body));
}

Result<void> ControlClient::setCordoned(const std::string& node, bool cordoned) {
  const json empty = json::object();
  auto r = call("POST", "/api/v1/nodes/" + node + (cordoned ? "/cordon" : "/uncordon"), &empty);
  if (!r) return fail(r.error());
  if (r->status == 200) return {};
  return fail(fromReply(cordoned ? "cordon node" : "uncordon node", r->status, r->body));
}

Result<void> ControlClient::heartbeat(const std::string& node, const json& body) {
  auto r = call("POST", "/api/v1/nodes/" + node + "/heartbeat", &body);
  if (!r) return fail(r.error());
  if (r->status == 200) return {};
  return fail(fromReply("heartbeat", r->status, r->body));
}

Result<void> ControlClient::drainNode(const std::string& node) {
  const json empty = json::object();
  auto r = call("POST", "/api/v1/nodes/" + node + "/drain", &empty);
  if (!r) return fail(r.error());
  if (r->status == 200 || r->status == 202) return {};
  return fail(fromReply("drain node", r->status, r->body));
}

Result<json> ControlClient::getNode(const std::string& node) {
  auto r = call("GET", "/api/v1/nodes/" + node, nullptr);
  if (!r) return fail(r.error());
  if (r->status == 200) return r->body;
  return fail(fromReply("get node", r->status, r->body));
}

Backoff::Backoff(Millis initialMs, Millis maxMs, std::uint64_t seed)
    : initialMs_(std::max<Millis>(initialMs, 1)), maxMs_(std::max(maxMs, initialMs)), rng_(seed) {}

Millis Backoff::next() {
  Millis base = initialMs_;
  for (int i = 0; i < attempt_ && base < maxMs_; ++i) base *= 2;
  base = std::min(base, maxMs_);
  ++attempt_;
  std::uniform_int_distribution<Millis> jitter(base / 2, base);
  return jitter(rng_);
}

Result<std::string> readTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(Error::invalid("token file: cannot read " + path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.empty()) return fail(Error::invalid("token file: " + path + " is empty"));
  return token;
}

}  // namespace tessera::agent
