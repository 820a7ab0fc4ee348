#include "platform/telemetry/telemetry_store.h"

#include <sqlite3.h>

#include <map>
#include <stdexcept>

#include "platform/db/sqlite_statement.h"
#include "platform/telemetry/downsample.h"

namespace zenith::platform {

namespace {

// A prepared statement of this store.
class Stmt : public SqliteStatement {
 public:
  Stmt(sqlite3* db, const char* sql) : SqliteStatement(db, sql, "telemetry_store") {}
};

// BEGIN IMMEDIATE ... COMMIT, rolled back when an exception leaves the scope.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { run("BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    run("COMMIT");
    done_ = true;
  }

 private:
  void run(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      throw std::runtime_error(std::string("[telemetry_store] ") + sql + ": " + msg);
    }
  }
  sqlite3* db_;
  bool done_ = false;
};

template <typename T>
std::vector<T> pick(const std::vector<T>& v, const std::vector<std::size_t>& idx) {
  std::vector<T> out;
  out.reserve(idx.size());
  for (std::size_t i : idx) out.push_back(v[i]);
  return out;
}

}  // namespace

TelemetryStore::TelemetryStore(const std::string& path) : path_(path) {
  db_ = open_sqlite(path, "telemetry_store");
  exec(
      "CREATE TABLE IF NOT EXISTS metric_points ("
      " job_id INTEGER NOT NULL, rank INTEGER NOT NULL, name TEXT NOT NULL,"
      " step INTEGER NOT NULL, epoch INTEGER NOT NULL, value REAL, time REAL NOT NULL)");
  exec(
      "CREATE INDEX IF NOT EXISTS metric_points_series ON metric_points(job_id, name, rank, step)");
  exec(
      "CREATE TABLE IF NOT EXISTS metric_files ("
      " job_id INTEGER NOT NULL, rank INTEGER NOT NULL, offset INTEGER NOT NULL,"
      " PRIMARY KEY (job_id, rank))");
  exec(
      "CREATE TABLE IF NOT EXISTS usage_points ("
      " job_id INTEGER NOT NULL, rank INTEGER NOT NULL, device INTEGER NOT NULL,"
      " time REAL NOT NULL, cpu_utilization REAL NOT NULL, memory_bytes INTEGER NOT NULL,"
      " gpu_utilization REAL NOT NULL, gpu_memory_bytes INTEGER NOT NULL)");
  exec("CREATE INDEX IF NOT EXISTS usage_points_job ON usage_points(job_id, rank, time)");
}

TelemetryStore::~TelemetryStore() = default;

void TelemetryStore::exec(const char* sql) {
  sqlite_exec(db_.get(), sql, "telemetry_store", path_);
}

void TelemetryStore::add_points(std::int64_t job_id, int rank,
                                const std::vector<MetricPoint>& points, std::int64_t file_offset) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_.get());
  {
    Stmt s(db_.get(),
           "INSERT INTO metric_points (job_id, rank, name, step, epoch, value, time)"
           " VALUES (?,?,?,?,?,?,?)");
    for (const auto& p : points) {
      s.bind(1, job_id);
      s.bind(2, rank);
      s.bind(3, p.name);
      s.bind(4, p.step);
      s.bind(5, p.epoch);
      s.bind(6, p.value);
      s.bind(7, p.time);
      s.step();
      s.reset();
    }
    Stmt o(db_.get(), "INSERT OR REPLACE INTO metric_files (job_id, rank, offset) VALUES (?,?,?)");
    o.bind(1, job_id);
    o.bind(2, rank);
    o.bind(3, file_offset);
    o.step();
  }
  tx.commit();
}

std::int64_t TelemetryStore::file_offset(std::int64_t job_id, int rank) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(), "SELECT offset FROM metric_files WHERE job_id=? AND rank=?");
  s.bind(1, job_id);
  s.bind(2, rank);
  return s.step() ? s.integer(0) : 0;
}

void TelemetryStore::add_usage(std::int64_t job_id, const std::vector<UsagePoint>& points) {
  if (points.empty()) return;
  std::lock_guard lock(mutex_);
  Transaction tx(db_.get());
  {
    Stmt s(db_.get(),
           "INSERT INTO usage_points (job_id, rank, device, time, cpu_utilization, memory_bytes,"
           " gpu_utilization, gpu_memory_bytes) VALUES (?,?,?,?,?,?,?,?)");
    for (const auto& p : points) {
      s.bind(1, job_id);
      s.bind(2, p.rank);
      s.bind(3, p.device);
      s.bind(4, p.time);
      s.bind(5, p.cpu_utilization);
      s.bind(6, p.memory_bytes);
      s.bind(7, p.gpu_utilization);
      s.bind(8, p.gpu_memory_bytes);
      s.step();
      s.reset();
    }
  }
  tx.commit();
}

