#include "platform/http/dashboard_routes.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "platform/exec/executor.h"
#include "platform/exec/log_tail.h"
#include "platform/http/http_guard.h"
#include "platform/http/reply.h"
#include "platform/jobs/job_manager.h"
#include "platform/telemetry/telemetry_ingest.h"
#include "platform/telemetry/telemetry_store.h"

namespace zenith::platform {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kDefaultPoints = 800;
constexpr std::size_t kMaxPoints = 20000;
constexpr std::int64_t kMaxLogChunk = 512 * 1024;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

const char* content_type(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".json") return "application/json";
  return "application/octet-stream";
}

std::size_t points_param(const httplib::Request& req) {
  if (!req.has_param("points")) return kDefaultPoints;
  long long n = std::atoll(req.get_param_value("points").c_str());
  return static_cast<std::size_t>(std::clamp<long long>(n, 3, kMaxPoints));
}

json columns(const std::vector<double>& v) {
  json out = json::array();
  for (double x : v) out.push_back(std::isfinite(x) ? json(x) : json(nullptr));
  return out;
}

double duration_of(const JobRecord& j) {
  if (j.started_at <= 0) return 0;
  const double end = j.finished_at > 0 ? j.finished_at : now_seconds();
  return std::max(0.0, end - j.started_at);
}

// Where the web dir may be, in order: $ZENITH_WEB_DIR alone when it is set (a wrong setting is
// reported, not passed over), else share/zenith/web next to the binary or one level up.
std::vector<fs::path> web_dir_candidates() {
  if (const char* env = std::getenv("ZENITH_WEB_DIR"); env && *env) return {env};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return {exe.parent_path() / "share/zenith/web",
          exe.parent_path().parent_path() / "share/zenith/web"};
}

}  // namespace

std::string find_web_dir() {
  std::error_code ec;
  for (const auto& c : web_dir_candidates())
    if (fs::is_regular_file(c / "index.html", ec)) return fs::canonical(c, ec).string();
  return "";
}

std::string missing_web_dir_message() {
  std::string where;
  for (const auto& c : web_dir_candidates()) where += (where.empty() ? "" : " or ") + c.string();
  const bool env = std::getenv("ZENITH_WEB_DIR") && *std::getenv("ZENITH_WEB_DIR");
  return "no index.html in " + (env ? "ZENITH_WEB_DIR (" + where + ")" : where) +
         "; build it with `scripts/build.sh release --target zenith_web` (needs node and npm)";
}

Dashboard::Dashboard(JobManager& jobs) : jobs_(jobs), web_dir_(find_web_dir()) {
  store_ = std::make_unique<TelemetryStore>(jobs_.options().data_dir + "/zenith.db");
  jobs_.add_prune_hook([this](std::int64_t id) { store_->prune_job(id); });
  ingest_ = std::make_unique<TelemetryIngest>(jobs_, *store_);
  ingest_->start();
}

Dashboard::~Dashboard() = default;

std::string Dashboard::metrics_text() { return ingest_->metrics_text(); }

