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
// POST needs "Authorization: Bearer <DATA/token>". Errors are {"error": "..."}.
#pragma once

#include <memory>
#include <string>

namespace zenith::platform {

class JobManager;

class ApiServer {
 public:
  ApiServer(JobManager& jobs, std::string token);
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
