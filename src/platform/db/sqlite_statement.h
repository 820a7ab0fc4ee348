// A prepared SQLite statement, finalised on scope exit, shared by the platform's stores (jobs,
// services and tokens, metrics). Errors are std::runtime_error prefixed with the store's name.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace zenith::platform {

class SqliteStatement {
 public:
  // `who` prefixes error messages: "[store] ...".
  SqliteStatement(sqlite3* db, const char* sql, const char* who) : db_(db), who_(who) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail();
  }
  ~SqliteStatement() { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void bind(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, int v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void bind_null(int i) { sqlite3_bind_null(stmt_, i); }

  // True while there is a row.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail();
  }
  // Ready to run again with new bindings.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string text(int col) {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  std::int64_t integer(int col) { return sqlite3_column_int64(stmt_, col); }
  double real(int col) { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  [[noreturn]] void fail() const {
    throw std::runtime_error(std::string("[") + who_ + "] " + sqlite3_errmsg(db_));
  }

  sqlite3* db_;
  const char* who_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace zenith::platform
