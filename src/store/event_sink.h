#pragma once
// The port the control plane's event history goes to, apart from its documents (StateStore).
// Events are best effort: the control plane appends one only after the documents it describes
// were committed, and a sink that cannot store it does not fail the operation (the plane
// counts the error, keeps the event in memory and logs it). Two adapters:
//  - SqliteEventSink: the events table of a store::Store, one transaction per event, written
//    after the documents' own transaction;
//  - MemoryEventSink: keeps nothing (only numbers the events), for the Kubernetes backend: the
//    API server has no append-only log, and Kubernetes Events are themselves best effort,
//    rate-limited and expire after an hour, so they would add writes for a history that is
//    no more durable than the control plane's memory and its log.
//
// Seqs: append() stores an event at a seq of at least `minSeq` and above every seq it gave
// before, and returns that seq; the caller passes the next seq it would give itself, so the
// seqs it hands out when the sink fails stay unique. A seq is never reused, not even after
// compaction.
//
// Threading: every adapter is safe to call from several threads (the control plane appends
// with its own locks released).

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "store/state_store.h"

namespace tessera::store {

class Store;

// What a sink kept, for a restart.
struct EventHistory {
  std::vector<Event> events;  // the newest retained events (at most the limit), ascending seq
  std::int64_t lastSeq = 0;   // the highest seq the sink ever gave; 0 when none
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Stores one event (kind and JSON text as Batch::appendEvent takes them) at `timeMs`;
  // returns its seq. kInternal when it could not be stored.
  virtual Result<std::int64_t> append(std::string_view kind, std::string_view json, Millis timeMs,
                                      std::int64_t minSeq) = 0;
  // The newest `limit` retained events and the last seq.
  virtual Result<EventHistory> recent(std::size_t limit) const = 0;
  // Drops retained events before `seq`; returns how many (a sink that keeps none: 0).
  virtual Result<std::int64_t> compactBefore(std::int64_t seq) = 0;
  // Where the events live, for messages.
  virtual std::string describe() const = 0;
};

// The events table of a SQLite store (borrowed: it must outlive the sink).
class SqliteEventSink final : public EventSink {
 public:
  explicit SqliteEventSink(Store& store) : store_(store) {}
  Result<std::int64_t> append(std::string_view kind, std::string_view json, Millis timeMs,
                              std::int64_t minSeq) override;
  Result<EventHistory> recent(std::size_t limit) const override;
  Result<std::int64_t> compactBefore(std::int64_t seq) override;
  std::string describe() const override;

 private:
  Store& store_;
};

// Numbers events and keeps none. `firstSeq`: the first seq it gives (the Kubernetes backend
// starts at the Unix time in microseconds, so that a new leader's seqs follow its
// predecessor's).
class MemoryEventSink final : public EventSink {
 public:
  explicit MemoryEventSink(std::int64_t firstSeq = 1) : next_(firstSeq < 1 ? 1 : firstSeq) {}
  // A sink whose seqs start at the Unix time in microseconds now.
  static std::int64_t unixMicrosNow();
  Result<std::int64_t> append(std::string_view kind, std::string_view json, Millis timeMs,
                              std::int64_t minSeq) override;
  Result<EventHistory> recent(std::size_t limit) const override;
  Result<std::int64_t> compactBefore(std::int64_t) override { return 0; }
  std::string describe() const override { return "memory"; }

 private:
  mutable std::mutex mu_;
  std::int64_t next_;
};

}  // namespace tessera::store
