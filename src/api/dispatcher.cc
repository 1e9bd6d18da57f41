#include "api/dispatcher.h"

namespace tessera::api {

Dispatcher::Dispatcher(ControlPlane& plane, Leadership leadership)
    : leadership_(std::move(leadership)), plane_(&plane) {
  install(plane);
}

std::optional<NotLeader> Dispatcher::refusal() const {
  if (!leadership_.leader || leadership_.leader()) return std::nullopt;
  const std::string holder = leadership_.leaderName ? leadership_.leaderName() : "";
  return NotLeader{"this replica is a standby" + (holder.empty() ? std::string(" (no leader yet)")
                                                                 : "; the leader is " + holder)};
}

void Dispatcher::replacePlane(ControlPlane& plane) {
  install(plane);
  std::lock_guard writer(writer_);
  std::lock_guard state(state_);
  plane_.store(&plane);
}

void Dispatcher::install(ControlPlane& plane) {
  plane.setStoreIo([seat = seat_](const std::function<void()>& io) {
    std::unique_lock<std::mutex>* held =
        seat->thread.load() == std::this_thread::get_id() ? seat->held : nullptr;
    if (held == nullptr || !held->owns_lock()) {
      io();
      return;
    }
    held->unlock();
    io();
    held->lock();
  });
}

}  // namespace tessera::api
