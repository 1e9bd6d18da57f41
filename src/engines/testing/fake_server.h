#pragma once
// The HTTP scaffolding the stand-in servers share: a real httplib server on a loopback
// port, a log of what it was asked, and faults a test can inject (answer the next
// requests with an error status or with a body that is not JSON, or leave them hanging).
//
// Threading: every public method may be called from any thread while the server runs;
// handlers run on the server's own threads.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tessera::engines::testing {

struct RecordedRequest {
  std::string method;
  std::string path;   // without the query
  std::string query;  // "level=1", "tags=weights&tags=kv_cache", or ""
  std::string body;
};

class FakeServer {
 public:
  virtual ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  // Binds 127.0.0.1 on a free port and serves on a background thread.
  Result<int> start();
  // Releases hanging requests, finishes the rest, joins.
  void stop();
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The next `count` requests are answered `status` with `body` (application/json).
  void failNext(int count, int status, std::string body);
  // The next `count` requests are answered 200 with a body that is not JSON.
  void garbleNext(int count);
  // While on, requests are held unanswered (until off again, or stop()).
  void hang(bool on);
  // While on, slow work that a protocol does inside a request (a Triton load) stays in
  // progress: the request is received and its effects so far are visible, but it does not
  // finish until off again (or stop()).
  void holdWork(bool on);

  std::vector<RecordedRequest> requests() const;
  // How many requests had this method and path.
  int count(const std::string& method, const std::string& path) const;

 protected:
  FakeServer();
  // Registers the protocol's routes; called once by start().
  virtual void routes(httplib::Server& server) = 0;
  // Lets a handler wait (e.g. a slow load) yet return early when the server stops.
  // Returns false when stopping.
  bool pause(long long ms);
  // Waits while holdWork is on; false when stopping.
  bool awaitWork();
  // Handlers call this first: httplib reads a body only after the request passed the
  // interception that logged it, so the log learns the body here.
  void noteBody(const httplib::Request& req);

 private:
  bool intercept(const httplib::Request& req, httplib::Response& res);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool hanging_ = false;
  bool holding_ = false;
  int failCount_ = 0;
  int failStatus_ = 500;
  std::string failBody_;
  int garbleCount_ = 0;
  std::vector<RecordedRequest> log_;
};

}  // namespace tessera::engines::testing
