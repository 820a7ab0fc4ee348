#include "platform/db/sqlite_db.h"

#include <sqlite3.h>

#include <stdexcept>

namespace zenith::platform {

void SqliteCloser::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

SqliteDb open_sqlite(const std::string& path, const char* who) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  SqliteDb db(raw);
  if (rc != SQLITE_OK)
    throw std::runtime_error(std::string("[") + who + "] cannot open " + path + ": " +
                             (raw ? sqlite3_errmsg(raw) : "out of memory"));
  sqlite3_busy_timeout(raw, 5000);
  sqlite_exec(raw, "PRAGMA journal_mode=WAL", who, path);
  sqlite_exec(raw, "PRAGMA synchronous=NORMAL", who, path);
  return db;
}

void sqlite_exec(sqlite3* db, const char* sql, const char* who, const std::string& path) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw std::runtime_error(std::string("[") + who + "] " + path + ": " + msg);
  }
}

}  // namespace zenith::platform
