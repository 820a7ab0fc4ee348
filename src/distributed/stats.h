// Process-wide communication counters behind communication::stats().
#pragma once

#include <cstdint>
#include <string>

#include "zenith/communication.h"

namespace zenith::distributed {

void record_collective(const std::string& op, uint64_t bytes_sent, uint64_t bytes_received,
                       double seconds, bool failed);
communication::Stats stats_snapshot();
void reset_stats();

}  // namespace zenith::distributed
