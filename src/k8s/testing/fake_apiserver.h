#pragma once
// A Kubernetes API server for tests, on loopback HTTP: enough of the real protocol that a
// client which works against it behaves the same against kube-apiserver.
//
//  - One store for every resource with a global resourceVersion counter: every write takes
//    the next value and the object carries it in metadata.resourceVersion (decimal text).
//  - Resources: core `pods` (namespaced, status and binding subresources: a Binding sets
//    spec.nodeName once, 409 when the pod is already assigned or its UID differs; each one is
//    logged with its User-Agent and the Leases' holders, see bindLog()), core
//    `configmaps` and `events` (namespaced), core `nodes` (cluster-wide),
//    `modeldeployments` of tessera.io/v1alpha1 (namespaced, status subresource) and `leases`
//    of coordination.k8s.io/v1 (namespaced), `resourceslices` and `deviceclasses`
//    (cluster-wide) and `resourceclaims` (namespaced, status subresource) of
//    resource.k8s.io/v1, under the usual paths
//    (/api/v1/namespaces/{ns}/pods/{name}[/status], /api/v1/pods,
//    /apis/tessera.io/v1alpha1/namespaces/{ns}/modeldeployments/{name}/status,
//    /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}, ...).
//  - GET collection: a List with metadata.resourceVersion; `limit` and `continue` page it
//    from a snapshot taken at the first page (an expired snapshot answers 410 Expired);
//    `labelSelector` (k=v, k!=v, k, !k, comma = and) and `fieldSelector` (dotted path =/!=).
//  - GET collection with watch=1: a chunked stream of newline-delimited events {type,
//    object}, from the given resourceVersion (events after it, in order), or with none given
//    the current objects as ADDED first. A resourceVersion older than the retained event
//    window (see compact()) gets one ERROR event carrying a 410 Expired Status, as
//    kube-apiserver does. BOOKMARK events when allowWatchBookmarks=true and a bookmark is
//    asked for (sendBookmarks()). timeoutSeconds ends the stream.
//  - POST create: 201, 409 AlreadyExists; generateName; uid, creationTimestamp, generation 1.
//  - PUT: metadata.resourceVersion, when given, must be the stored one, else 409 Conflict.
//    On the main resource the stored status is kept and a changed spec bumps
//    metadata.generation; on /status only the status is taken.
//  - DELETE: 200 with the object, a DELETED event; DeleteOptions.preconditions.resourceVersion
//    is checked (409). No garbage collector, no kubelet.
//
// Test hooks change the store directly (as another client would), end open watches, compact
// the event log, and run a callback before a status write (a concurrent writer).
//
// Threading: every method may be called from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace httplib {
class Server;
}

namespace tessera::k8s::testing {

class FakeApiServer {
 public:
  FakeApiServer();
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // Listens on 127.0.0.1 (any free port, or `port`: a server started again after stop());
  // returns the port.
  Result<int> start(int port = 0);
  void stop();
  std::string url() const;  // "http://127.0.0.1:PORT"

  // ---- the store, directly. `resource` is "pods", "nodes", "configmaps", "modeldeployments",
  // "leases", "events", "resourceslices", "deviceclasses" or "resourceclaims".
  // As a POST / PUT (main resource) / DELETE would; errors carry the HTTP status in the
  // message ("409 ...").
  Result<nlohmann::json> create(const std::string& resource, nlohmann::json object);
  Result<nlohmann::json> update(const std::string& resource, nlohmann::json object);
  Result<nlohmann::json> updateStatus(const std::string& resource, nlohmann::json object);
  Result<nlohmann::json> remove(const std::string& resource, const std::string& ns,
                                const std::string& name);
  std::optional<nlohmann::json> get(const std::string& resource, const std::string& ns,
                                    const std::string& name) const;
  std::vector<nlohmann::json> list(const std::string& resource) const;
  std::int64_t resourceVersion() const;

  // ---- hooks
  // Drops every retained event: a watch from an older resourceVersion gets 410 Gone.
  void compact();
  // Ends every open watch stream (as an API server restart or a load balancer would).
  void closeWatches();
  // A network partition for watches: open ones end and new ones wait until resumed.
  void pauseWatches();
  void resumeWatches();
  // Sends a BOOKMARK with the current resourceVersion on every watch that allows them.
  void sendBookmarks();
  // A partition for writes: every POST, PUT and PATCH over HTTP is first shown to `rule`
  // (resource, body; for a PATCH the patch), without the server's lock held, so the rule may
  // change objects as another client would; a non-zero answer is the HTTP status it gets
  // instead (503: the server refuses), nothing stored. An empty rule lets every write through.
  void refuseWrites(std::function<int(const std::string& resource, const nlohmann::json& body)> rule);
  // Called (without the lock) before the next status PUT on `resource` is applied.
  void beforeNextStatusPut(std::function<void()> fn);

  // ---- counters
  int lists(const std::string& resource) const;    // LIST requests (first pages)
  int watches(const std::string& resource) const;  // WATCH requests
  int conflicts() const;                           // 409 Conflict answers to PUTs
  int bindings() const;                            // pods/binding POSTs that bound a pod
  // Every Binding that bound a pod, in order: who posted it (User-Agent) and who held each
  // Lease at that moment ("namespace/name" → spec.holderIdentity).
  struct BindRecord {
    std::string pod, node, userAgent;
    std::map<std::string, std::string> leaseHolders;
    std::chrono::steady_clock::time_point at;
  };
  std::vector<BindRecord> bindLog() const;
  int openWatches() const;

 private:
  struct Event {
    std::int64_t rv;
    std::string resource, type;
    nlohmann::json object;
  };
  struct Snapshot {
    std::int64_t rv;
    std::vector<nlohmann::json> items;
  };
  Result<nlohmann::json> createLocked(const std::string& resource, nlohmann::json object);
  Result<nlohmann::json> updateLocked(const std::string& resource, nlohmann::json object,
                                      bool status);
  Result<nlohmann::json> removeLocked(const std::string& resource, const std::string& ns,
                                      const std::string& name);
  void record(const std::string& resource, const std::string& type, const nlohmann::json& obj);
  void routes();
  int refusal(const std::string& resource, const nlohmann::json& body) const;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::int64_t rv_ = 1;
  std::int64_t oldestRetained_ = 1;  // events with rv >= this are kept
  std::uint64_t uidCounter_ = 0;
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;  // resource → key
  std::deque<Event> events_;
  std::map<std::string, Snapshot> snapshots_;  // continue token → snapshot
  std::uint64_t closeGeneration_ = 0;
  std::uint64_t bookmarkGeneration_ = 0;
  std::map<std::string, std::function<void()>> beforeStatusPut_;
  std::function<int(const std::string&, const nlohmann::json&)> refuse_;
  std::map<std::string, int> lists_, watches_;
  int conflicts_ = 0;
  int bindings_ = 0;
  std::vector<BindRecord> bindLog_;
  int openWatches_ = 0;
  bool stopping_ = false;
  bool paused_ = false;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tessera::k8s::testing
