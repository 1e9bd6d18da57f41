#include "store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "store/internal/schema.h"
#include "store/internal/sqlite.h"
#include "store/write_set.h"

namespace tessera::store {

using internal::Query;
using internal::Stmt;
using internal::Transaction;

namespace {

constexpr std::size_t kMaxKindBytes = 64;
constexpr std::size_t kMaxNameBytes = 512;
constexpr std::size_t kMaxJsonBytes = 16u << 20;
constexpr int kMaxEventPage = 10000;

class UnixClock final : public Clock {
 public:
  Millis nowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

bool validUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

std::string checkKind(std::string_view kind) {
  if (kind.empty()) return "kind is empty";
  if (kind.size() > kMaxKindBytes) return "kind is longer than 64 bytes";
  for (const char c : kind) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return "kind \"" + std::string(kind) + "\" has a character outside [A-Za-z0-9._-]";
  }
  return {};
}

std::string checkName(std::string_view name) {
  if (name.empty()) return "name is empty";
  if (name.size() > kMaxNameBytes) return "name is longer than 512 bytes";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "name has a control character";
  }
  if (!validUtf8(name)) return "name is not valid UTF-8";
  return {};
}

std::string checkJson(std::string_view json) {
  if (json.size() > kMaxJsonBytes) return "json is larger than 16 MiB";
  if (nlohmann::json::accept(json)) return {};
  try {
    const auto parsed = nlohmann::json::parse(json);
    (void)parsed;
  } catch (const nlohmann::json::exception& e) {
    return std::string("json does not parse: ") + e.what();
  }
  return "json does not parse";
}

std::string checkExpected(const std::optional<std::int64_t>& expected, bool allowMustNotExist) {
  if (!expected) return {};
  if (*expected < 0 || (*expected == 0 && !allowMustNotExist)) {
    return "expected revision " + std::to_string(*expected) + " is not valid";
  }
  return {};
}

std::string label(std::string_view kind, std::string_view name) {
  return std::string(kind) + "/" + std::string(name);
}

Result<void> validate(const Batch& batch) {
  if (batch.empty()) return fail(Error::invalid("store: empty batch"));
  std::set<std::pair<std::string_view, std::string_view>> keys;
  auto bad = [](std::string_view op, std::size_t index, std::string_view what,
                const std::string& problem) {
    return fail(Error::invalid("store: batch " + std::string(op) + " #" + std::to_string(index) +
                               (what.empty() ? "" : " (" + std::string(what) + ")") + ": " +
                               problem));
  };
  auto checkKey = [&](const std::string& kind, const std::string& name) -> std::string {
    if (auto p = checkKind(kind); !p.empty()) return p;
    if (auto p = checkName(name); !p.empty()) return p;
    if (!keys.emplace(kind, name).second) return "appears more than once in the batch";
    return {};
  };
  for (std::size_t i = 0; i < batch.upserts().size(); ++i) {
    const auto& u = batch.upserts()[i];
    std::string problem = checkKey(u.kind, u.name);
    if (problem.empty()) problem = checkExpected(u.expectedRevision, true);
    if (problem.empty()) problem = checkJson(u.json);
    if (!problem.empty()) return bad("upsert", i, label(u.kind, u.name), problem);
  }
  for (std::size_t i = 0; i < batch.deletes().size(); ++i) {
    const auto& d = batch.deletes()[i];
    std::string problem = checkKey(d.kind, d.name);
    if (problem.empty()) problem = checkExpected(d.expectedRevision, false);
    if (!problem.empty()) return bad("delete", i, label(d.kind, d.name), problem);
  }
  for (std::size_t i = 0; i < batch.events().size(); ++i) {
    const auto& e = batch.events()[i];
    std::string problem = checkKind(e.kind);
    if (problem.empty()) problem = checkJson(e.json);
    if (!problem.empty()) return bad("event", i, e.kind, problem);
  }
  return {};
}

Document document(std::string kind, std::string name, std::string json, std::int64_t revision,
                  Millis updatedMs) {
  Version version = std::to_string(revision);
  return {std::move(kind), std::move(name), std::move(json),
          revision,        updatedMs,       std::move(version)};
}

// A port precondition as a Batch's expected revision: the versions this store gives are its
// revisions in decimal.
Result<std::optional<std::int64_t>> expectedRevision(const Precondition& pre, bool remove,
                                                     std::string_view kind, std::string_view name) {
  switch (pre.kind) {
    case Precondition::Kind::kNone:
      return std::optional<std::int64_t>();
    case Precondition::Kind::kMustNotExist:
      if (remove) {
        return fail(Error::invalid("store: delete " + label(kind, name) +
                                   ": cannot require that the document does not exist"));
      }
      return std::optional<std::int64_t>(kMustNotExist);
    case Precondition::Kind::kMustMatch:
      break;
  }
  std::int64_t revision = 0;
  const std::string& v = pre.version;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), revision);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || revision < 1) {
    return fail(Error::invalid("store: " + label(kind, name) + ": version \"" + v +
                               "\" is not one this store gives (a revision)"));
  }
  return std::optional<std::int64_t>(revision);
}

