#pragma once
// The one owner of access to a ControlPlane from several threads (the HTTP workers, the upkeep
// tick, the ModelDeployment controller): every read and every mutating call goes through here.
//
// Two locks, always taken in this order:
//  - the writer lock serialises mutating calls end to end: one write at a time, from its first
//    apply to its last confirm or forget. Store writes therefore reach the store in the order
//    their changes were applied, and a write whose store I/O failed has been taken back in
//    memory before the next writer applies anything;
//  - the state lock guards the plane's memory. Readers (GET routes, /metrics, explain, the
//    extender's filter, prioritize and preempt) hold it alone; a writer holds it to assume
//    (apply its change to the books) and to confirm or forget, and lets go of it around its
//    store I/O (an SQLite fsync, a Kubernetes API call) through the plane's store-I/O hook
//    (ControlPlane::setStoreIo), so reads are answered while a write is being persisted.
//    They see the change as assumed, as kube-scheduler's filter sees an assumed pod.
//
// The write order of every mutating operation, kube-scheduler's cache discipline: assume (in
// memory, under both locks), persist (store I/O, writer lock only), then confirm, or forget
// (undo the assumed change, under both locks again) when the store refused.
//
// The extender's bind and the claim webhook's booking (writeAround) differ in one way: their
// network I/O (the pod read, the booking's write onto the pod, the v1.Binding POST: up to a few
// seconds each against a slow API server) runs with BOTH locks released, so heartbeats and other
// writers are not held up behind it. Their assumed booking is visible to the writers that run
// meanwhile (a conservative view: its GPUs look taken), and their settle step, back under both
// locks, tolerates whatever ran in between (the replica or its node may be gone; a removal that
// reached the store before the booking's write is caught there and the booking forgotten again).
//
// The leadership gate: when a leader check is configured and says no, no mutating call runs
// (write and writeAround answer NotLeader without taking a lock). Reads are served on a standby.
//
// Lock order: writer lock, state lock, then a store's or a client's own; never the other way.
// Neither lock is re-entrant: a callback must not call back into the dispatcher.

#include <atomic>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "api/control_plane.h"
#include "k8s/extender.h"

namespace tessera::api {

// A mutating call refused by the leadership gate; `message` says who leads, when known.
struct NotLeader {
  std::string message;
};

class Dispatcher {
 public:
  struct Leadership {
    std::function<bool()> leader;  // empty: always the leader (no election)
    std::function<std::string()> leaderName;
  };

  explicit Dispatcher(ControlPlane& plane, Leadership leadership = {});
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Why a mutating call would be refused now, or nullopt when this replica leads.
  std::optional<NotLeader> refusal() const;

  // Runs `fn(plane)` under the state lock only. For calls that change nothing the store keeps
  // (the extender's filter and prioritize update their own caches, under this same lock).
  template <typename Fn>
  auto read(Fn&& fn) {
    std::lock_guard lock(state_);
    return fn(*plane_.load());
  }

  // Runs the mutating `fn(plane)` behind the leadership gate, on the writer lock, holding the
  // state lock except while the plane does store I/O.
  template <typename Fn>
  auto write(Fn&& fn) -> std::expected<std::invoke_result_t<Fn, ControlPlane&>, NotLeader> {
    using R = std::invoke_result_t<Fn, ControlPlane&>;
    if (auto refused = refusal()) return std::unexpected(std::move(*refused));
    std::lock_guard writer(writer_);
    std::unique_lock state(state_);
    WriterScope scope(*this, state);
    if constexpr (std::is_void_v<R>) {
      fn(*plane_.load());
      return {};
    } else {
      return std::expected<R, NotLeader>(std::in_place, fn(*plane_.load()));
    }
  }

  // As write, but `fn(plane, outside)` gets an OutsideLock that runs network I/O with both
  // locks released (the extender's bind, the claim webhook's booking).
  template <typename Fn>
  auto writeAround(Fn&& fn)
      -> std::expected<std::invoke_result_t<Fn, ControlPlane&, const k8s::OutsideLock&>,
                       NotLeader> {
    if (auto refused = refusal()) return std::unexpected(std::move(*refused));
    std::unique_lock writer(writer_);
    std::unique_lock state(state_);
    WriterScope scope(*this, state);
    ControlPlane& plane = *plane_.load();  // the plane the call started on, also after the I/O
    const k8s::OutsideLock outside = [&](const std::function<void()>& io) {
      scope.leave();
      state.unlock();
      writer.unlock();
      io();
      writer.lock();
      state.lock();
      scope.enter(state);
    };
    using R = std::invoke_result_t<Fn, ControlPlane&, const k8s::OutsideLock&>;
    return std::expected<R, NotLeader>(std::in_place, fn(plane, outside));
  }

  // Serves `plane` from now on (a new leader's, rebuilt from the store), once no call is in
  // flight; the caller keeps the previous one alive (a bind settles on the plane it started
  // on, and the request logger may still count into it).
  void replacePlane(ControlPlane& plane);

  // The plane now served, for its thread-safe instruments only (metrics families).
  ControlPlane& current() const { return *plane_.load(); }

 private:
  // Which thread is the writer now, and its lock on state_: shared with the store-I/O hook
  // of every plane served (a plane may outlive the dispatcher; its hook then runs in place).
  struct WriterSeat {
    std::atomic<std::thread::id> thread;
    std::unique_lock<std::mutex>* held = nullptr;  // read and written by that thread only
  };
  // Marks the calling thread as the writer holding `state` while it lives.
  class WriterScope {
   public:
    WriterScope(Dispatcher& d, std::unique_lock<std::mutex>& state) : seat_(*d.seat_) {
      enter(state);
    }
    ~WriterScope() { leave(); }
    void enter(std::unique_lock<std::mutex>& state) {
      seat_.held = &state;
      seat_.thread.store(std::this_thread::get_id());
    }
    void leave() {
      seat_.thread.store(std::thread::id());
      seat_.held = nullptr;
    }

   private:
    WriterSeat& seat_;
  };

  // Gives `plane` the store-I/O hook: it releases the state lock around `io` when the calling
  // thread is the writer holding it, and runs `io` in place otherwise.
  void install(ControlPlane& plane);

  Leadership leadership_;
  std::atomic<ControlPlane*> plane_;
  std::mutex writer_;  // before state_
  std::mutex state_;
  std::shared_ptr<WriterSeat> seat_ = std::make_shared<WriterSeat>();
};

}  // namespace tessera::api
