// The recording behind profiler::Profiler: while a session is live it is the dispatch observer
// (op begin/end) and the core range hooks; each thread appends to its own track, so recording
// takes no lock after a thread's first event.
#pragma once

#include "zenith/profiler.h"

namespace zenith::profiler::detail {

// Registers the hooks and starts a session; fails when one is live.
void start_session(const Options& options);
// Unregisters the hooks, waits for hooks in flight, ends the ranges and ops still open at this
// moment, and returns what was recorded.
Recording stop_session();
bool session_live();

}  // namespace zenith::profiler::detail
