#pragma once
// The agent's side of the control plane API (docs/api.md, "Nodes"): register the node,
// heartbeat, cordon-and-drain. Each call is one HTTP request with the bearer token; retries
// and backoff belong to the caller (Agent), which knows what a failure means.
//
// Threading: calls may come from several threads; each uses its own connection.

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"

namespace tessera::agent {

struct ControlClientOptions {
  std::string server;  // http(s)://host:port
  std::optional<std::string> token;
  std::optional<std::string> caFile;  // TLS: trust this CA instead of the system's
  int timeoutSeconds = 5;
};

class ControlClient {
 public:
  static Result<std::unique_ptr<ControlClient>> create(ControlClientOptions options);
  ~ControlClient();

  // POST /api/v1/nodes. An existing node of that name (409) counts as registered.
  Result<void> registerNode(const nlohmann::json& node);
  // POST /api/v1/nodes/{node}/cordon or /uncordon.
  Result<void> setCordoned(const std::string& node, bool cordoned);
  // POST /api/v1/nodes/{name}/heartbeat. kNotFound when the server does not know the node
  // (it restarted without its state, or the node was deleted): register again.
  Result<void> heartbeat(const std::string& node, const nlohmann::json& body);
  // POST /api/v1/nodes/{name}/drain: cordon and drain the node's replicas.
  Result<void> drainNode(const std::string& node);
  // GET /api/v1/nodes/{name}.
  Result<nlohmann::json> getNode(const std::string& node);

  const std::string& server() const { return options_.server; }

 private:
  explicit ControlClient(ControlClientOptions options) : options_(std::move(options)) {}
  struct Reply {
    int status = 0;
    nlohmann::json body;
  };
  Result<Reply> call(const std::string& method, const std::string& path,
                     const nlohmann::json* body);

  ControlClientOptions options_;
};

// Exponential backoff with jitter: the n-th delay is uniform in [base/2, base] with
// base = min(initial x 2^n, max), so a fleet of agents that lost the server together does
// not come back in lock step.
//
// Threading: one thread.
class Backoff {
 public:
  Backoff(Millis initialMs, Millis maxMs, std::uint64_t seed);
  Millis next();
  void reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }

 private:
  Millis initialMs_, maxMs_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

// Reads a bearer token file (trailing newline and spaces stripped); errors name the file.
Result<std::string> readTokenFile(const std::string& path);

}  // namespace tessera::agent
