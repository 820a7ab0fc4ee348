// Process-tree utilities for rank processes, from /proc: whether a process is still the one that
// was started, every process of a session or below a process, and killing or signalling them.
#pragma once

#include <sys/types.h>

#include <vector>

namespace zenith::platform {

// /proc/<pid>/stat field 22, 0 when the process does not exist.
long long process_start_time(pid_t pid);

// True while `pid` is alive and is still the process that started at `start_time`
// (a zombie counts as ended).
bool process_alive(pid_t pid, long long start_time);

// Every process whose session is `sid` (a rank's shim leads its session), from /proc.
std::vector<pid_t> session_processes(pid_t sid);

// Every descendant of `pid` (children, grandchildren, ...), from /proc. A rank's shim is a
// child subreaper, so processes that left its session are still found here while it lives.
std::vector<pid_t> descendants(pid_t pid);

// SIGKILLs every other process of the shim's session and every descendant of the shim; the
// shim itself is left to the caller (which kills and reaps it).
void kill_rank_tree(pid_t shim);

// Sends `sig` to every process of the session.
void signal_session(pid_t sid, int sig);

}  // namespace zenith::platform
