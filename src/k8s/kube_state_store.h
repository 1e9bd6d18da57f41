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
// Versions and preconditions (the port's contract, store/state_store.h): a ConfigMap's version
// is its resourceVersion, and a precondition is the API server's own (a create is a POST, a
// version to match rides on the PUT or on the DELETE's preconditions), so a conflict is the
// API server's 409. An unconditional ConfigMap write still carries the resourceVersion this
// store last loaded or wrote: a write from a replica that has not seen the latest one (a
// deposed leader) gets 409 and is reported as a conflict (kFailedPrecondition). A booking on a
// pod is a merge patch without a resourceVersion (kubelet changes pods all the time), and its
// version is a hash of the booking itself: a precondition on it is checked on a read of the
// pod just before the patch (only the leader writes bookings and posts Bindings). get() and
// list() read the API server and leave the versions that unconditional writes carry alone.
//
// Several documents at once: the API server has no transaction across objects, so
// store::writeAll (store/write_set.h) writes them one object at a time and undoes the earlier
// ones on a failure; this adapter has no atomic path.
//
// Events are not stored here: the control plane's history goes to a store::MemoryEventSink
// (store/event_sink.h), and lives in the control plane's memory and its log only.
//
// Threading: calls are serialised on an internal mutex; the client is borrowed and must
// outlive the store.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "store/state_store.h"

namespace tessera::k8s {

class KubeClient;
struct KubeResponse;

inline constexpr std::string_view kBookingAnnotation = "tessera.io/booking";
inline constexpr std::string_view kBookedLabel = "tessera.io/booked";
inline constexpr std::string_view kStateKindLabel = "tessera.io/state-kind";

class KubeStateStore final : public store::StateStore {
 public:
  // `ns`: the namespace of the ConfigMaps (the control plane's own). Checks nothing remote:
  // the first loadAll() reports an unreachable or forbidding API server.
  KubeStateStore(KubeClient& client, std::string ns);

  Result<store::Version> put(std::string_view kind, std::string_view name, std::string_view json,
                             const store::Precondition& pre = {}) override;
  Result<void> remove(std::string_view kind, std::string_view name,
                      const store::Precondition& pre = {}) override;
  Result<std::optional<store::Document>> get(std::string_view kind,
                                             std::string_view name) const override;
  Result<std::vector<store::Document>> list(std::string_view kind) const override;
  Result<store::Snapshot> loadAll() const override;
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
  struct Read {
    store::Document doc;
    Placed placed;
  };
  // The stored ConfigMaps matching `selector` (a label selector, URL-encoded).
  Result<std::vector<Read>> readConfigMaps(const std::string& selector) const;
  // The bookings of the pods that are bound (or pinned by a claim); `clearUnbound` clears
  // the others' (best effort).
  Result<std::vector<Read>> readBookings(bool clearUnbound) const;
  // The booking on pod ns/name: nullopt when the pod holds none or is gone. `podVersion`, when
  // given, gets the pod's resourceVersion (empty when it is gone).
  Result<std::optional<std::string>> podBooking(const std::string& ns, const std::string& name,
                                                std::string* podVersion = nullptr) const;
  // Checks a precondition on a pod's booking against the pod as it is now; `podVersion` gets
  // the resourceVersion of the pod it checked (empty: nothing checked, or the pod is gone).
  Result<void> checkBooking(const std::string& ns, const std::string& name,
                            const store::Precondition& pre, std::string* podVersion) const;
  // Merges `patch` into pod ns/name where its booking meets `pre` when the write lands: the
  // patch carries the resourceVersion the check read, so a change in between is a 409, and
  // one that left the booking as it was (kubelet moves the version with every status update)
  // is checked and written again. Under a precondition, a pod that is gone (or read without a
  // resourceVersion) is not written, and one deleted before the write is a conflict; without
  // one, the patch is sent as it is. The API server's answer to the write.
  Result<KubeResponse> patchBooking(const std::string& ns, const std::string& name,
                                    nlohmann::json patch, const store::Precondition& pre,
                                    const std::string& what);

  KubeClient& client_;
  std::string ns_;
  mutable std::mutex mu_;
  mutable std::map<Key, Placed> seen_;  // what this store last loaded or wrote
};

}  // namespace tessera::k8s
