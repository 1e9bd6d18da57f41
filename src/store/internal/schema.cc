#include "store/internal/schema.h"

#include <array>
#include <string>

#include "store/internal/sqlite.h"

namespace tessera::store::internal {
namespace {

// Version 1: documents, the event log and the revision counter.
constexpr const char* kV1 = R"sql(
CREATE TABLE schema_version (
  version    INTEGER PRIMARY KEY,
  applied_ms INTEGER NOT NULL
);
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('revision', 0);
CREATE TABLE documents (
  kind       TEXT NOT NULL CHECK (kind <> ''),
  name       TEXT NOT NULL CHECK (name <> ''),
  json       TEXT NOT NULL,
  revision   INTEGER NOT NULL CHECK (revision > 0),
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY (kind, name)
) WITHOUT ROWID;
CREATE TABLE events (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT,
  time_ms INTEGER NOT NULL,
  kind    TEXT NOT NULL CHECK (kind <> ''),
  json    TEXT NOT NULL
);
)sql";

// Version 2: event compaction (the first retained seq) and reading the log by kind.
constexpr const char* kV2 = R"sql(
INSERT INTO meta (key, value) VALUES ('first_retained_seq', 1);
CREATE INDEX events_by_kind ON events (kind, seq);
)sql";

constexpr std::array kMigrations = {
    Migration{1, "documents, event log, revision counter", kV1},
    Migration{2, "event compaction point, events by kind", kV2},
};

std::string openError(const std::string& path, std::string_view problem) {
  return "store " + path + ": " + std::string(problem);
}

// A failed read while inspecting: say what kind of file this is when SQLite can tell.
Error readError(sqlite3* db, int rc, const std::string& path) {
  const int primary = rc & 0xff;
  if (primary == SQLITE_NOTADB) {
    return Error::invalid(openError(path, "not a Tessera database (not an SQLite database file)"));
  }
  if (primary == SQLITE_CORRUPT) {
    return Error::invalid(openError(path, "database is corrupt: " + describe(db, rc, "read")));
  }
  return Error::internal(openError(path, describe(db, rc, "cannot read")));
}

// The single integer of `sql` (NULL → `ifNull`).
Result<std::int64_t> queryInt(sqlite3* db, const std::string& path, const char* sql,
                              std::int64_t ifNull) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) return fail(readError(db, rc, path));
  rc = sqlite3_step(raw);
  if (rc == SQLITE_DONE) return ifNull;
  if (rc != SQLITE_ROW) return fail(readError(db, rc, path));
  if (sqlite3_column_type(raw, 0) == SQLITE_NULL) return ifNull;
  return sqlite3_column_int64(raw, 0);
}

Result<int> currentVersion(sqlite3* db, const std::string& path) {
  auto hasTable = queryInt(
      db, path,
      "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'", 0);
  if (!hasTable) return fail(hasTable.error());
  if (*hasTable == 0) return 0;
  auto version = queryInt(db, path, "SELECT max(version) FROM schema_version", 0);
  if (!version) return fail(version.error());
  return static_cast<int>(*version);
}

Error newerError(const std::string& path, int version) {
  return Error::precondition(openError(
      path, "schema version " + std::to_string(version) + " is newer than this binary knows (" +
                std::to_string(latestVersion()) + "); use a newer tessera"));
}

}  // namespace

std::span<const Migration> migrations() {
  return kMigrations;
}
int latestVersion() {
  return kMigrations.back().version;
}

Result<int> inspect(sqlite3* db, const std::string& path, bool verify) {
  // The first read of a file that is not a database fails here with SQLITE_NOTADB.
  auto objects = queryInt(db, path, "SELECT count(*) FROM sqlite_schema", 0);
  if (!objects) return fail(objects.error());
  auto appId = queryInt(db, path, "PRAGMA application_id", 0);
  if (!appId) return fail(appId.error());
  if (*appId != 0 && *appId != kApplicationId) {
    return fail(Error::invalid(
        openError(path, "not a Tessera database (application_id " + std::to_string(*appId) + ")")));
  }
  if (*objects == 0) return 0;  // new (a crash before the first migration committed leaves this)
  if (*appId != kApplicationId) {
    return fail(Error::invalid(
        openError(path, "not a Tessera database (an SQLite database of another program)")));
  }
  auto version = currentVersion(db, path);
  if (!version) return fail(version.error());
  if (*version <= 0) {
    return fail(Error::invalid(openError(path, "database is corrupt: no schema version")));
  }
  if (*version > latestVersion()) return fail(newerError(path, *version));
  if (verify) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &raw, nullptr);
    Stmt stmt(raw);
    if (rc != SQLITE_OK) return fail(readError(db, rc, path));
    rc = sqlite3_step(raw);
    if (rc != SQLITE_ROW) return fail(readError(db, rc, path));
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(raw, 0));
    std::string result = text == nullptr ? "" : text;
    for (char& c : result) {
      if (c == '\n') c = ' ';
    }
    if (result != "ok") {
      return fail(Error::invalid(openError(path, "database is corrupt: " + result)));
    }
  }
  return *version;
}

Result<int> migrate(sqlite3* db, const std::string& path, Millis nowMs) {
  Transaction txn(db);
  if (const int rc = txn.begin(/*write=*/true); rc != SQLITE_OK) {
    return fail(Error::internal(openError(path, describe(db, rc, "cannot start migration"))));
  }
  auto version = currentVersion(db, path);
  if (!version) return fail(version.error());
  if (*version > latestVersion()) return fail(newerError(path, *version));
  if (*version == latestVersion()) {
    txn.rollback();
    return *version;
  }
  for (const Migration& m : kMigrations) {
    if (m.version <= *version) continue;
    if (const int rc = exec(db, m.sql); rc != SQLITE_OK) {
      return fail(Error::internal(openError(
          path,
          describe(db, rc, "migration to version " + std::to_string(m.version) + " failed"))));
    }
    auto record = prepare(db, "INSERT INTO schema_version (version, applied_ms) VALUES (?, ?)");
    if (!record) return fail(record.error());
    Query q(record->get());
    q.bind(1, static_cast<std::int64_t>(m.version)).bind(2, static_cast<std::int64_t>(nowMs));
    if (const int rc = q.step(); rc != SQLITE_DONE) {
      return fail(Error::internal(openError(path, describe(db, rc, "cannot record migration"))));
    }
  }
  const std::string setId = "PRAGMA application_id = " + std::to_string(kApplicationId);
  if (const int rc = exec(db, setId.c_str()); rc != SQLITE_OK) {
    return fail(Error::internal(openError(path, describe(db, rc, "cannot set application_id"))));
  }
  if (const int rc = txn.commit(); rc != SQLITE_OK) {
    return fail(Error::internal(openError(path, describe(db, rc, "cannot commit migration"))));
  }
  return latestVersion();
}

}  // namespace tessera::store::internal
