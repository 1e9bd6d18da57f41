#pragma once
// The store's schema: its ordered migrations, how open() recognises a Tessera database, and
// how it brings an older one up to date. Private to the store module.

#include <cstdint>
#include <span>
#include <string>

#include <sqlite3.h>

#include "common/clock.h"
#include "common/result.h"

namespace tessera::store::internal {

// PRAGMA application_id of every Tessera database: "TSSR".
inline constexpr std::int32_t kApplicationId = 0x54535352;

struct Migration {
  int version;              // 1, 2, ...: the schema version after it ran
  const char* description;  // why it exists, for the schema_version history
  const char* sql;          // statements run inside the migration transaction
};

// Every migration, in order; the last one's version is the schema this binary writes. A
// migration once released never changes: a change is a new migration.
std::span<const Migration> migrations();
int latestVersion();

// Reads (and writes nothing) what is at `db`: 0 for a new, empty database, else its schema
// version. Fails naming `path` for a file that is not an SQLite database, an SQLite database
// that is not Tessera's, a corrupt one (with `verify`: SQLite's quick_check) or one newer
// than this binary.
Result<int> inspect(sqlite3* db, const std::string& path, bool verify);

// Applies every migration above the current version in one write transaction (re-reading the
// version under the lock, in case another process migrated first). Returns the new version.
Result<int> migrate(sqlite3* db, const std::string& path, Millis nowMs);

}  // namespace tessera::store::internal
