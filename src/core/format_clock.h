// A duration as a clock reads it, for ETAs: "4:05", "1:02:03"; "?" when unknown (negative or
// not finite). The platform's format_duration ("1h02m03s") is for settings, this for progress.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace zenith {

inline std::string format_clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = int64_t(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

}  // namespace zenith
