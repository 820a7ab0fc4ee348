#include "platform/jobs/job.h"

#include <chrono>
#include <nlohmann/json.hpp>

namespace zenith::platform {

const char* to_string(JobState s) {
  switch (s) {
    case JobState::Pending:
      return "pending";
    case JobState::Running:
      return "running";
    case JobState::Succeeded:
      return "succeeded";
    case JobState::Failed:
      return "failed";
    case JobState::Cancelled:
      return "cancelled";
    case JobState::Lost:
      return "lost";
  }
  return "unknown";
}

std::optional<JobState> job_state_from_string(const std::string& t) {
  for (JobState s : {JobState::Pending, JobState::Running, JobState::Succeeded, JobState::Failed,
                     JobState::Cancelled, JobState::Lost})
    if (t == to_string(s)) return s;
  return std::nullopt;
}

bool is_terminal(JobState s) { return s != JobState::Pending && s != JobState::Running; }

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

nlohmann::json job_to_json(const JobRecord& j) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : j.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"device", r.device},
                     {"host", r.host},
                     {"pid", r.pid},
                     {"state", r.state},
                     {"exit_code", r.exit_code}});
  nlohmann::json out = {{"id", j.id},
                        {"name", j.spec.name},
                        {"state", to_string(j.state)},
                        {"backend", j.backend},
                        {"device_kind", j.device_kind},
                        {"devices", j.devices},
                        {"restart_count", j.restart_count},
                        {"reason", j.reason},
                        {"submitted_at", j.submitted_at},
                        {"started_at", j.started_at},
                        {"finished_at", j.finished_at},
                        {"external_id", j.external_id},
                        {"ranks", ranks},
                        {"spec", spec_to_json(j.spec)}};
  out["exit_code"] = j.exit_code ? nlohmann::json(*j.exit_code) : nlohmann::json(nullptr);
  return out;
}

nlohmann::json alert_to_json(const Alert& a) {
  return {{"id", a.id},
          {"job_id", a.job_id},
          {"kind", a.kind},
          {"message", a.message},
          {"created_at", a.created_at}};
}

}  // namespace zenith::platform
