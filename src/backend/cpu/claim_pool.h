// Parallel loops for short, bandwidth-bound kernels (a decode step's GEMVs)
// where an OpenMP fork-join costs too much: its closing barrier waits for every thread of the
// team, and on a loaded machine a thread the scheduler has not run yet stalls the call for a
// whole time slice.
// Here the caller and helper threads claim items from a shared counter; the caller waits only
// for items a helper has claimed and not finished, never for a helper that has not started, so
// a call is never slower than the caller running it alone. Helpers spin briefly after each job
// (a decode step's next GEMV follows within microseconds), then sleep.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace zenith::cpu {

// Runs f(i) for every i in [0, count), on the calling thread and on up to `threads` - 1 helper
// threads (threads <= 0: omp_get_max_threads()). Serial inside an OpenMP region or a helper.
// f must not throw.
void parallel_claim(int64_t count, const std::function<void(int64_t)>& f, int threads = 0);

// How long a caller runs its calls alone after it waited `lag` for a helper's last items, having
// run its own at `per_item` each: zero when the wait is what finishing an item or two costs;
// else 20 times the lag, at most 50 ms. A helper descheduled for a time slice (milliseconds)
// keeps the caller alone for the whole 50 ms; a 100 us hiccup for 2 ms. So the time lost waiting
// stays within a twentieth of the time run alone.
std::chrono::nanoseconds alone_after_lag(std::chrono::nanoseconds lag,
                                         std::chrono::nanoseconds per_item);

}  // namespace zenith::cpu
