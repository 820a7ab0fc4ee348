#include "distributed/stats.h"

#include <mutex>

namespace zenith::distributed {

namespace {

// Collectives take tens of microseconds at the least, so one mutex is cheap enough.
std::mutex& stats_mutex() {
  static std::mutex m;
  return m;
}
communication::Stats& stats_data() {
  static communication::Stats s;
  return s;
}

}  // namespace

void record_collective(const std::string& op, uint64_t bytes_sent, uint64_t bytes_received,
                       double seconds, bool failed) {
  std::lock_guard<std::mutex> lock(stats_mutex());
  auto& s = stats_data();
  s.calls += 1;
  s.bytes_sent += bytes_sent;
  s.bytes_received += bytes_received;
  s.seconds += seconds;
  s.failures += failed ? 1 : 0;
  auto& o = s.by_op[op];
  o.calls += 1;
  o.bytes_sent += bytes_sent;
  o.bytes_received += bytes_received;
  o.seconds += seconds;
}

communication::Stats stats_snapshot() {
  std::lock_guard<std::mutex> lock(stats_mutex());
  return stats_data();
}

void reset_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex());
  stats_data() = communication::Stats{};
}

}  // namespace zenith::distributed
