#pragma once
// Helpers for the agent's tests: a temporary directory (the store's), files, a bounded poll,
// and the REAL control plane (ControlPlane + HttpServer) on a loopback port that a test can
// restart.
// Threading: owned by one test.

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/control_plane.h"
#include "api/http_server.h"
#include "common/testing/eventually.h"
#include "model/gpu_catalog.h"
#include "store/testing/temp_dir.h"

namespace tessera::agent::testing {

using store::testing::TempDir;

inline void writeFile(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Polls `done` every 20 ms until it holds or `limitMs` passed (a bound on a hang, not a
// timing assertion). Returns whether it held.
inline bool eventually(const std::function<bool()>& done, int limitMs = 20'000) {
  return tessera::eventually(done, std::chrono::milliseconds(limitMs),
                             std::chrono::milliseconds(20));
}

// A JSON answer of an HTTP API: status 0 and a null body when the request failed.
struct JsonReply {
  int status = 0;
  nlohmann::json body;
};

// POSTs `body` as JSON; a body that is not JSON parses to a discarded value.
inline JsonReply postJson(httplib::Client& client, const std::string& path,
                          const nlohmann::json& body = nlohmann::json::object()) {
  auto r = client.Post(path, body.dump(), "application/json");
  if (!r) return {};
  return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
}

// The real control plane with an in-memory store: a restart forgets every node, as a server
// without persistent state does.
class ControlPlaneServer {
 public:
  explicit ControlPlaneServer(std::optional<std::string> token = std::nullopt,
                              std::string tlsCert = "", std::string tlsKey = "")
      : token_(std::move(token)), tlsCert_(std::move(tlsCert)), tlsKey_(std::move(tlsKey)) {}
  ~ControlPlaneServer() { stop(); }

  // Starts on `port` (0: any free port; a restart passes the previous one).
  void start(int port = 0) {
    auto plane = api::ControlPlane::create(catalog_, clock_);
    ASSERT_TRUE(plane) << plane.error().message;
    plane_ = std::move(*plane);
    api::ServerConfig config;
    config.port = port;
    config.token = token_;
    config.threads = 2;
    config.tlsCertFile = tlsCert_;
    config.tlsKeyFile = tlsKey_;
    server_ = std::make_unique<api::HttpServer>(*plane_, config);
    auto bound = server_->start();
    ASSERT_TRUE(bound) << bound.error().message;
    port_ = *bound;
  }
  void stop() {
    if (server_) server_->stop();
    server_.reset();
    plane_.reset();
  }
  int port() const { return port_; }
  std::string url() const {
    return (tlsCert_.empty() ? "http://" : "https://") + std::string("127.0.0.1:") +
           std::to_string(port_);
  }

  // GET /api/v1/nodes/{name} over HTTP; a null json when it is not there.
  nlohmann::json node(const std::string& name) const {
    httplib::Client c(url());
    c.enable_server_certificate_verification(false);  // the test reads its own server
    c.set_connection_timeout(5);
    auto r = c.Get("/api/v1/nodes/" + name);
    if (!r || r->status != 200) return nullptr;
    return nlohmann::json::parse(r->body, nullptr, false);
  }

 private:
  model::GpuCatalog catalog_ = model::GpuCatalog::builtin();
  ManualClock clock_{0};
  std::optional<std::string> token_;
  std::string tlsCert_, tlsKey_;
  std::unique_ptr<api::ControlPlane> plane_;
  std::unique_ptr<api::HttpServer> server_;
  int port_ = 0;
};

}  // namespace tessera::agent::testing
