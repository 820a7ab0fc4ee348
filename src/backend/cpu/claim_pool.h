// Parallel loops for short, bandwidth-bound kernels (a decode step's GEMVs)
// where an OpenMP fork-join costs too much: its closing barrier waits for every thread of the
// team, and on a loaded machine a thread the scheduler has not run yet stalls the call for a
// whole time slice.
// Here the caller and helper threads claim items from a shared counter; the caller waits only
// for items a helper has claimed and not finished, never for a helper that has not started, so
// a call is never slower than the caller running it alone. Helpers spin briefly after each job
// (a decode step's next GEMV follows within microseconds), then sleep.
#pragma once

#include <cstdint>
#include <functional>

namespace zenith::cpu {

// Runs f(i) for every i in [0, count), on the calling thread and on up to `threads` - 1 helper
// threads (threads <= 0: omp_get_max_threads()). Serial inside an OpenMP region or a helper.
// f must not throw.
void parallel_claim(int64_t count, const std::function<void(int64_t)>& f, int threads = 0);

}  // namespace zenith::cpu