// Makes a newly created file's directory entry durable (SQLite syncs the directory for its
// journals, not for the database file itself).
void syncParentDirectory(const std::string& path) {
  std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

// ---- Batch ---------------------------------------------------------------------------------

Batch& Batch::upsert(std::string kind, std::string name, std::string json,
                     std::optional<std::int64_t> expectedRevision) {
  upserts_.push_back({std::move(kind), std::move(name), std::move(json), expectedRevision});
  return *this;
}

Batch& Batch::remove(std::string kind, std::string name,
                     std::optional<std::int64_t> expectedRevision) {
  deletes_.push_back({std::move(kind), std::move(name), expectedRevision});
  return *this;
}

Batch& Batch::appendEvent(std::string kind, std::string json, std::optional<Millis> timeMs) {
  events_.push_back({std::move(kind), std::move(json), timeMs});
  return *this;
}

// ---- Store ---------------------------------------------------------------------------------

struct Store::Impl {
  std::string path;
  StoreOptions options;
  UnixClock unixClock;
  const Clock* clock = nullptr;
  internal::DbHandle db;
  int schemaVersion = 0;
  mutable std::mutex mutex;  // guards everything below and every use of `db`

  Stmt readMeta;
  Stmt writeMeta;
  Stmt readRevision;
  Stmt upsertDoc;
  Stmt deleteDoc;
  Stmt insertEvent;
  Stmt insertEventAt;
  Stmt getDoc;
  Stmt listDocs;
  Stmt allDocs;
  Stmt eventsAfter;
  Stmt eventsAfterByKind;
  Stmt lastSeq;
  Stmt trimEvents;

  Error sqlError(int rc, std::string_view what) const {
    return Error::internal("store " + path + ": " + internal::describe(db.get(), rc, what));
  }

  Result<void> prepareAll() {
    const std::pair<Stmt*, const char*> statements[] = {
        {&readMeta, "SELECT value FROM meta WHERE key = ?"},
        {&writeMeta, "UPDATE meta SET value = ? WHERE key = ?"},
        {&readRevision, "SELECT revision FROM documents WHERE kind = ? AND name = ?"},
        {&upsertDoc,
         "INSERT INTO documents (kind, name, json, revision, updated_ms) VALUES (?, ?, ?, ?, ?) "
         "ON CONFLICT (kind, name) DO UPDATE SET json = excluded.json, "
         "revision = excluded.revision, updated_ms = excluded.updated_ms"},
        {&deleteDoc, "DELETE FROM documents WHERE kind = ? AND name = ?"},
        {&insertEvent, "INSERT INTO events (time_ms, kind, json) VALUES (?, ?, ?)"},
        {&insertEventAt, "INSERT INTO events (seq, time_ms, kind, json) VALUES (?, ?, ?, ?)"},
        {&getDoc, "SELECT json, revision, updated_ms FROM documents WHERE kind = ? AND name = ?"},
        {&listDocs,
         "SELECT name, json, revision, updated_ms FROM documents WHERE kind = ? ORDER BY name"},
        {&allDocs,
         "SELECT kind, name, json, revision, updated_ms FROM documents ORDER BY kind, name"},
        {&eventsAfter,
         "SELECT seq, time_ms, kind, json FROM events WHERE seq > ? ORDER BY seq LIMIT ?"},
        {&eventsAfterByKind,
         "SELECT seq, time_ms, kind, json FROM events WHERE kind = ? AND seq > ? ORDER BY seq "
         "LIMIT ?"},
        {&lastSeq, "SELECT seq FROM sqlite_sequence WHERE name = 'events'"},
        {&trimEvents, "DELETE FROM events WHERE seq < ?"},
    };
    for (const auto& [stmt, sql] : statements) {
      auto prepared = internal::prepare(db.get(), sql);
      if (!prepared) return fail(prepared.error());
      *stmt = std::move(*prepared);
    }
    return {};
  }

  Result<std::int64_t> meta(const char* key) const {
    Query q(readMeta.get());
    q.bind(1, std::string_view(key));
    const int rc = q.step();
    if (rc != SQLITE_ROW) return fail(sqlError(rc, std::string("cannot read ") + key));
    return q.int64At(0);
  }

  Result<void> setMeta(const char* key, std::int64_t value) {
    Query q(writeMeta.get());
    q.bind(1, value).bind(2, std::string_view(key));
    if (const int rc = q.step(); rc != SQLITE_DONE) {
      return fail(sqlError(rc, std::string("cannot write ") + key));
    }
    return {};
  }

  Result<std::int64_t> lastEventSeq() const {
    Query q(lastSeq.get());
    const int rc = q.step();
    if (rc == SQLITE_DONE) return 0;
    if (rc != SQLITE_ROW) return fail(sqlError(rc, "cannot read the last event seq"));
    return q.int64At(0);
  }

  // The counters and every retained event into `snap` (inside the caller's transaction).
  Result<void> readLog(Snapshot& snap) const {
    auto revision = meta("revision");
    if (!revision) return fail(revision.error());
    auto floor = meta("first_retained_seq");
    if (!floor) return fail(floor.error());
    auto last = lastEventSeq();
    if (!last) return fail(last.error());
    snap.revision = *revision;
    snap.firstRetainedSeq = *floor;
    snap.lastEventSeq = *last;
    std::int64_t after = *floor - 1;
    for (;;) {
      auto page = readEvents(after, kMaxEventPage, {});
      if (!page) return fail(page.error());
      for (auto& e : page->events) snap.events.push_back(std::move(e));
      if (!page->more) return {};
      after = snap.events.back().seq;
    }
  }

  // The current revision of a document, 0 when absent.
  Result<std::int64_t> revisionOf(std::string_view kind, std::string_view name) const {
    Query q(readRevision.get());
    q.bind(1, kind).bind(2, name);
    const int rc = q.step();
    if (rc == SQLITE_DONE) return 0;
    if (rc != SQLITE_ROW) return fail(sqlError(rc, "cannot read " + label(kind, name)));
    return q.int64At(0);
  }

  Result<void> checkExpected(std::string_view kind, std::string_view name,
                             std::optional<std::int64_t> expected) const {
    if (!expected) return {};
    auto current = revisionOf(kind, name);
    if (!current) return fail(current.error());
    if (*current == *expected) return {};
    const auto describeRevision = [](std::int64_t r) {
      return r == 0 ? std::string("absent") : "at revision " + std::to_string(r);
    };
    return fail(Error::precondition("store: conflict on " + label(kind, name) + ": expected " +
                                    describeRevision(*expected) + ", found " +
                                    describeRevision(*current)));
  }

  Result<CommitResult> commit(const Batch& batch) {
    Transaction txn(db.get());
    if (const int rc = txn.begin(/*write=*/true); rc != SQLITE_OK) {
      return fail(sqlError(rc, "cannot start a write transaction"));
    }
    // Every expectation is checked before anything is written, so that a conflict reports the
    // state the caller raced with.
    for (const auto& u : batch.upserts()) {
      TESSERA_RETURN_IF_ERROR(checkExpected(u.kind, u.name, u.expectedRevision));
    }
    for (const auto& d : batch.deletes()) {
      TESSERA_RETURN_IF_ERROR(checkExpected(d.kind, d.name, d.expectedRevision));
    }
    auto previous = meta("revision");
    if (!previous) return fail(previous.error());
    CommitResult result;
    result.revision = *previous + 1;
    const Millis now = clock->nowMs();
    for (const auto& u : batch.upserts()) {
      Query q(upsertDoc.get());
      q.bind(1, u.kind).bind(2, u.name).bind(3, u.json).bind(4, result.revision).bind(5, now);
      if (const int rc = q.step(); rc != SQLITE_DONE) {
        return fail(sqlError(rc, "cannot write " + label(u.kind, u.name)));
      }
    }
    for (const auto& d : batch.deletes()) {
      Query q(deleteDoc.get());
      q.bind(1, d.kind).bind(2, d.name);
      if (const int rc = q.step(); rc != SQLITE_DONE) {
        return fail(sqlError(rc, "cannot delete " + label(d.kind, d.name)));
      }
    }
    for (const auto& e : batch.events()) {
      Query q(insertEvent.get());
      q.bind(1, e.timeMs.value_or(now)).bind(2, e.kind).bind(3, e.json);
      if (const int rc = q.step(); rc != SQLITE_DONE) {
        return fail(sqlError(rc, "cannot append a " + e.kind + " event"));
      }
      result.lastEventSeq = sqlite3_last_insert_rowid(db.get());
      if (result.firstEventSeq == 0) result.firstEventSeq = result.lastEventSeq;
    }
    TESSERA_RETURN_IF_ERROR(setMeta("revision", result.revision));
    if (const int rc = txn.commit(); rc != SQLITE_OK) return fail(sqlError(rc, "commit failed"));
    return result;
  }

  Result<EventPage> readEvents(std::int64_t afterSeq, int limit, std::string_view kind) const {
    auto floor = meta("first_retained_seq");
    if (!floor) return fail(floor.error());
    if (afterSeq + 1 < *floor) {
      return fail(Error::precondition("store: events after seq " + std::to_string(afterSeq) +
                                      " were compacted (the log starts at seq " +
                                      std::to_string(*floor) + "); reload with loadAll"));
    }
    EventPage page;
    Query q(kind.empty() ? eventsAfter.get() : eventsAfterByKind.get());
    int param = 1;
    if (!kind.empty()) q.bind(param++, kind);
    q.bind(param, afterSeq);
    q.bind(param + 1, static_cast<std::int64_t>(limit) + 1);
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) {
      if (static_cast<int>(page.events.size()) == limit) {
        page.more = true;
        break;
      }
      page.events.push_back({q.int64At(0), q.int64At(1), q.textAt(2), q.textAt(3)});
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(sqlError(rc, "cannot read events"));
    return page;
  }
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

int Store::latestSchemaVersion() {
  return internal::latestVersion();
}

Result<std::unique_ptr<Store>> Store::open(const std::string& path, const StoreOptions& options) {
  if (path.empty()) return fail(Error::invalid("store: empty database path"));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  impl->clock = options.clock != nullptr ? options.clock : &impl->unixClock;
  const bool inMemory = path == ":memory:";
  struct stat st {};
  const bool created = !inMemory && ::stat(path.c_str(), &st) != 0;

  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  impl->db.reset(raw);
  if (rc != SQLITE_OK) {
    return fail(
        Error::invalid("store " + path + ": " + internal::describe(raw, rc, "cannot open")));
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, options.busyTimeoutMs);

  // Everything up to here only reads, so a refused file is left exactly as it was.
  auto version = internal::inspect(raw, path, options.verifyOnOpen);
  if (!version) return fail(version.error());

  if (!inMemory) {
    sqlite3_stmt* jm = nullptr;
    rc = sqlite3_prepare_v2(raw, "PRAGMA journal_mode = WAL", -1, &jm, nullptr);
    Stmt journal(jm);
    if (rc == SQLITE_OK) rc = sqlite3_step(jm);
    const auto* mode = rc == SQLITE_ROW ? sqlite3_column_text(jm, 0) : nullptr;
    if (mode == nullptr || std::string_view(reinterpret_cast<const char*>(mode)) != "wal") {
      return fail(impl->sqlError(rc, "cannot switch to WAL mode"));
    }
  }
  for (const char* pragma : {"PRAGMA synchronous = FULL", "PRAGMA foreign_keys = ON"}) {
    if (rc = internal::exec(raw, pragma); rc != SQLITE_OK) {
      return fail(impl->sqlError(rc, pragma));
    }
  }
  auto migrated = internal::migrate(raw, path, impl->clock->nowMs());
  if (!migrated) return fail(migrated.error());
  impl->schemaVersion = *migrated;
  if (created) syncParentDirectory(path);
  TESSERA_RETURN_IF_ERROR(impl->prepareAll());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

Result<CommitResult> Store::commit(const Batch& batch) {
  TESSERA_RETURN_IF_ERROR(validate(batch));
  std::lock_guard lock(impl_->mutex);
  return impl_->commit(batch);
}

Result<std::int64_t> Store::appendEvent(std::string_view kind, std::string_view json, Millis timeMs,
                                        std::int64_t minSeq) {
  if (auto p = checkKind(kind); !p.empty()) {
    return fail(Error::invalid("store: event (" + std::string(kind) + "): " + p));
  }
  if (auto p = checkJson(json); !p.empty()) {
    return fail(Error::invalid("store: event (" + std::string(kind) + "): " + p));
  }
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  Transaction txn(s.db.get());
  if (const int rc = txn.begin(/*write=*/true); rc != SQLITE_OK) {
    return fail(s.sqlError(rc, "cannot start a write transaction"));
  }
  // Read inside the write transaction: another connection's appends are counted.
  auto last = s.lastEventSeq();
  if (!last) return fail(last.error());
  const std::int64_t seq = std::max(*last + 1, minSeq);
  {
    Query q(s.insertEventAt.get());
    q.bind(1, seq).bind(2, timeMs).bind(3, kind).bind(4, json);
    if (const int rc = q.step(); rc != SQLITE_DONE) {
      return fail(s.sqlError(rc, "cannot append a " + std::string(kind) + " event"));
    }
  }
  if (const int rc = txn.commit(); rc != SQLITE_OK) return fail(s.sqlError(rc, "commit failed"));
  return seq;
}

Result<Version> Store::put(std::string_view kind, std::string_view name, std::string_view json,
                           const Precondition& pre) {
  auto expected = expectedRevision(pre, /*remove=*/false, kind, name);
  if (!expected) return fail(expected.error());
  Batch batch;
  batch.upsert(std::string(kind), std::string(name), std::string(json), *expected);
  auto done = commit(batch);
  if (!done) return fail(done.error());
  return std::to_string(done->revision);
}

Result<void> Store::remove(std::string_view kind, std::string_view name, const Precondition& pre) {
  auto expected = expectedRevision(pre, /*remove=*/true, kind, name);
  if (!expected) return fail(expected.error());
  Batch batch;
  batch.remove(std::string(kind), std::string(name), *expected);
  auto done = commit(batch);
  if (!done) return fail(done.error());
  return {};
}

Result<void> Store::commitAtomically(const WriteSet& writes) {
  Batch batch;
  for (const WriteSet::Write& w : writes.writes()) {
    const bool remove = w.op == WriteSet::Write::Op::kRemove;
    auto expected = expectedRevision(w.pre, remove, w.kind, w.name);
    if (!expected) return fail(expected.error());
    if (remove) {
      batch.remove(w.kind, w.name, *expected);
    } else {
      batch.upsert(w.kind, w.name, w.json, *expected);
    }
  }
  auto done = commit(batch);
  if (!done) return fail(done.error());
  return {};
}

Result<std::optional<Document>> Store::get(std::string_view kind, std::string_view name) const {
  std::lock_guard lock(impl_->mutex);
  Query q(impl_->getDoc.get());
  q.bind(1, kind).bind(2, name);
  const int rc = q.step();
  if (rc == SQLITE_DONE) return std::optional<Document>();
  if (rc != SQLITE_ROW) return fail(impl_->sqlError(rc, "cannot read " + label(kind, name)));
  return std::optional(
      document(std::string(kind), std::string(name), q.textAt(0), q.int64At(1), q.int64At(2)));
}

Result<std::vector<Document>> Store::list(std::string_view kind) const {
  std::lock_guard lock(impl_->mutex);
  Query q(impl_->listDocs.get());
  q.bind(1, kind);
  std::vector<Document> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    out.push_back(
        document(std::string(kind), q.textAt(0), q.textAt(1), q.int64At(2), q.int64At(3)));
  }
  if (rc != SQLITE_DONE) return fail(impl_->sqlError(rc, "cannot list " + std::string(kind)));
  return out;
}

Result<EventPage> Store::eventsAfter(std::int64_t afterSeq, int limit,
                                     std::string_view kind) const {
  if (afterSeq < 0) return fail(Error::invalid("store: negative event seq"));
  if (limit < 1 || limit > kMaxEventPage) {
    return fail(
        Error::invalid("store: event page limit must be 1.." + std::to_string(kMaxEventPage)));
  }
  std::lock_guard lock(impl_->mutex);
  Transaction txn(impl_->db.get());  // the compaction point and the rows from one snapshot
  if (const int rc = txn.begin(/*write=*/false); rc != SQLITE_OK) {
    return fail(impl_->sqlError(rc, "cannot start a read transaction"));
  }
  return impl_->readEvents(afterSeq, limit, kind);
}

Result<Snapshot> Store::loadAll() const {
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  Transaction txn(s.db.get());
  if (const int rc = txn.begin(/*write=*/false); rc != SQLITE_OK) {
    return fail(s.sqlError(rc, "cannot start a read transaction"));
  }
  Snapshot snap;
  {
    Query q(s.allDocs.get());
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) {
      snap.documents.push_back(
          document(q.textAt(0), q.textAt(1), q.textAt(2), q.int64At(3), q.int64At(4)));
    }
    if (rc != SQLITE_DONE) return fail(s.sqlError(rc, "cannot read documents"));
  }
  TESSERA_RETURN_IF_ERROR(s.readLog(snap));
  return snap;
}

Result<Snapshot> Store::loadEvents() const {
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  Transaction txn(s.db.get());
  if (const int rc = txn.begin(/*write=*/false); rc != SQLITE_OK) {
    return fail(s.sqlError(rc, "cannot start a read transaction"));
  }
  Snapshot snap;
  TESSERA_RETURN_IF_ERROR(s.readLog(snap));
  return snap;
}

Result<std::int64_t> Store::compactEventsBefore(std::int64_t seq) {
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  Transaction txn(s.db.get());
  if (const int rc = txn.begin(/*write=*/true); rc != SQLITE_OK) {
    return fail(s.sqlError(rc, "cannot start a write transaction"));
  }
  auto last = s.lastEventSeq();
  if (!last) return fail(last.error());
  if (seq < 1 || seq > *last + 1) {
    return fail(Error::invalid("store: cannot compact events before seq " + std::to_string(seq) +
                               ": the log ends at seq " + std::to_string(*last)));
  }
  auto floor = s.meta("first_retained_seq");
  if (!floor) return fail(floor.error());
  if (seq <= *floor) return 0;
  std::int64_t removed = 0;
  {
    Query q(s.trimEvents.get());
    q.bind(1, seq);
    if (const int rc = q.step(); rc != SQLITE_DONE) return fail(s.sqlError(rc, "cannot compact"));
    removed = sqlite3_changes(s.db.get());
  }
  TESSERA_RETURN_IF_ERROR(s.setMeta("first_retained_seq", seq));
  if (const int rc = txn.commit(); rc != SQLITE_OK) return fail(s.sqlError(rc, "commit failed"));
  return removed;
}

Result<void> Store::backupTo(const std::string& path) const {
  if (path.empty()) return fail(Error::invalid("store: empty backup path"));
  if (std::filesystem::exists(path)) {
    return fail(Error::exists("store: backup target " + path + " already exists"));
  }
  std::lock_guard lock(impl_->mutex);
  auto stmt = internal::prepare(impl_->db.get(), "VACUUM INTO ?");
  if (!stmt) return fail(stmt.error());
  {
    Query q(stmt->get());
    q.bind(1, std::string_view(path));
    if (const int rc = q.step(); rc != SQLITE_DONE) {
      return fail(impl_->sqlError(rc, "backup to " + path + " failed"));
    }
  }
  // VACUUM INTO does not fsync what it wrote.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    return fail(Error::internal("store: cannot sync backup " + path));
  }
  ::close(fd);
  syncParentDirectory(path);
  return {};
}

const std::string& Store::path() const {
  return impl_->path;
}
int Store::schemaVersion() const {
  return impl_->schemaVersion;
}

}  // namespace tessera::store