std::vector<std::pair<std::string, int>> TelemetryStore::series_names(std::int64_t job_id) {
  std::lock_guard lock(mutex_);
  // Walks the (job_id, name, rank, step) index: one seek per distinct series.
  Stmt s(db_.get(),
         "SELECT DISTINCT name, rank FROM metric_points WHERE job_id=? ORDER BY name, rank");
  s.bind(1, job_id);
  std::vector<std::pair<std::string, int>> out;
  while (s.step()) out.emplace_back(s.text(0), static_cast<int>(s.integer(1)));
  return out;
}

MetricSeries TelemetryStore::series(std::int64_t job_id, const std::string& name, int rank,
                                    std::size_t max_points) {
  MetricSeries m;
  m.name = name;
  m.rank = rank;
  {
    std::lock_guard lock(mutex_);
    Stmt s(db_.get(),
           "SELECT step, epoch, value, time FROM metric_points"
           " WHERE job_id=? AND name=? AND rank=? ORDER BY step, time");
    s.bind(1, job_id);
    s.bind(2, name);
    s.bind(3, rank);
    while (s.step()) {
      m.step.push_back(double(s.integer(0)));
      m.epoch.push_back(double(s.integer(1)));
      m.value.push_back(s.real(2));
      m.time.push_back(s.real(3));
    }
  }
  m.total = m.step.size();
  if (max_points > 0 && m.total > max_points) {
    auto idx = lttb_indices(m.step, m.value, max_points);
    m.step = pick(m.step, idx);
    m.epoch = pick(m.epoch, idx);
    m.value = pick(m.value, idx);
    m.time = pick(m.time, idx);
  }
  return m;
}

std::vector<UsageSeries> TelemetryStore::usage(std::int64_t job_id, std::size_t max_points) {
  std::map<int, UsageSeries> by_rank;
  {
    std::lock_guard lock(mutex_);
    Stmt s(db_.get(),
           "SELECT rank, device, time, cpu_utilization, memory_bytes, gpu_utilization,"
           " gpu_memory_bytes FROM usage_points WHERE job_id=? ORDER BY rank, time");
    s.bind(1, job_id);
    while (s.step()) {
      UsageSeries& u = by_rank[static_cast<int>(s.integer(0))];
      u.rank = static_cast<int>(s.integer(0));
      u.device = static_cast<int>(s.integer(1));
      u.time.push_back(s.real(2));
      u.cpu_utilization.push_back(s.real(3));
      u.memory_bytes.push_back(double(s.integer(4)));
      u.gpu_utilization.push_back(s.real(5));
      u.gpu_memory_bytes.push_back(double(s.integer(6)));
    }
  }
  std::vector<UsageSeries> out;
  for (auto& [rank, u] : by_rank) {
    u.total = u.time.size();
    if (max_points > 0 && u.total > max_points) {
      auto idx = lttb_indices(u.time, u.cpu_utilization, max_points);
      u.time = pick(u.time, idx);
      u.cpu_utilization = pick(u.cpu_utilization, idx);
      u.memory_bytes = pick(u.memory_bytes, idx);
      u.gpu_utilization = pick(u.gpu_utilization, idx);
      u.gpu_memory_bytes = pick(u.gpu_memory_bytes, idx);
    }
    out.push_back(std::move(u));
  }
  return out;
}

std::map<std::pair<std::string, int>, std::int64_t> TelemetryStore::series_counts(
    std::int64_t job_id) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(),
         "SELECT name, rank, COUNT(*) FROM metric_points WHERE job_id=? GROUP BY name, rank");
  s.bind(1, job_id);
  std::map<std::pair<std::string, int>, std::int64_t> out;
  while (s.step()) out[{s.text(0), static_cast<int>(s.integer(1))}] = s.integer(2);
  return out;
}

void TelemetryStore::prune_job(std::int64_t job_id) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_.get());
  for (const char* sql :
       {"DELETE FROM metric_points WHERE job_id=?", "DELETE FROM usage_points WHERE job_id=?",
        "DELETE FROM metric_files WHERE job_id=?"}) {
    Stmt s(db_.get(), sql);
    s.bind(1, job_id);
    s.step();
  }
  tx.commit();
}

std::optional<double> TelemetryStore::last_value(std::int64_t job_id, const std::string& name) {
  std::lock_guard lock(mutex_);
  // Both orders walk the series index backwards: no sort, however long the series.
  for (const char* sql : {"SELECT value FROM metric_points WHERE job_id=? AND name=? AND rank=0"
                          " ORDER BY step DESC LIMIT 1",
                          "SELECT value FROM metric_points WHERE job_id=? AND name=?"
                          " ORDER BY rank DESC, step DESC LIMIT 1"}) {
    Stmt s(db_.get(), sql);
    s.bind(1, job_id);
    s.bind(2, name);
    if (s.step()) return s.real(0);
  }
  return std::nullopt;
}

}  // namespace zenith::platform
