// Reading a rank's log back as text: its last lines, for alerts, the API and the dashboard. A
// rank prints whatever bytes it likes; what comes back here is always valid UTF-8, so it can go
// into JSON (and the job store) as it is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zenith::platform {

// The last `n` lines of a log file, each as valid UTF-8 (see valid_utf8).
std::vector<std::string> tail_lines(const std::string& path, int n);

// True when one of the last lines looks like an out-of-memory failure.
bool looks_like_oom(const std::vector<std::string>& lines);

// What a failure reason adds for a rank out of memory: ": out of memory (limit 1.5Gi per
// rank): <the rank's last out-of-memory line>", the limit where the job has one (`memory`).
std::string oom_reason(std::int64_t memory_bytes, const std::vector<std::string>& lines);

// `text` with every byte that does not start a well-formed UTF-8 sequence (a stray 0xA9, a cut
// sequence, an overlong form, a surrogate) replaced by U+FFFD; valid text comes back unchanged.
std::string valid_utf8(std::string_view text);

}  // namespace zenith::platform
