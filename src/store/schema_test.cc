// Opening databases: migrations from older schema versions, and refusing what is not ours.

#include <sqlite3.h>

#include <string>

#include <gtest/gtest.h>

#include "store/internal/schema.h"
#include "store/store.h"
#include "store/testing/temp_dir.h"

namespace tessera::store {
namespace {

using testing::readBytes;
using testing::TempDir;
using testing::writeBytes;

// Runs SQL on a database file with SQLite directly, as another program (or an older tessera)
// would.
void rawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

std::string rawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string out;
  sqlite3_exec(
      db, sql.c_str(),
      [](void* sink, int columns, char** values, char**) {
        auto& s = *static_cast<std::string*>(sink);
        for (int i = 0; i < columns; ++i) {
          if (i > 0) s += "|";
          s += values[i] ? values[i] : "NULL";
        }
        s += "\n";
        return 0;
      },
      &out, nullptr);
  sqlite3_close(db);
  return out;
}

// The version 1 schema exactly as the first release wrote it (frozen history: the migration
// test must not follow later edits of the migration code).
constexpr const char* kVersion1 = R"sql(
PRAGMA application_id = 1414746962;
PRAGMA journal_mode = WAL;
BEGIN;
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE documents (
  kind TEXT NOT NULL CHECK (kind <> ''), name TEXT NOT NULL CHECK (name <> ''),
  json TEXT NOT NULL, revision INTEGER NOT NULL CHECK (revision > 0),
  updated_ms INTEGER NOT NULL, PRIMARY KEY (kind, name)) WITHOUT ROWID;
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind <> ''), json TEXT NOT NULL);
INSERT INTO schema_version VALUES (1, 1000);
INSERT INTO meta VALUES ('revision', 2);
INSERT INTO documents VALUES ('node', 'n1', '{"gpus":8}', 1, 1000);
INSERT INTO documents VALUES ('replica', 'r1', '{"node":"n1"}', 2, 2000);
INSERT INTO events (time_ms, kind, json) VALUES (1000, 'NodeAdded', '{"node":"n1"}');
INSERT INTO events (time_ms, kind, json) VALUES (2000, 'ReplicaPlaced', '{"replica":"r1"}');
COMMIT;
)sql";

TEST(Schema, ApplicationIdMatchesTheFrozenVersion1) {
  EXPECT_EQ(internal::kApplicationId, 1414746962);
  EXPECT_EQ(Store::latestSchemaVersion(), 2);
}

TEST(Schema, MigratesAVersion1DatabaseKeepingItsData) {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  rawExec(path, kVersion1);

  auto store = Store::open(path);
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ((*store)->schemaVersion(), Store::latestSchemaVersion());
  auto snap = (*store)->loadAll();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->documents.size(), 2u);
  EXPECT_EQ(snap->documents[0], (Document{"node", "n1", R"({"gpus":8})", 1, 1000, "1"}));
  EXPECT_EQ(snap->revision, 2);
  ASSERT_EQ(snap->events.size(), 2u);
  EXPECT_EQ(snap->events[1], (Event{2, 2000, "ReplicaPlaced", R"({"replica":"r1"})"}));
  EXPECT_EQ(snap->firstRetainedSeq, 1);  // added by version 2
  auto byKind = (*store)->eventsAfter(0, 10, "NodeAdded");
  ASSERT_TRUE(byKind);
  ASSERT_EQ(byKind->events.size(), 1u);

  // Writes continue from the migrated counters.
  auto c = (*store)->commit(Batch().upsert("node", "n1", "{}", 1).appendEvent("e", "{}"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->revision, 3);
  EXPECT_EQ(c->firstEventSeq, 3);
  store->reset();

  EXPECT_EQ(rawQuery(path, "SELECT version FROM schema_version ORDER BY version"), "1\n2\n");
  EXPECT_EQ(rawQuery(path, "SELECT name FROM sqlite_schema WHERE name = 'events_by_kind'"),
            "events_by_kind\n");
  // Opening again changes nothing more.
  auto again = Store::open(path);
  ASSERT_TRUE(again);
  EXPECT_EQ(rawQuery(path, "SELECT count(*) FROM schema_version"), "2\n");
}

TEST(Schema, RefusesANewerSchemaNamingThePathAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.file("future.db");
  {
    auto store = Store::open(path);
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->commit(Batch().upsert("node", "n", "{}")));
  }
  rawExec(path, "PRAGMA journal_mode = DELETE; INSERT INTO schema_version VALUES (99, 5);");
  const std::string before = readBytes(path);

  auto store = Store::open(path);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(store.error().message.find(path), std::string::npos) << store.error().message;
  EXPECT_NE(store.error().message.find("99"), std::string::npos) << store.error().message;
  EXPECT_NE(store.error().message.find("newer"), std::string::npos) << store.error().message;
  EXPECT_EQ(readBytes(path), before);
  EXPECT_EQ(rawQuery(path, "PRAGMA journal_mode"), "delete\n");  // not switched to WAL
}

TEST(Schema, RefusesAFileThatIsNotADatabase) {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  const std::string text(8192, 'x');
  writeBytes(path, "this is not a database\n" + text);
  auto store = Store::open(path);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(store.error().message.find(path), std::string::npos) << store.error().message;
  EXPECT_NE(store.error().message.find("not a Tessera database"), std::string::npos)
      << store.error().message;
  EXPECT_EQ(readBytes(path), "this is not a database\n" + text);
}

TEST(Schema, RefusesAnotherProgramsSqliteDatabase) {
  TempDir dir;
  const std::string path = dir.file("other.db");
  rawExec(path, "CREATE TABLE t (x); INSERT INTO t VALUES (1);");
  const std::string before = readBytes(path);
  auto store = Store::open(path);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find(path), std::string::npos);
  EXPECT_NE(store.error().message.find("not a Tessera database"), std::string::npos)
      << store.error().message;
  EXPECT_EQ(readBytes(path), before);

  rawExec(path, "PRAGMA application_id = 42;");
  store = Store::open(path);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find("application_id 42"), std::string::npos)
      << store.error().message;
}

TEST(Schema, RefusesACorruptDatabase) {
  TempDir dir;
  const std::string path = dir.file("corrupt.db");
  {
    auto store = Store::open(path);
    ASSERT_TRUE(store);
    const std::string json = "[\"" + std::string(500, 'a') + "\"]";
    for (int i = 0; i < 50; ++i) {
      std::string name = "n";
      name += std::to_string(i);
      ASSERT_TRUE((*store)->commit(Batch().upsert("node", name, json)));
    }
  }  // the last close checkpoints the WAL into the file
  std::string bytes = readBytes(path);
  ASSERT_GT(bytes.size(), 4096u * 4);
  for (std::size_t i = 4096 * 2; i < 4096 * 3; ++i) bytes[i] = static_cast<char>(0xA5 ^ i);
  writeBytes(path, bytes);

  auto store = Store::open(path);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(store.error().message.find(path), std::string::npos) << store.error().message;
  EXPECT_NE(store.error().message.find("corrupt"), std::string::npos) << store.error().message;
}

TEST(Schema, AnEmptyFileBecomesANewStore) {
  TempDir dir;
  const std::string path = dir.file("empty.db");
  writeBytes(path, "");
  auto store = Store::open(path);
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ((*store)->schemaVersion(), Store::latestSchemaVersion());
}

TEST(Schema, AMissingDirectoryIsAClearError) {
  auto store = Store::open("/nonexistent-dir-for-tessera/state.db");
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message.find("/nonexistent-dir-for-tessera/state.db"), std::string::npos)
      << store.error().message;
}

}  // namespace
}  // namespace tessera::store
