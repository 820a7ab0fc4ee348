// The REST API under /api/v1/ and Prometheus /metrics, served with cpp-httplib.
//
//   GET  /api/v1/jobs[?state=running]      list
//   POST /api/v1/jobs                      submit: {"yaml": "<job yaml>", "source": "job.yaml",
//                                          "base_dir": "/dir"} or the spec itself as JSON
//                                          ({"job": {...}}); 201 with the job
//   GET  /api/v1/jobs/{id}                 one job, with its alerts
//   POST /api/v1/jobs/{id}/cancel          stop it (kills the whole process tree)
//   GET  /api/v1/jobs/{id}/logs?rank=N&follow=1&tail=N   rank N's log (default rank 0, the job
//                                          log); follow streams with chunked transfer
//   GET  /api/v1/jobs/{id}/metrics         per-rank utilisation and memory while it runs
//   GET  /api/v1/devices                   inventory, holders, utilisation, memory
//   GET  /api/v1/alerts[?job=ID]
//   GET  /metrics
//   GET  /healthz                          (no token)
// Every route but /healthz and the dashboard's static shell needs "Authorization: Bearer
// <token>": the admin token in DATA/token, or a platform token made with `zenith token create
// --role admin|viewer`; a viewer token may only read (GET), and not the token list. Requests
// are bounded before their body is read (http_guard.h). Errors are {"error": "..."}.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace zenith::platform {

class JobManager;

struct ApiServerOptions {
  std::string admin_token;         // DATA/token
  std::string cert, key;           // PEM files: HTTPS; both empty: plain HTTP
  std::vector<std::string> hosts;  // names accepted in the Host header besides the defaults
  std::size_t max_body_bytes = 4 << 20;
};

class ApiServer {
 public:
  ApiServer(JobManager& jobs, ApiServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0 = any free port) and returns the bound port; throws on failure.
  int bind(const std::string& host, int port);
  // Serves until stop(); blocks.
  void serve();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zenith::platform
