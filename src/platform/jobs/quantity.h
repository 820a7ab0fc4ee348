// Quantities in job specs: sizes ("64Gi", "512M", "1.5Ti") and durations ("90s", "2h30m").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zenith::platform {

// Bytes from a Kubernetes-style size: plain bytes, decimal (k, M, G, T, P) or binary
// (Ki, Mi, Gi, Ti, Pi) suffix, optional trailing "B". nullopt when malformed or negative.
std::optional<std::int64_t> parse_size(const std::string& text);

// Seconds from "45", "45s", "10m", "2h", "1d" or a sum like "1h30m". nullopt when malformed.
std::optional<double> parse_duration(const std::string& text);

// "64.0Gi", "512Mi", "100B": the largest binary unit that keeps the number >= 1.
std::string format_size(std::int64_t bytes);

// "1h02m03s", "4m05s", "12s"; below 10 s fractions show: "0.25s", "1.5s".
std::string format_duration(double seconds);

}  // namespace zenith::platform
