#include "platform/jobs/job_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "platform/db/sqlite_statement.h"

namespace zenith::platform {

namespace {

// A prepared statement of this store.
class Statement : public SqliteStatement {
 public:
  Statement(sqlite3* db, const char* sql) : SqliteStatement(db, sql, "store") {}
};

const char* kJobColumns =
    "id, state, priority, spec, yaml, backend, devices, device_kind, restart_count, exit_code, "
    "reason, submitted_at, started_at, finished_at, external_id, cgroup, master_port, ranks";

// What the scheduler (every tick) and the metrics ingestion (every second) ask for: each walks
// an index, never the whole table (hot_query_plans() shows the plans; a test checks them).
// (No ORDER BY on the OR query: SQLite would scan the table in rowid order instead of using
// both indexes; active_since() sorts the few rows itself.)
const char* kActiveWhere = " WHERE state IN ('pending', 'running') OR finished_at >= ?";
const char* kByStateWhere = " WHERE state=? ORDER BY id";

nlohmann::json ranks_to_json(const std::vector<RankRecord>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : ranks)
    out.push_back({{"rank", r.rank},
                   {"device", r.device},
                   {"host", r.host},
                   {"pid", r.pid},
                   {"start_time", r.start_time},
                   {"state", r.state},
                   {"exit_code", r.exit_code}});
  return out;
}

JobRecord read_job(Statement& s) {
  JobRecord j;
  j.id = s.integer(0);
  j.state = job_state_from_string(s.text(1)).value_or(JobState::Lost);
  j.spec = spec_from_json(nlohmann::json::parse(s.text(3)));
  j.yaml = s.text(4);
  j.backend = s.text(5);
  j.devices = nlohmann::json::parse(s.text(6)).get<std::vector<int>>();
  j.device_kind = s.text(7);
  j.restart_count = static_cast<int>(s.integer(8));
  if (!s.is_null(9)) j.exit_code = static_cast<int>(s.integer(9));
  j.reason = s.text(10);
  j.submitted_at = s.real(11);
  j.started_at = s.real(12);
  j.finished_at = s.real(13);
  j.external_id = s.text(14);
  j.cgroup = s.text(15);
  j.master_port = static_cast<int>(s.integer(16));
  for (const auto& r : nlohmann::json::parse(s.text(17))) {
    RankRecord rr;
    rr.rank = r.value("rank", 0);
    rr.device = r.value("device", 0);
    rr.host = r.value("host", rr.host);
    rr.pid = r.value("pid", 0);
    rr.start_time = r.value("start_time", 0LL);
    rr.state = r.value("state", rr.state);
    rr.exit_code = r.value("exit_code", 0);
    j.ranks.push_back(rr);
  }
  return j;
}

// Binds every column but id, from parameter 1.
void bind_job(Statement& s, const JobRecord& j) {
  s.bind(1, std::string(to_string(j.state)));
  s.bind(2, j.spec.priority);
  s.bind(3, spec_to_json(j.spec).dump());
  s.bind(4, j.yaml);
  s.bind(5, j.backend);
  s.bind(6, nlohmann::json(j.devices).dump());
  s.bind(7, j.device_kind);
  s.bind(8, j.restart_count);
  if (j.exit_code)
    s.bind(9, *j.exit_code);
  else
    s.bind_null(9);
  s.bind(10, j.reason);
  s.bind(11, j.submitted_at);
  s.bind(12, j.started_at);
  s.bind(13, j.finished_at);
  s.bind(14, j.external_id);
  s.bind(15, j.cgroup);
  s.bind(16, j.master_port);
  s.bind(17, ranks_to_json(j.ranks).dump());
}

}  // namespace

JobStore::JobStore(const std::string& path) : path_(path) {
  db_ = open_sqlite(path, "store");
  exec(
      "CREATE TABLE IF NOT EXISTS jobs ("
      " id INTEGER PRIMARY KEY AUTOINCREMENT, state TEXT NOT NULL, priority INTEGER NOT NULL,"
      " spec TEXT NOT NULL, yaml TEXT NOT NULL, backend TEXT NOT NULL, devices TEXT NOT NULL,"
      " device_kind TEXT NOT NULL, restart_count INTEGER NOT NULL, exit_code INTEGER,"
      " reason TEXT NOT NULL, submitted_at REAL NOT NULL, started_at REAL NOT NULL,"
      " finished_at REAL NOT NULL, external_id TEXT NOT NULL, cgroup TEXT NOT NULL,"
      " master_port INTEGER NOT NULL, ranks TEXT NOT NULL)");
  exec("CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state)");
  exec("CREATE INDEX IF NOT EXISTS jobs_finished ON jobs(finished_at)");
  exec(
      "CREATE TABLE IF NOT EXISTS alerts ("
      " id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, kind TEXT NOT NULL,"
      " message TEXT NOT NULL, created_at REAL NOT NULL)");
  exec("CREATE INDEX IF NOT EXISTS alerts_job ON alerts(job_id)");
  // Retention marks pruned jobs (their logs, series and alerts are gone; the record stays).
  bool has_pruned = false;
  {
    Statement s(db_.get(), "PRAGMA table_info(jobs)");
    while (s.step()) has_pruned = has_pruned || s.text(1) == "pruned";
  }
  if (!has_pruned) exec("ALTER TABLE jobs ADD COLUMN pruned INTEGER NOT NULL DEFAULT 0");
}

JobStore::~JobStore() = default;

