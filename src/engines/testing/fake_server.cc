#include "engines/testing/fake_server.h"

#include <httplib.h>

#include <chrono>

namespace tessera::engines::testing {
namespace {

// The log entry of the request this server thread handles (interception and handler run
// on the same thread, one request after the other).
thread_local std::size_t currentEntry = 0;

}  // namespace

FakeServer::FakeServer() : server_(std::make_unique<httplib::Server>()) {}

FakeServer::~FakeServer() {
  stop();
}

Result<int> FakeServer::start() {
  routes(*server_);
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return intercept(req, res) ? httplib::Server::HandlerResponse::Handled
                               : httplib::Server::HandlerResponse::Unhandled;
  });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) return fail(Error::internal("fake server: cannot bind a loopback port"));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() does nothing until the accept loop runs; wait for it so that a stop
  // right after start cannot leave the loop running.
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port_;
}

void FakeServer::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

void FakeServer::failNext(int count, int status, std::string body) {
  std::lock_guard lock(mu_);
  failCount_ = count;
  failStatus_ = status;
  failBody_ = std::move(body);
}

void FakeServer::garbleNext(int count) {
  std::lock_guard lock(mu_);
  garbleCount_ = count;
}

void FakeServer::hang(bool on) {
  {
    std::lock_guard lock(mu_);
    hanging_ = on;
  }
  cv_.notify_all();
}

void FakeServer::holdWork(bool on) {
  {
    std::lock_guard lock(mu_);
    holding_ = on;
  }
  cv_.notify_all();
}

bool FakeServer::awaitWork() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !holding_ || stopping_; });
  return !stopping_;
}

std::vector<RecordedRequest> FakeServer::requests() const {
  std::lock_guard lock(mu_);
  return log_;
}

int FakeServer::count(const std::string& method, const std::string& path) const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& r : log_) n += r.method == method && r.path == path;
  return n;
}

bool FakeServer::pause(long long ms) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
}

void FakeServer::noteBody(const httplib::Request& req) {
  std::lock_guard lock(mu_);
  if (currentEntry < log_.size()) log_[currentEntry].body = req.body;
}

bool FakeServer::intercept(const httplib::Request& req, httplib::Response& res) {
  std::unique_lock lock(mu_);
  std::string query;
  for (const auto& [key, value] : req.params) {
    query += (query.empty() ? "" : "&") + key + "=" + value;
  }
  currentEntry = log_.size();
  log_.push_back({req.method, req.path, query, req.body});
  cv_.wait(lock, [this] { return !hanging_ || stopping_; });
  if (stopping_) {
    res.status = 503;
    return true;
  }
  if (failCount_ > 0) {
    --failCount_;
    res.status = failStatus_;
    res.set_content(failBody_, "application/json");
    return true;
  }
  if (garbleCount_ > 0) {
    --garbleCount_;
    res.status = 200;
    res.set_content("<html><body>502 Bad Gateway</body></html>", "text/html");
    return true;
  }
  return false;
}

}  // namespace tessera::engines::testing
