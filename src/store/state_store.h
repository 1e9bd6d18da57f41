#pragma once
// The port the control plane keeps its documents through: one object per call, each with an
// opaque version. Two adapters implement it:
//  - store::Store: the embedded SQLite database (outside Kubernetes); a document's version is
//    the revision of the commit that last wrote it, in decimal;
//  - k8s::KubeStateStore: the Kubernetes API server (in a cluster); a document is one API
//    object and its version that object's resourceVersion (a booking kept on its pod: a hash
//    of the booking, since kubelet changes the pod all the time).
// The control plane writes documents only: its event history goes to a store::EventSink
// (store/event_sink.h) after the write, best effort. Operations that change several documents
// at once go through store::writeAll (store/write_set.h), written once above this port.
//
// The contract, for every adapter:
//  - put() stores one document and returns its new version; remove() deletes one (a missing
//    document is not an error unless a version was required); get() reads one (nullopt when
//    absent); list() every document of a kind; loadAll() every document (for a restart);
//  - a Precondition says what the caller last saw: nothing (unconditional), "must not exist
//    yet" (a create) or "must still have this version". A write whose precondition does not
//    hold fails with kFailedPrecondition and writes nothing;
//  - kFailedPrecondition means a conflict (another writer changed, created or deleted the
//    object first) and nothing else; kInvalidArgument a malformed call (empty or odd kind or
//    name, JSON that does not parse, a version the adapter never gives); kInternal anything
//    else (I/O, the API server unreachable or refusing). On any error the object is as it was;
//  - versions are opaque: compare them for equality, never order or parse them. A version is
//    only ever passed back to the adapter that gave it.
// An adapter may refuse an unconditional write as a conflict too, when it knows that the
// writer has not seen the object's latest version (the Kubernetes adapter does: a deposed
// leader's write gets 409).
//
// Threading: every adapter serialises its own calls and may be called from several threads;
// two calls are not one transaction (store::writeAll says what several writes add up to).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace tessera::store {

// A document's version: opaque to the caller (see above).
using Version = std::string;

// A stored document. `version` is what a Precondition::matching() names to require this very
// content. SQLite only: `revision` is the revision of the commit that last wrote it (>= 1; its
// version in decimal) and `updatedMs` the store clock's time at that commit; 0 elsewhere.
struct Document {
  std::string kind;
  std::string name;
  std::string json;
  std::int64_t revision = 0;
  Millis updatedMs = 0;
  Version version;

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

// Expected revision meaning "the document must not exist yet" (a create), in a store::Store
// Batch.
inline constexpr std::int64_t kMustNotExist = 0;

// What a write requires of the document it writes.
struct Precondition {
  enum class Kind { kNone, kMustNotExist, kMustMatch };
  Kind kind = Kind::kNone;
  Version version;  // kMustMatch only

  static Precondition none() { return {}; }
  static Precondition mustNotExist() { return {Kind::kMustNotExist, {}}; }
  // The document must exist with exactly this version.
  static Precondition matching(Version v) { return {Kind::kMustMatch, std::move(v)}; }
  bool operator==(const Precondition&) const = default;
};

class WriteSet;  // store/write_set.h

// store::Store's own batches (its tests, its crash test and its atomic write path): writes
// committed together, all or nothing, in one transaction. Kinds and names must be non-empty (kinds:
// at most 64 of [A-Za-z0-9._-]; names: at most 512 bytes of UTF-8, no control characters), every
// JSON text must parse (and be at most 16 MiB), and a (kind, name) may appear at most once per
// batch; otherwise commit() fails with kInvalidArgument and writes nothing.
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

  // Writes one document (see the contract above); returns its new version.
  virtual Result<Version> put(std::string_view kind, std::string_view name, std::string_view json,
                              const Precondition& pre = {}) = 0;
  // Deletes one document. Unconditional: a missing one is not an error. kMustMatch: it must
  // exist with that version. kMustNotExist makes no sense here: kInvalidArgument.
  virtual Result<void> remove(std::string_view kind, std::string_view name,
                              const Precondition& pre = {}) = 0;
  virtual Result<std::optional<Document>> get(std::string_view kind,
                                              std::string_view name) const = 0;
  // Every document of a kind, ordered by name.
  virtual Result<std::vector<Document>> list(std::string_view kind) const = 0;
  // Every document (Snapshot::documents, ordered by kind then name), for a restart; an
  // adapter that keeps events fills those in too.
  virtual Result<Snapshot> loadAll() const = 0;
  // Where the state lives, for messages: a file path or "kubernetes:<server>/<namespace>".
  virtual std::string describe() const = 0;
  // Whether a pod's booking (a "replica" document with `pod`) is kept on the pod itself, so
  // that it can only be written once the pod exists: a pod booked before it is created (GPU
  // mode dra) is created carrying the document instead.
  virtual bool bookingsOnPods() const { return false; }

  // An adapter that can write several documents in one transaction says so here, and
  // store::writeAll then hands it a whole WriteSet: commitAtomically() stores every write of
  // it or none (errors as for put(): a conflict on any write is kFailedPrecondition). The
  // others are written one object at a time by writeAll.
  virtual bool atomicWrites() const { return false; }
  virtual Result<void> commitAtomically(const WriteSet& writes);
};

}  // namespace tessera::store
