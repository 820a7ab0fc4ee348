// Small helpers shared by the communication sources.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace zenith::distributed {

using Clock = std::chrono::steady_clock;

// 5000ms -> "5 s", 1500ms -> "1.5 s", 250ms -> "0.25 s".
inline std::string format_seconds(std::chrono::duration<double> d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", d.count());
  return buf;
}

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace zenith::distributed
