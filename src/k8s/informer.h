#pragma once
// An informer: a local copy of one kind of Kubernetes object, kept current by the API
// server's list/watch protocol, with a handler called for every change.
//
// The protocol (as client-go's reflector follows it):
//  1. LIST the collection in pages (`limit`, `continue`); the list's metadata.resourceVersion
//     is the point the copy is consistent at. The copy is replaced by the list; objects that
//     disappeared are reported deleted, changed ones modified, new ones added.
//  2. WATCH from that resourceVersion (`watch=1&resourceVersion=RV&allowWatchBookmarks=true&
//     timeoutSeconds=T`): a chunked response of newline-delimited JSON events
//     {type: ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, object}. Every event, bookmarks
//     included, moves the resourceVersion forward; a BOOKMARK carries nothing else.
//  3. When the watch ends (the server's timeout, a closed connection), watch again from the
//     last resourceVersion seen: nothing is missed and nothing relisted.
//  4. An ERROR event with a 410 Status (Gone / Expired: the server no longer holds events
//     that old), an HTTP 410, or an expired `continue` means the resourceVersion is lost:
//     relist (step 1).
//  5. A transport failure or another error status: wait (exponential backoff with jitter,
//     reset once a list or watch succeeds), then go on where it stood.
//
// Keys are "namespace/name" (just "name" for cluster-wide kinds). The handler runs on the
// informer's thread after the copy was updated, and must not call stop().
//
// Threading: start() runs the loop on its own thread; stop() (or the destructor) ends it
// promptly, also mid-watch. get(), list(), hasSynced() and stats() may be called from any
// thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "k8s/kube_client.h"

namespace tessera::k8s {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  nlohmann::json object;
};

// One line of a watch stream. Unknown types and malformed lines are errors.
Result<WatchEvent> parseWatchEvent(std::string_view line);

// metadata.<key> of an object when it is a string, else "".
std::string metadataText(const nlohmann::json& object, const char* key);
// "namespace/name", or "name" without a namespace.
std::string objectKey(const nlohmann::json& object);
std::string resourceVersionOf(const nlohmann::json& object);

struct InformerOptions {
  // The collection: "/api/v1/pods", "/api/v1/nodes",
  // "/apis/tessera.io/v1alpha1/modeldeployments".
  std::string path;
  std::string labelSelector, fieldSelector;
  int pageSize = 500;
  int watchTimeoutSeconds = 300;  // the server ends each watch after about this long
  int backoffInitialMs = 200;
  int backoffMaxMs = 30'000;
  std::uint64_t jitterSeed = 0;  // 0: seeded from the clock
  // Told when the collection stops answering (the first failed LIST or WATCH after one that
  // worked, or the very first attempt) and when it answers again, with what happened; not
  // at every retry, so a caller can log each without flooding. Called on the informer's thread.
  std::function<void(bool answering, const std::string& what)> onHealth;
};

class Informer {
 public:
  enum class Change { kAdded, kModified, kDeleted };
  // `old` is the previous copy for kModified and kDeleted, else nullptr.
  using Handler =
      std::function<void(Change change, const nlohmann::json& object, const nlohmann::json* old)>;

  struct Stats {
    int lists = 0;      // complete LISTs (relists included)
    int watches = 0;    // WATCH requests opened
    int relists = 0;    // LISTs after a 410
    int failures = 0;   // transport failures and error statuses
    int bookmarks = 0;  // BOOKMARK events
  };

  // `client` is borrowed and must outlive the informer.
  Informer(KubeClient& client, InformerOptions options, Handler handler);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void start();
  void stop();

  bool hasSynced() const { return synced_.load(); }
  std::optional<nlohmann::json> get(const std::string& key) const;
  std::vector<nlohmann::json> list() const;
  std::string resourceVersion() const;
  Stats stats() const;

 private:
  void run();
  // LIST every page and replace the copy. An error with code kFailedPrecondition means 410.
  Result<void> relist();
  // One WATCH until it ends. Returns true when the resourceVersion is gone (relist).
  Result<bool> watchOnce();
  void apply(WatchEventType type, const nlohmann::json& object);
  void sleepBackoff();
  std::string query(bool watch) const;
  // The collection's health as onHealth hears of it.
  void failed(const Error& e);
  void answered();

  KubeClient& client_;
  InformerOptions options_;
  Handler handler_;

  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> items_;
  std::string rv_;
  Stats stats_;
  std::atomic<bool> synced_{false};

  std::mutex stopMu_;
  std::condition_variable stopCv_;
  bool stopping_ = false;
  StreamStopper stopper_;
  int backoffMs_ = 0;
  bool answering_ = true;  // as last reported (the informer's thread only)
  int failedInARow_ = 0;   // since it last answered
  std::uint64_t rng_ = 0;
  std::thread thread_;
};

}  // namespace tessera::k8s