void JobStore::exec(const char* sql) { sqlite_exec(db_.get(), sql, "store", path_); }

void JobStore::insert_job(JobRecord& job) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(),
              "INSERT INTO jobs (state, priority, spec, yaml, backend, devices, device_kind,"
              " restart_count, exit_code, reason, submitted_at, started_at, finished_at,"
              " external_id, cgroup, master_port, ranks)"
              " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  bind_job(s, job);
  s.step();
  job.id = sqlite3_last_insert_rowid(db_.get());
}

void JobStore::update_job(const JobRecord& job) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(),
              "UPDATE jobs SET state=?, priority=?, spec=?, yaml=?, backend=?, devices=?,"
              " device_kind=?, restart_count=?, exit_code=?, reason=?, submitted_at=?,"
              " started_at=?, finished_at=?, external_id=?, cgroup=?, master_port=?, ranks=?"
              " WHERE id=?");
  bind_job(s, job);
  s.bind(18, job.id);
  s.step();
}

std::optional<JobRecord> JobStore::get_job(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(), (std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id=?").c_str());
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_job(s);
}

std::vector<JobRecord> JobStore::list_jobs(std::optional<JobState> state) {
  std::lock_guard lock(mutex_);
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs";
  sql += state ? kByStateWhere : " ORDER BY id";
  Statement s(db_.get(), sql.c_str());
  if (state) s.bind(1, std::string(to_string(*state)));
  std::vector<JobRecord> out;
  while (s.step()) out.push_back(read_job(s));
  return out;
}

void JobStore::add_alert(Alert& alert) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(), "INSERT INTO alerts (job_id, kind, message, created_at) VALUES (?,?,?,?)");
  s.bind(1, alert.job_id);
  s.bind(2, alert.kind);
  s.bind(3, alert.message);
  s.bind(4, alert.created_at);
  s.step();
  alert.id = sqlite3_last_insert_rowid(db_.get());
}

std::vector<Alert> JobStore::list_alerts(std::int64_t job_id) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(), job_id ? "SELECT id, job_id, kind, message, created_at FROM alerts"
                                  " WHERE job_id=? ORDER BY id"
                                : "SELECT id, job_id, kind, message, created_at FROM alerts"
                                  " ORDER BY id");
  if (job_id) s.bind(1, job_id);
  std::vector<Alert> out;
  while (s.step()) out.push_back({s.integer(0), s.integer(1), s.text(2), s.text(3), s.real(4)});
  return out;
}

}  // namespace zenith::platform

namespace zenith::platform {

std::vector<JobRecord> JobStore::active_since(double since) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(),
              (std::string("SELECT ") + kJobColumns + " FROM jobs" + kActiveWhere).c_str());
  s.bind(1, since);
  std::vector<JobRecord> out;
  while (s.step()) out.push_back(read_job(s));
  std::sort(out.begin(), out.end(),
            [](const JobRecord& a, const JobRecord& b) { return a.id < b.id; });
  return out;
}

std::map<std::string, int> JobStore::count_by_state() {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(), "SELECT state, COUNT(*) FROM jobs GROUP BY state");
  std::map<std::string, int> out;
  while (s.step()) out[s.text(0)] = static_cast<int>(s.integer(1));
  return out;
}

std::vector<std::int64_t> JobStore::prune_candidates(double before, int keep) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(),
              "SELECT id FROM jobs WHERE pruned=0 AND state NOT IN ('pending', 'running') AND"
              " (finished_at < ?1 OR id NOT IN (SELECT id FROM jobs WHERE state NOT IN"
              " ('pending', 'running') ORDER BY finished_at DESC LIMIT ?2)) ORDER BY id");
  s.bind(1, before);
  s.bind(2, std::max(0, keep));
  std::vector<std::int64_t> out;
  while (s.step()) out.push_back(s.integer(0));
  return out;
}

void JobStore::prune_job(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement a(db_.get(), "DELETE FROM alerts WHERE job_id=?");
  a.bind(1, id);
  a.step();
  Statement j(db_.get(), "UPDATE jobs SET pruned=1 WHERE id=?");
  j.bind(1, id);
  j.step();
}

std::vector<Alert> JobStore::recent_alerts(int limit) {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(),
              "SELECT id, job_id, kind, message, created_at FROM alerts ORDER BY id DESC LIMIT ?");
  s.bind(1, limit);
  std::vector<Alert> out;
  while (s.step()) out.push_back({s.integer(0), s.integer(1), s.text(2), s.text(3), s.real(4)});
  return out;
}

std::map<std::string, int> JobStore::count_alerts_by_kind() {
  std::lock_guard lock(mutex_);
  Statement s(db_.get(), "SELECT kind, COUNT(*) FROM alerts GROUP BY kind");
  std::map<std::string, int> out;
  while (s.step()) out[s.text(0)] = static_cast<int>(s.integer(1));
  return out;
}

std::vector<std::string> JobStore::hot_query_plans() {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const std::string where : {std::string(kByStateWhere), std::string(kActiveWhere)}) {
    Statement s(db_.get(), ("EXPLAIN QUERY PLAN SELECT id FROM jobs" + where).c_str());
    s.bind(1, where == kByStateWhere ? std::string("pending") : std::string());
    if (where == kActiveWhere) s.bind(1, 0.0);
    std::string plan = "SELECT id FROM jobs" + where + ":";
    while (s.step()) plan += " | " + s.text(3);
    out.push_back(plan);
  }
  return out;
}

}  // namespace zenith::platform
