#pragma once
// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics, so that
// several `tessera serve` replicas run and exactly one of them binds.
//
// One attempt (tryAcquireOrRenew), as client-go's leaderelection does it:
//   1. the leader renews from what it last read: a PUT of the Lease with renewTime = now and
//      the resourceVersion it last saw (no GET); on any failure it falls through to 2;
//   2. GET the Lease; 404: create it holding it (POST; 409 AlreadyExists: someone was faster);
//   3. when the spec differs from the one last seen, note the change at now on *this*
//      process's monotonic clock (observedTime);
//   4. another holder whose lease has not expired (observedTime + leaseDurationSeconds > now)
//      keeps it: not leader;
//   5. PUT holder = self, renewTime = now, with the resourceVersion just read; acquireTime and
//      leaseTransitions kept when the holder was already self, else acquireTime = now and
//      leaseTransitions + 1. 409 Conflict: another candidate wrote first.
// Expiry is judged on the candidate's own monotonic clock from the last change it observed;
// renewTime is never compared with local time, so clock offsets between nodes do not matter
// (a clock running at a different *rate* does). There is no fencing: the gate against two
// leaders is that a leader stops acting once it has not renewed for renewDeadline, which is
// shorter than the leaseDuration a standby waits.
//
// run() loops: acquire (every retryPeriod, jittered up to 1.2 × more), then renew every
// retryPeriod; when no renewal succeeded for renewDeadline the leadership is lost, onStopped
// runs and run() returns (kube-scheduler then exits 1). release() hands the lease back
// (holder "", leaseDurationSeconds 1) so a standby takes over at its next retry; only call it
// once the work the lease guards has stopped (on SIGTERM).
//
// Threading: run() on one thread; isLeader(), identity() and stop() from any thread;
// tryAcquireOrRenew() and release() are not to be called while run() runs (they share the
// client and the observed record).

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "k8s/kube_client.h"

namespace tessera::k8s {

struct LeaderElectionConfig {
  std::string ns = "tessera-system";
  std::string name = "tessera-control-plane";
  std::string identity;  // empty: defaultLeaderIdentity()
  // kube-scheduler's defaults (component-base): 15 s / 10 s / 2 s.
  Millis leaseDurationMs = 15000;
  Millis renewDeadlineMs = 10000;
  Millis retryPeriodMs = 2000;
};

// leaseDuration > renewDeadline > 1.2 × retryPeriod, each > 0, names given; the error names
// the setting that is off.
Result<void> validate(const LeaderElectionConfig& config);

// $POD_NAME (else the host name) + "_" + 16 random hex digits: unique per process, so a
// restarted pod never mistakes its predecessor's lease for its own.
std::string defaultLeaderIdentity();

// The client's per-request timeout client-go uses for election calls: max(1 s, renewDeadline
// / 2), so one hung request cannot use up the renew deadline.
int leaderElectionTimeoutMs(const LeaderElectionConfig& config);

class LeaderElector {
 public:
  struct Callbacks {
    std::function<void()> onStartedLeading;  // once, when the lease is first held
    std::function<void()> onStoppedLeading;  // once, when run() ends after leading
    std::function<void(const std::string& holder)> onNewLeader;  // a different holder seen
  };

  // `client` and `clock` (monotonic) are borrowed and must outlive the elector. Fails on an
  // invalid config.
  static Result<std::unique_ptr<LeaderElector>> create(KubeClient& client,
                                                       LeaderElectionConfig config,
                                                       const Clock& clock);

  // One attempt; true when this process holds the lease after it. An error only for an
  // answer that is neither success nor a conflict (transport failure, 5xx, 403, ...).
  Result<bool> tryAcquireOrRenew();

  // Hands the lease back when held (holder "", leaseDurationSeconds 1). No-op otherwise.
  Result<void> release();

  // Acquire, then renew until the lease is lost or stop() is called; returns then. With a
  // stop while leading, the lease is released when `releaseOnStop` (the work must be done).
  void run(const Callbacks& callbacks, bool releaseOnStop = true);
  void stop();

  // The gate in front of every mutating call: this process holds the lease and renewed it
  // less than renewDeadline ago on the monotonic clock.
  bool isLeader() const;
  // The holder last seen on the Lease ("" when none or not read yet).
  std::string observedHolder() const;
  const std::string& identity() const { return config_.identity; }
  const LeaderElectionConfig& config() const { return config_; }

 private:
  LeaderElector(KubeClient& client, LeaderElectionConfig config, const Clock& clock);
  std::string leasePath(bool collection) const;
  std::string leaseName() const;  // "namespace/name", for messages
  Result<std::optional<nlohmann::json>> get();
  nlohmann::json record(const nlohmann::json* previous, bool releasing) const;
  Result<std::optional<nlohmann::json>> put(const nlohmann::json& lease);
  void observe(const nlohmann::json& lease);
  bool sleepFor(Millis ms);  // false when stopped

  KubeClient& client_;
  LeaderElectionConfig config_;
  const Clock& clock_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::optional<nlohmann::json> observed_;  // the whole Lease object last read or written
  std::string observedSpec_;                // its spec, serialised, for change detection
  Millis observedAtMs_ = 0;                 // when it last changed, monotonic
  std::optional<Millis> renewedAtMs_;       // last successful acquire or renew, monotonic
};

}  // namespace tessera::k8s
