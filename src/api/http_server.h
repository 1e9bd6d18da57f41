#pragma once
// The HTTP face of the control plane: the JSON API under /api/v1 (docs/api.md), the
// kube-scheduler extender under /scheduler, /metrics, /healthz and /readyz, and the web
// dashboard at / (api/ui.h).
//
//  - Every answer is JSON (but /metrics and the probes). An error is
//    {"error": {"code": "...", "message": "..."}} with a 4xx for bad input (400 malformed,
//    401 no or wrong token, 404 unknown object, 409 conflict or does not fit, 413 body too
//    large, 415 not JSON) and changes nothing.
//  - Mutating /api/v1 calls (POST, PUT, DELETE) need `Authorization: Bearer <token>` when a
//    token is configured. The extender endpoints do not (kube-scheduler sends no bearer
//    token): protect them with TLS and network policy.
//  - Every handler reaches the control plane through one api::Dispatcher (api/dispatcher.h):
//    reads (GET routes, /metrics, explain, the extender's filter, prioritize and preempt) under
//    its state lock alone; mutating calls behind its leadership gate, one at a time on its
//    writer lock, each assumed in memory, persisted with the state lock released (so reads are
//    answered during an fsync or a Kubernetes API call), then confirmed or forgotten. bind and
//    the claim webhook's booking run their network I/O with both locks released.
//  - With a certificate and key the server speaks TLS only.
//  - POST /admission/resourceclaims is the claim webhook, answered only by the leader (a
//    standby answers 503 not_leader; the webhook's failurePolicy Fail makes the API server
//    refuse the claim, which kube-controller-manager creates again).
//
// Threading: start() returns once the socket is bound and serving on a background thread;
// stop() finishes in-flight requests and joins it.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/control_plane.h"
#include "api/dispatcher.h"
#include "api/log.h"
#include "common/result.h"
#include "k8s/claim_admission.h"

namespace httplib {
class Server;
}

namespace tessera::api {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (tests)
  std::optional<std::string> token;  // bearer token for mutating calls; none = open
  std::size_t maxBodyBytes = 8u << 20;
  int threads = 8;
  std::string tlsCertFile, tlsKeyFile;  // both or neither
  // Requests answered with a 4xx or 5xx, and every mutating call, are logged here.
  Logger* logger = nullptr;
  bool demo = false;  // the dashboard at / says it shows a demo (`tessera serve --demo`)
  // Leader election: when set and false, mutating calls under /api/ and the extender's verbs
  // are answered 503 not_leader (the replica is a standby); reads are served. leaderName
  // names the holder in that answer.
  std::function<bool()> leader;
  std::function<std::string()> leaderName;
  // The claim webhook (POST /admission/resourceclaims, k8s/claim_admission.h), borrowed; when
  // null every review is allowed unmodified with `admissionOff` as the warning (the control
  // plane is not in GPU mode dra, or has no Kubernetes API).
  k8s::ClaimAdmission* admission = nullptr;
  std::string admissionOff = "tessera serve pins no claims: it runs without GPU mode dra";
};

class HttpServer {
 public:
  HttpServer(ControlPlane& plane, ServerConfig config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving; returns the bound port.
  Result<int> start();
  void stop();
  bool ready() const { return ready_.load(); }
  void setReady(bool ready) { ready_.store(ready); }
  // Serves `plane` from now on (a new leader's, rebuilt from the store), through the
  // dispatcher; the caller keeps the previous one alive until the server stops (a request may
  // still be reading it).
  void replacePlane(ControlPlane& plane) { dispatcher_.replacePlane(plane); }
  // Runs the mutating `fn` through the dispatcher's write path (for the server's own timers and
  // the ModelDeployment controller): behind the leadership gate, on the writer lock. Returns
  // false, without running `fn`, on a standby.
  template <typename Fn>
  bool withPlane(Fn&& fn) {
    return dispatcher_.write([&](ControlPlane& p) { fn(p); }).has_value();
  }
  Dispatcher& dispatcher() { return dispatcher_; }

 private:
  void routes();

  ServerConfig config_;
  Dispatcher dispatcher_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> ready_{false};
  // Every route's method and path pattern: a path served for other methods answers 405 with
  // Allow (httplib answers 404). Filled by routes(), before the server listens.
  std::vector<std::pair<std::string, std::regex>> routeTable_;
};

}  // namespace tessera::api
