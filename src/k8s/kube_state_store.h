#pragma once
// The control plane's state in the Kubernetes API server (store::StateStore's in-cluster
// adapter; docs/kubernetes.md, "State in the API server"). Nothing is kept on a local disk: a
// new or restarted leader reads everything back from the API server.
//
// Where each document lives:
//  - the booking of a pod that the extender bound (a "replica" document carrying
//    `pod: {namespace, name}`) is on the pod itself: annotation `tessera.io/booking` (the
//    document's JSON) and label `tessera.io/booked=true` (so the bookings are one labelled
//    LIST). It is written before the pod's v1.Binding is posted; the Binding is the commit
//    point. loadAll() keeps the bookings of pods that have a node (spec.nodeName), terminating
//    ones included since they still hold their GPUs, and clears those of pods that never bound
//    (the leader that wrote them died or failed before its Binding landed);
//  - every other document (nodes with their GPU inventory and topology, model profiles,
//    deployments, replicas Tessera placed itself) is one ConfigMap in `namespace`, named
//    `tessera-<kind>-<name as a DNS label>-<hash>`, labelled app.kubernetes.io/managed-by=tessera
//    and tessera.io/state-kind=<kind>, with data {name, document}.
//
// Consistency: the API server has no transaction across objects, so commit() writes a batch one
// object at a time, in batch order. When a write fails, the ones before it are undone (each
// object put back as this store last saw it) and the error names any it could not undo.
// ConfigMap writes carry the resourceVersion this store last saw: a write from a replica that
// has not seen the latest one (a deposed leader) gets 409 and is reported as a conflict
// (kFailedPrecondition). Pod annotations are merge patches without a resourceVersion (kubelet
// changes pods all the time), and only the leader posts Bindings.
//
// Events are not stored: commit() numbers a batch's events (from the Unix time in microseconds
// at open, so a new leader's numbers follow its predecessor's). The control plane puts none in
// its batches: its history goes to a store::MemoryEventSink (store/event_sink.h), which numbers
// the same way, and lives in the control plane's memory and its log only.
//
// Threading: calls are serialised on an internal mutex; the client is borrowed and must
// outlive the store.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/result.h"
#include "store/state_store.h"

namespace tessera::k8s {

class KubeClient;

inline constexpr std::string_view kBookingAnnotation = "tessera.io/booking";
inline constexpr std::string_view kBookedLabel = "tessera.io/booked";
inline constexpr std::string_view kStateKindLabel = "tessera.io/state-kind";

class KubeStateStore final : public store::StateStore {
 public:
  // `ns`: the namespace of the ConfigMaps (the control plane's own). Checks nothing remote:
  // the first loadAll() reports an unreachable or forbidding API server.
  KubeStateStore(KubeClient& client, std::string ns);

  Result<store::CommitResult> commit(const store::Batch& batch) override;
  Result<store::Snapshot> loadAll() const override;
  Result<std::int64_t> compactEventsBefore(std::int64_t seq) override;
  std::string describe() const override;
  bool bookingsOnPods() const override { return true; }

  // Seeds the API server from another store's snapshot (an upgrade from the SQLite file):
  // every document is created (none may exist yet: a conflict means another replica is
  // importing, and is reported as such). A "replica" named "<namespace>/<pod>" becomes that
  // pod's booking when the pod exists and is bound; the booking of a pod that is gone or
  // unbound is skipped. Returns how many documents were imported and skipped.
  struct ImportReport {
    int imported = 0;
    int skipped = 0;
  };
  Result<ImportReport> importSnapshot(const store::Snapshot& from);

  // The ConfigMap name a document of (kind, name) is stored under.
  static std::string configMapName(std::string_view kind, std::string_view name);

 private:
  // Where a document lives, and the version this store last saw of it.
  struct Placed {
    std::string podNs, podName;  // a pod's booking when podName is set, else a ConfigMap
    std::string json;
    std::string resourceVersion;  // ConfigMaps only
  };
  using Key = std::pair<std::string, std::string>;  // (kind, name)
  Result<void> put(const Key& key, const std::string& json, bool mustNotExist);
  Result<void> erase(const Key& key);
  // Puts back `before` (nullopt: the document did not exist) after a failed batch.
  Result<void> undo(const Key& key, const std::optional<Placed>& before);

  KubeClient& client_;
  std::string ns_;
  mutable std::mutex mu_;
  mutable std::map<Key, Placed> seen_;  // what this store last read or wrote
  std::int64_t nextSeq_;
  std::int64_t revision_;
};

}  // namespace tessera::k8s