void Dashboard::add_routes(httplib::Server& server) {
  // The job named by the path's first capture (digits only), or a 404 already written.
  auto job_of = [this](const httplib::Request& req,
                       httplib::Response& res) -> std::optional<JobRecord> {
    const std::string text = req.matches[1].str();
    std::optional<JobRecord> job;
    if (!text.empty() && text.size() < 18 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
      job = jobs_.get(std::stoll(text));
    if (!job) reply_error(res, 404, "[dashboard] no job with id '" + text + "'");
    return job;
  };

  // --- the pages.
  server.Get("/", [this](const httplib::Request&, httplib::Response& res) {
    if (web_dir_.empty()) {
      res.set_content("<!doctype html><title>zenith</title><p>The dashboard is not built: " +
                          html_escape(missing_web_dir_message()) +
                          ". The API is at <code>/api/v1/</code>.</p>\n",
                      "text/html; charset=utf-8");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_content(read_file(web_dir_ + "/index.html"), "text/html; charset=utf-8");
  });
  server.Get(R"(/ui/([A-Za-z0-9_.\-/]+))",
             [this](const httplib::Request& req, httplib::Response& res) {
               const std::string rel = req.matches[1].str();
               std::error_code ec;
               const fs::path path = fs::weakly_canonical(fs::path(web_dir_) / rel, ec);
               const std::string p = path.string();
               if (web_dir_.empty() || ec || rel.find("..") != std::string::npos ||
                   p.rfind(web_dir_ + "/", 0) != 0 || !fs::is_regular_file(path, ec))
                 return reply_error(res, 404, "[dashboard] no such file: " + rel);
               res.set_header("Cache-Control", "no-cache");
               res.set_content(read_file(p), content_type(p));
             });

  // --- the API behind them.
  server.Get("/api/v1/dashboard/session", [=](const httplib::Request& req, httplib::Response& res) {
    reply_json(res, 200, {{"ok", true}, {"time", now_seconds()}, {"role", request_role(req)}});
  });
  server.Get(
      "/api/v1/dashboard/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
        std::optional<JobState> state;
        if (req.has_param("state") && !req.get_param_value("state").empty()) {
          state = job_state_from_string(req.get_param_value("state"));
          if (!state)
            return reply_error(res, 400,
                               "[dashboard] unknown state '" + req.get_param_value("state") +
                                   "' (pending, running, succeeded, failed, cancelled, lost)");
        }
        auto jobs = jobs_.list(state);
        json out = json::array();
        for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
          json j = job_to_json(*it);
          j.erase("spec");
          j["devices_requested"] = it->spec.ranks();
          j["duration"] = duration_of(*it);
          auto loss = store_->last_value(it->id, "loss");
          if (!loss) loss = store_->last_value(it->id, "epoch_loss");
          j["last_loss"] = loss ? json(*loss) : json(nullptr);
          out.push_back(std::move(j));
        }
        reply_json(res, 200, out);
      });
  server.Get(R"(/api/v1/dashboard/jobs/([^/]+))",
             [=, this](const httplib::Request& req, httplib::Response& res) {
               auto job = job_of(req, res);
               if (!job) return;
               json out = job_to_json(*job);
               out["yaml"] = job->yaml;
               out["duration"] = duration_of(*job);
               out["alerts"] = json::array();
               for (const auto& a : jobs_.alerts(job->id))
                 out["alerts"].push_back(alert_to_json(a));
               reply_json(res, 200, out);
             });
  server.Get(R"(/api/v1/dashboard/jobs/([^/]+)/series)",
             [=, this](const httplib::Request& req, httplib::Response& res) {
               auto job = job_of(req, res);
               if (!job) return;
               const std::size_t points = points_param(req);
               json series = json::array();
               for (const auto& [name, rank] : store_->series_names(job->id)) {
                 MetricSeries s = store_->series(job->id, name, rank, points);
                 series.push_back({{"name", s.name},
                                   {"rank", s.rank},
                                   {"total", s.total},
                                   {"step", columns(s.step)},
                                   {"epoch", columns(s.epoch)},
                                   {"value", columns(s.value)},
                                   {"time", columns(s.time)}});
               }
               reply_json(res, 200,
                          {{"job_id", job->id},
                           {"state", to_string(job->state)},
                           {"points", points},
                           {"series", series}});
             });
  server.Get(R"(/api/v1/dashboard/jobs/([^/]+)/usage)", [=, this](const httplib::Request& req,
                                                                  httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    json ranks = json::array();
    for (const UsageSeries& u : store_->usage(job->id, points_param(req)))
      ranks.push_back({{"rank", u.rank},
                       {"device", u.device},
                       {"total", u.total},
                       {"time", columns(u.time)},
                       {"cpu_utilization", columns(u.cpu_utilization)},
                       {"memory_bytes", columns(u.memory_bytes)},
                       {"gpu_utilization", columns(u.gpu_utilization)},
                       {"gpu_memory_bytes", columns(u.gpu_memory_bytes)}});
    reply_json(res, 200,
               {{"job_id", job->id}, {"device_kind", job->device_kind}, {"ranks", ranks}});
  });
  server.Get(R"(/api/v1/dashboard/jobs/([^/]+)/logs)", [=, this](const httplib::Request& req,
                                                                 httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    const std::string rank_text = req.has_param("rank") ? req.get_param_value("rank") : "0";
    const bool digits = !rank_text.empty() && rank_text.size() < 9 &&
                        std::all_of(rank_text.begin(), rank_text.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    const int rank = digits ? std::atoi(rank_text.c_str()) : -1;
    if (rank < 0 || rank >= job->spec.ranks())
      return reply_error(res, 404,
                         "[dashboard] job " + std::to_string(job->id) + " has no rank '" +
                             rank_text + "' (ranks 0.." + std::to_string(job->spec.ranks() - 1) +
                             ")");
    const std::string path = jobs_.paths(job->id).rank_log(rank);
    std::error_code ec;
    const auto size = static_cast<std::int64_t>(fs::exists(path, ec) ? fs::file_size(path, ec) : 0);
    std::string text;
    std::int64_t next = size;
    if (req.has_param("offset")) {
      std::int64_t offset =
          std::clamp<std::int64_t>(std::atoll(req.get_param_value("offset").c_str()), 0, size);
      const std::int64_t n = std::min(kMaxLogChunk, size - offset);
      std::ifstream in(path, std::ios::binary);
      in.seekg(offset);
      text.resize(static_cast<std::size_t>(n));
      in.read(text.data(), n);
      text.resize(static_cast<std::size_t>(in.gcount()));
      next = offset + static_cast<std::int64_t>(text.size());
    } else {
      int n = req.has_param("tail") ? std::atoi(req.get_param_value("tail").c_str()) : 200;
      for (const auto& l : tail_lines(path, std::clamp(n, 1, 10000))) text += l + "\n";
    }
    reply_json(res, 200,
               {{"job_id", job->id},
                {"rank", rank},
                {"text", text},
                {"offset", next},
                {"size", size},
                {"ended", is_terminal(job->state)}});
  });
  // The profile's files, or a 404 already written.
  auto profile_file = [this](const JobRecord& job, const char* name,
                             httplib::Response& res) -> std::optional<std::string> {
    const std::string path = jobs_.paths(job.id).profile_dir() + "/" + name;
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return path;
    reply_error(res, 404,
                "[dashboard] job " + std::to_string(job.id) +
                    " has no profile (run `zenith train` with --profile STEPS)");
    return std::nullopt;
  };
  server.Get(R"(/api/v1/dashboard/jobs/([^/]+)/profile)", [=, this](const httplib::Request& req,
                                                                    httplib::Response& res) {
    auto job = job_of(req, res);
    if (!job) return;
    auto path = profile_file(*job, "summary.json", res);
    if (!path) return;
    json summary = json::parse(read_file(*path), nullptr, false);
    if (summary.is_discarded())
      return reply_error(res, 500, "[dashboard] the job's profile summary is malformed");
    std::error_code ec;
    const auto trace = jobs_.paths(job->id).profile_dir() + "/trace.json";
    summary["trace_bytes"] = fs::is_regular_file(trace, ec) ? fs::file_size(trace, ec) : 0;
    summary["job_id"] = job->id;
    reply_json(res, 200, summary);
  });
  server.Get(R"(/api/v1/dashboard/jobs/([^/]+)/profile/trace)",
             [=, this](const httplib::Request& req, httplib::Response& res) {
               auto job = job_of(req, res);
               if (!job) return;
               auto path = profile_file(*job, "trace.json", res);
               if (!path) return;
               res.set_header("Content-Disposition", "attachment; filename=\"job-" +
                                                         std::to_string(job->id) + "-trace.json\"");
               res.set_content(read_file(*path), "application/json");
             });
  server.Get(
      "/api/v1/dashboard/cluster", [=, this](const httplib::Request& req, httplib::Response& res) {
        std::map<std::int64_t, std::string> names;
        for (const auto& j : jobs_.list(JobState::Running)) names[j.id] = j.spec.name;
        const auto gpus = ingest_->gpus();
        json devices = json::array();
        for (const auto& d : jobs_.devices()) {
          json row = {{"index", d.device.index},
                      {"kind", d.device.kind},
                      {"name", d.device.name},
                      {"cores", d.device.cores.size()},
                      {"memory_total", d.device.memory_bytes},
                      {"job_id", d.job_id},
                      {"job_name", d.job_id ? names[d.job_id] : ""},
                      {"rank", d.rank},
                      {"utilization", d.utilization},
                      {"memory_used", d.memory_bytes}};
          if (d.device.kind == "cuda")
            if (auto g = gpus.find(d.device.index); g != gpus.end())
              row["gpu"] = {{"utilization", g->second.utilization},
                            {"memory_used", g->second.memory_used},
                            {"memory_total", g->second.memory_total}};
          devices.push_back(std::move(row));
        }
        json alerts = json::array();
        for (const auto& a : jobs_.recent_alerts(200)) alerts.push_back(alert_to_json(a));
        reply_json(res, 200, {{"devices", devices}, {"alerts", alerts}, {"nvml", !gpus.empty()}});
      });
}

}  // namespace zenith::platform
