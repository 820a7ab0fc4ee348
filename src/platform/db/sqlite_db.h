// Opening the platform's SQLite database file (jobs, services and tokens, and metrics live in
// one file, each store with its own connection).
#pragma once

#include <memory>
#include <string>

struct sqlite3;

namespace zenith::platform {

struct SqliteCloser {
  void operator()(sqlite3* db) const;
};
using SqliteDb = std::unique_ptr<sqlite3, SqliteCloser>;

// Opens (creating) `path` for use from several threads: WAL journal, synchronous=NORMAL, 5 s
// busy timeout. Errors are std::runtime_error naming `who` ("store") and the path.
SqliteDb open_sqlite(const std::string& path, const char* who);

// Runs statements without results; errors name `who` and the path.
void sqlite_exec(sqlite3* db, const char* sql, const char* who, const std::string& path);

}  // namespace zenith::platform
