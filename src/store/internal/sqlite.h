#pragma once
// Thin RAII helpers over the SQLite C API, private to the store module (no SQL leaves it).
// Threading: like the connection they belong to, used under the Store's mutex only.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "common/result.h"

namespace tessera::store::internal {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;

struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// "<what>: <SQLite's message> (<code name>)", for error messages.
std::string describe(sqlite3* db, int rc, std::string_view what);

Result<Stmt> prepare(sqlite3* db, std::string_view sql);
// Runs SQL that returns no rows (may hold several statements).
int exec(sqlite3* db, const char* sql);

// One use of a cached prepared statement: binds, steps, reads columns; resets on destruction so
// the statement can be used again and releases its read locks.
class Query {
 public:
  explicit Query(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Query() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  // Parameters are numbered from 1. Texts are copied (SQLITE_TRANSIENT).
  Query& bind(int index, std::string_view text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Query& bind(int index, std::int64_t value) {
    sqlite3_bind_int64(stmt_, index, value);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(stmt_); }

  std::int64_t int64At(int column) const { return sqlite3_column_int64(stmt_, column); }
  bool isNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::string textAt(int column) const {
    const auto* text = sqlite3_column_text(stmt_, column);
    const int bytes = sqlite3_column_bytes(stmt_, column);
    return text == nullptr
               ? std::string()
               : std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(bytes));
  }

 private:
  sqlite3_stmt* stmt_;
};

// A transaction on a connection: rolled back on destruction unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction() { rollback(); }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so a
  // read-then-write transaction never fails half-way on a lock upgrade.
  int begin(bool write) {
    const int rc = exec(db_, write ? "BEGIN IMMEDIATE" : "BEGIN");
    active_ = rc == SQLITE_OK;
    return rc;
  }
  // With synchronous=FULL, SQLITE_OK here means the transaction is on disk.
  int commit() {
    const int rc = exec(db_, "COMMIT");
    if (rc == SQLITE_OK) active_ = false;
    return rc;
  }
  void rollback() {
    // After some errors SQLite has already rolled back; only roll back an open transaction.
    if (active_ && sqlite3_get_autocommit(db_) == 0) exec(db_, "ROLLBACK");
    active_ = false;
  }

 private:
  sqlite3* db_;
  bool active_ = false;
};

}  // namespace tessera::store::internal
