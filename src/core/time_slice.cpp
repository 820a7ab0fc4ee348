#include "core/time_slice.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace zenith::core {
namespace {

// The slice asked for: 20 ms, long beside the default (0.75 ms times 1 + log2 of the CPUs) and
// within the kernel's range (0.1-100 ms).
constexpr uint64_t kLongSliceNs = 20'000'000;

std::atomic<bool> g_long{false};  // use_long_time_slices() was called
thread_local bool t_taken = false;

// The kernel's struct sched_attr (linux/sched/types.h), which glibc 2.36 does not declare.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
  uint32_t sched_util_min, sched_util_max;
};

bool get_attr(SchedAttr& a) {
  a = {};
  return syscall(SYS_sched_getattr, 0, &a, unsigned(sizeof a), 0u) == 0;
}

}  // namespace

void use_long_time_slices() {
  g_long.store(true, std::memory_order_relaxed);
  // The calling thread and its OpenMP team's threads (the prefill kernels' parallel loops).
#pragma omp parallel
  take_long_time_slice();
}

bool long_time_slices() { return g_long.load(std::memory_order_relaxed); }

void take_long_time_slice() {
  if (t_taken || !long_time_slices()) return;
  t_taken = true;  // once a thread, whatever the kernel answers
  SchedAttr a;
  if (!get_attr(a) || (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH)) return;
  a.size = sizeof a;
  a.sched_flags = 0;  // policy and nice as they are (from get_attr), the slice changed
  a.sched_runtime = kLongSliceNs;
  syscall(SYS_sched_setattr, 0, &a, 0u);
}

long long time_slice_ns() {
  SchedAttr a;
  return get_attr(a) ? static_cast<long long>(a.sched_runtime) : 0;
}

}  // namespace zenith::core
