// Long scheduler time slices for compute threads that share the host's cores with latency-bound
// ones (a server's HTTP writers, its clients on the same host).
//
// Linux's EEVDF scheduler lets a running task finish its slice before a task that wakes with the
// same slice takes its core; a task that wakes with a shorter slice preempts it at once (6.12+:
// sched_setattr's sched_runtime sets a task's slice). A serving engine's threads keep both cores
// of a small host busy while streams decode, so a stream's HTTP writer that wakes for a token
// waited for the end of the engine's slice, which can be longer than a small model's decode
// step (docs/performance.md, the serving note). With a long slice on the compute threads, the
// writer (and any other thread with the default slice) runs as soon as it wakes; the compute
// threads' share of the cores is unchanged (a slice sets how long a task runs at once, its weight
// how much in all). Kernels before 6.12 ignore the request.
#pragma once

namespace zenith::core {

// From now on, compute threads that call take_long_time_slice() ask for a long slice: the
// calling thread at once, the CPU backend's pool helpers from their next job.
void use_long_time_slices();
bool long_time_slices();  // whether use_long_time_slices() was called in this process
// Asks for the long slice on the calling thread, once, when long_time_slices(); else nothing.
void take_long_time_slice();
// The calling thread's slice as the kernel reports it, in nanoseconds (0 where it does not).
long long time_slice_ns();

}  // namespace zenith::core
