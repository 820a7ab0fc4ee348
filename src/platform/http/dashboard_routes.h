// The monitoring dashboard inside `zenith server`: static pages at / (from the npm-built web
// dir), the JSON API behind them under /api/v1/dashboard/ (every call needs a token: the API's
// gate checks it),
// and the metrics ingestion that feeds it.
//
//   GET /                                      the single-page app (web dir's index.html)
//   GET /ui/<file>                             its scripts, styles and the charting library
//   GET /api/v1/dashboard/session              200 when the token is right (the login check),
//                                              with its role (admin or viewer)
//   GET /api/v1/dashboard/jobs[?state=S]       jobs, newest first, with duration and last loss
//   GET /api/v1/dashboard/jobs/{id}            one job with its alerts and spec YAML
//   GET /api/v1/dashboard/jobs/{id}/series?points=N   every logged scalar per rank, each
//                                              downsampled on the server to at most N points
//   GET /api/v1/dashboard/jobs/{id}/usage?points=N    per-rank device samples, downsampled
//   GET /api/v1/dashboard/jobs/{id}/logs?rank=R&offset=B&tail=N   a rank's log from byte B (or
//                                              its last N lines): {text, offset, size, ended}
//   GET /api/v1/dashboard/jobs/{id}/profile    the profiler's summary (step phases, top ops) of a
//                                              job run with --profile; 404 without one
//   GET /api/v1/dashboard/jobs/{id}/profile/trace   its Chrome trace, as a download
//   GET /api/v1/dashboard/cluster              devices with holders and use, GPUs, all alerts
//
// The web dir is $ZENITH_WEB_DIR when set (nothing else then), else share/zenith/web next to the
// zenith binary, else ../share/zenith/web from it (an installed tree).
#pragma once

#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace zenith::platform {

class JobManager;
class TelemetryStore;
class TelemetryIngest;

// The dashboard's web dir, or "" when none is found.
std::string find_web_dir();
// Why find_web_dir() found none (where it looked) and how to build the dashboard.
std::string missing_web_dir_message();

class Dashboard {
 public:
  // Opens the metrics tables in the job store file and starts ingesting.
  explicit Dashboard(JobManager& jobs);
  ~Dashboard();
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Registers the routes above; call before any catch-all route.
  void add_routes(httplib::Server& server);
  // Per job, rank and device series for the server's /metrics.
  std::string metrics_text();

 private:
  JobManager& jobs_;
  std::string web_dir_;
  std::unique_ptr<TelemetryStore> store_;
  std::unique_ptr<TelemetryIngest> ingest_;
};

}  // namespace zenith::platform
