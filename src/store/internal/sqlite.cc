#include "store/internal/sqlite.h"

namespace tessera::store::internal {

std::string describe(sqlite3* db, int rc, std::string_view what) {
  std::string out(what);
  out += ": ";
  out += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  out += " (";
  out += sqlite3_errstr(rc);
  out += ")";
  return out;
}

Result<Stmt> prepare(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(raw);
    return fail(Error::internal(describe(db, rc, "cannot prepare " + std::string(sql))));
  }
  return Stmt(raw);
}

int exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
}

}  // namespace tessera::store::internal
