#pragma once
// Durable state of the control plane: named JSON documents and an append-only event log in one
// embedded SQLite database. The store is generic on purpose: the server maps its domain objects
// (nodes, models, deployments, replicas and placements, reservations) onto documents of a kind
// and name, and what happened onto events; no SQL leaves this module.
//
// Durability: the database runs in WAL mode with synchronous=FULL. commit() returns only after
// SQLite has fsynced the transaction to the write-ahead log, so an acknowledged commit survives
// kill -9 of the process and (as far as the disk honours fsync) power loss. A batch is one
// transaction: after a crash it is there entirely or not at all.
//
// Revisions: the store keeps one revision counter. Every commit takes the next value, and every
// document it writes carries that value as its revision. Revisions therefore only grow and are
// never reused, not even after a delete and re-create, so an expected revision (optimistic
// concurrency) cannot be fooled by an object that was replaced in between.
//
// Threading: a Store is safe to share between threads; one internal mutex serialises every
// call on its single SQLite connection (calls are short: one transaction each). Several Stores
// (in one process or several) may open the same file: SQLite's file locks serialise their
// writes, a writer waits up to StoreOptions::busyTimeoutMs, and expected revisions are checked
// inside the write transaction, so they stay exact across processes.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "store/state_store.h"

namespace tessera::store {

struct StoreOptions {
  // How long a write waits for another connection's write lock before failing.
  int busyTimeoutMs = 5000;
  // Run SQLite's quick_check at open and refuse a corrupt database (reads every page once).
  bool verifyOnOpen = true;
  // Source of Document::updatedMs and default event times. Borrowed: must outlive the Store.
  // nullptr: Unix wall-clock time in milliseconds.
  const Clock* clock = nullptr;
};

class Store final : public StateStore {
 public:
  // The schema version this binary writes; open() migrates older databases up to it.
  static int latestSchemaVersion();

  // Opens (creating when missing) the database at `path`; ":memory:" gives a private in-memory
  // database. Applies pending migrations in one transaction. Fails, naming the path and
  // changing nothing, when the file is not a Tessera database, is corrupt, or has a newer
  // schema version than this binary knows.
  static Result<std::unique_ptr<Store>> open(const std::string& path,
                                             const StoreOptions& options = {});

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Applies a batch atomically and durably. Errors, each leaving the store unchanged:
  // kInvalidArgument for a malformed batch (empty, bad kind/name/JSON, a key twice);
  // kFailedPrecondition for a revision conflict (and only for that); kInternal when SQLite
  // fails (I/O error, disk full, lock wait timed out).
  Result<CommitResult> commit(const Batch& batch);

  // Appends one event in a transaction of its own (no document, no revision), at the seq
  // max(lastEventSeq + 1, minSeq); returns the seq. store::SqliteEventSink's write: the
  // control plane's events follow the commit of their documents. kInvalidArgument for a bad
  // kind or JSON (as in a Batch), kInternal when SQLite fails.
  Result<std::int64_t> appendEvent(std::string_view kind, std::string_view json, Millis timeMs,
                                   std::int64_t minSeq = 0);

  // The port (store/state_store.h), one document per commit: a version is a revision in
  // decimal, and a precondition an expected revision (a version that is not one a revision
  // this store gives is kInvalidArgument).
  Result<Version> put(std::string_view kind, std::string_view name, std::string_view json,
                      const Precondition& pre = {}) override;
  Result<void> remove(std::string_view kind, std::string_view name,
                      const Precondition& pre = {}) override;
  bool atomicWrites() const override { return true; }
  // The whole set as one Batch: one transaction.
  Result<void> commitAtomically(const WriteSet& writes) override;

  // One document; nullopt when absent.
  Result<std::optional<Document>> get(std::string_view kind, std::string_view name) const override;
  // Every document of a kind, ordered by name.
  Result<std::vector<Document>> list(std::string_view kind) const override;
  // Up to `limit` (1..10000) events with seq > afterSeq, optionally only those of `kind`.
  // kFailedPrecondition when events after `afterSeq` were compacted away (the reader has
  // missed some and must start over from loadAll()).
  Result<EventPage> eventsAfter(std::int64_t afterSeq, int limit, std::string_view kind = {}) const;
  // Documents, retained events and counters, consistent with each other.
  Result<Snapshot> loadAll() const override;
  // As loadAll without the documents: the retained events and the counters (the event sink's
  // read at a restart, which the documents' own read already covers).
  Result<Snapshot> loadEvents() const;

  // Removes the events with seq < `seq` (the documents are the snapshot they lead to);
  // returns how many were removed. `seq` may be at most lastEventSeq + 1. Compacting below
  // an earlier compaction point removes nothing.
  Result<std::int64_t> compactEventsBefore(std::int64_t seq);

  // Writes a consistent copy of the database to `path` (which must not exist), for backups.
  Result<void> backupTo(const std::string& path) const;

  const std::string& path() const;
  std::string describe() const override { return path(); }
  int schemaVersion() const;

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::store
