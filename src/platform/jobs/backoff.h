// Restarts that back off: a job or service that keeps failing is restarted after 1 s, 2 s, 4 s,
// ... up to a cap, and a run that stayed up for a healthy period wipes the count.
#pragma once

namespace zenith::platform {

// The wait before restart number `attempt` (1, 2, ...): base_s * 2^(attempt - 1), at most cap_s.
double backoff_delay(int attempt, double base_s, double cap_s);

// How the server restarts failed jobs and managed services (`zenith server --restart-delay
// --max-restart-delay --healthy-after`).
struct RestartPolicy {
  double delay_s = 1;       // before the first restart; doubled per failure in a row
  double max_delay_s = 60;  // the cap
  double healthy_s = 60;    // a service up this long: its next exit counts as the first
  double delay(int attempt) const { return backoff_delay(attempt, delay_s, max_delay_s); }
};

// Consecutive crashes of something restarted: reset when it ran at least `healthy_s`.
struct CrashCounter {
  int crashes = 0;
  // Counts an exit after `uptime_s` of running; returns the crashes in a row, this one included.
  int on_exit(double uptime_s, double healthy_s) {
    crashes = uptime_s >= healthy_s ? 1 : crashes + 1;
    return crashes;
  }
};

}  // namespace zenith::platform
