#include "store/event_sink.h"

#include <algorithm>
#include <chrono>

#include "store/store.h"

namespace tessera::store {

Result<std::int64_t> SqliteEventSink::append(std::string_view kind, std::string_view json,
                                             Millis timeMs, std::int64_t minSeq) {
  return store_.appendEvent(kind, json, timeMs, minSeq);
}

Result<EventHistory> SqliteEventSink::recent(std::size_t limit) const {
  auto snapshot = store_.loadEvents();
  if (!snapshot) return fail(snapshot.error());
  EventHistory out;
  out.lastSeq = snapshot->lastEventSeq;
  const std::size_t skip = snapshot->events.size() > limit ? snapshot->events.size() - limit : 0;
  out.events.assign(std::make_move_iterator(snapshot->events.begin() + static_cast<long>(skip)),
                    std::make_move_iterator(snapshot->events.end()));
  return out;
}

Result<std::int64_t> SqliteEventSink::compactBefore(std::int64_t seq) {
  return store_.compactEventsBefore(seq);
}

std::string SqliteEventSink::describe() const {
  return store_.describe();
}

std::int64_t MemoryEventSink::unixMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<std::int64_t> MemoryEventSink::append(std::string_view, std::string_view, Millis,
                                             std::int64_t minSeq) {
  std::lock_guard lock(mu_);
  const std::int64_t seq = std::max(next_, minSeq);
  next_ = seq + 1;
  return seq;
}

Result<EventHistory> MemoryEventSink::recent(std::size_t) const {
  std::lock_guard lock(mu_);
  return EventHistory{{}, next_ - 1};
}

}  // namespace tessera::store
