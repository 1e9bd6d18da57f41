#pragma once
// The port the control plane keeps its state through. Two adapters implement it:
//  - store::Store: the embedded SQLite database (outside Kubernetes; a batch is one
//    transaction, a batch's events are stored in the same transaction);
//  - k8s::KubeStateStore: the Kubernetes API server (in a cluster; every document is one API
//    object with its own resourceVersion, so a batch is written one object at a time, and a
//    batch's events are numbered, not stored).
// The control plane commits documents only: its event history goes to a store::EventSink
// (store/event_sink.h) after the commit, best effort.
//
// What the control plane may rely on from either:
//  - commit() succeeds only when every write of the batch was stored; on error the port has
//    stored nothing of it (the Kubernetes adapter undoes the writes it made before the one
//    that failed, and names any it could not undo);
//  - kFailedPrecondition means a conflict (another writer changed or created the object first)
//    and nothing else; kInvalidArgument a malformed batch; kInternal anything else (I/O, the
//    API server unreachable);
//  - loadAll() returns the documents as the last successful commit of each left them.
//
// Versions are per document and opaque to the control plane: it only ever asks "must not
// exist yet" (kMustNotExist) or writes unconditionally; the adapters use their own versions to
// refuse a write from a writer that has not seen the latest one (a deposed leader).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace tessera::store {

// A stored document. `revision` is the revision of the commit that last wrote it (>= 1);
// `updatedMs` is the store clock's time at that commit.
struct Document {
  std::string kind;
  std::string name;
  std::string json;
  std::int64_t revision = 0;
  Millis updatedMs = 0;

  bool operator==(const Document&) const = default;
};

// An entry of the event log. `seq` numbers events from 1 in commit order; a seq is never
// reused, not even after compaction removed the events before it.
struct Event {
  std::int64_t seq = 0;
  Millis timeMs = 0;
  std::string kind;
  std::string json;

  bool operator==(const Event&) const = default;
};

// Expected revision meaning "the document must not exist yet" (a create).
inline constexpr std::int64_t kMustNotExist = 0;

// Writes committed together, all or nothing. Kinds and names must be non-empty (kinds: at most
// 64 of [A-Za-z0-9._-]; names: at most 512 bytes of UTF-8, no control characters), every JSON
// text must parse (and be at most 16 MiB), and a (kind, name) may appear at most once per batch;
// otherwise commit() fails with kInvalidArgument and writes nothing.
class Batch {
 public:
  struct Upsert {
    std::string kind;
    std::string name;
    std::string json;
    // nullopt: write unconditionally; kMustNotExist: create only; n > 0: the document must
    // exist with revision n.
    std::optional<std::int64_t> expectedRevision;
  };
  struct Delete {
    std::string kind;
    std::string name;
    // nullopt: delete if present (deleting a missing document is not an error); n > 0: the
    // document must exist with revision n.
    std::optional<std::int64_t> expectedRevision;
  };
  struct Append {
    std::string kind;
    std::string json;
    std::optional<Millis> timeMs;  // nullopt: the store clock's time at commit
  };

  Batch& upsert(std::string kind, std::string name, std::string json,
                std::optional<std::int64_t> expectedRevision = std::nullopt);
  Batch& remove(std::string kind, std::string name,
                std::optional<std::int64_t> expectedRevision = std::nullopt);
  // Events in the batch's transaction (the store's own log; its tests and crash test use it).
  // The control plane does not: its events go to a store::EventSink after the commit.
  Batch& appendEvent(std::string kind, std::string json,
                     std::optional<Millis> timeMs = std::nullopt);

  bool empty() const { return upserts_.empty() && deletes_.empty() && events_.empty(); }
  const std::vector<Upsert>& upserts() const { return upserts_; }
  const std::vector<Delete>& deletes() const { return deletes_; }
  const std::vector<Append>& events() const { return events_; }

 private:
  std::vector<Upsert> upserts_;
  std::vector<Delete> deletes_;
  std::vector<Append> events_;
};

// What a durable commit produced.
struct CommitResult {
  std::int64_t revision = 0;       // the commit's revision: every upserted document now has it
  std::int64_t firstEventSeq = 0;  // seqs of the batch's events, in batch order; 0 when none
  std::int64_t lastEventSeq = 0;
};

struct EventPage {
  std::vector<Event> events;  // ascending seq
  bool more = false;          // more events follow the last one returned
};

// Everything the store holds, read in one transaction (for a restart).
struct Snapshot {
  std::vector<Document> documents;  // ordered by kind, then name
  std::vector<Event> events;        // every retained event, ascending seq
  std::int64_t revision = 0;        // the last commit's revision; 0 for a new store
  std::int64_t lastEventSeq = 0;    // the highest seq ever assigned; 0 when none
  // Events with a lower seq were removed by compactEventsBefore(); 1 when none were.
  std::int64_t firstRetainedSeq = 1;
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  virtual Result<CommitResult> commit(const Batch& batch) = 0;
  virtual Result<Snapshot> loadAll() const = 0;
  // Drops retained events before `seq` (a port that keeps no events removes nothing).
  virtual Result<std::int64_t> compactEventsBefore(std::int64_t seq) = 0;
  // Where the state lives, for messages: a file path or "kubernetes:<server>/<namespace>".
  virtual std::string describe() const = 0;
  // Whether a pod's booking (a "replica" document with `pod`) is kept on the pod itself, so
  // that it can only be written once the pod exists: a pod booked before it is created (GPU
  // mode dra) is created carrying the document instead.
  virtual bool bookingsOnPods() const { return false; }
};

}  // namespace tessera::store
