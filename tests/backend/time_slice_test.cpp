// core/time_slice.h: a serving engine's compute threads (the caller and the CPU backend's pool
// helpers) ask for a long scheduler slice. Kernels from 6.12 report a fair task's slice through
// sched_getattr (the default, 0.75 ms times 1 + log2 of the CPUs) and set it; older ones report
// 0 and ignore the request, which must then change nothing and fail nothing.
#include "core/time_slice.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "backend/cpu/claim_pool.h"

namespace zenith {
namespace {

constexpr long long kLong = 20'000'000;  // time_slice.cpp's request

TEST(TimeSlice, ComputeThreadsTakeTheLongSliceWhereTheKernelSetsSlices) {
  long long before = -1, after = -1;
  std::map<std::thread::id, long long> seen;  // each thread that ran an item: its slice
  std::thread([&] {
    before = core::time_slice_ns();
    EXPECT_FALSE(core::long_time_slices() && before == kLong) << "taken before it was asked";
    core::use_long_time_slices();
    after = core::time_slice_ns();
    // The pool's helpers take it from their next job. A helper may not join a given call (the
    // pool runs calls alone for a while after a helper lagged): a few calls, until one did.
    std::mutex mutex;
    for (int call = 0; call < 40 && seen.size() < 2; ++call)
      cpu::parallel_claim(
          64,
          [&](int64_t) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
            while (std::chrono::steady_clock::now() < until) {
            }
            std::lock_guard<std::mutex> lock(mutex);
            seen[std::this_thread::get_id()] = core::time_slice_ns();
          },
          2);
  }).join();
  EXPECT_TRUE(core::long_time_slices());
  ASSERT_GE(seen.size(), 2u) << "no pool helper ran an item in 40 calls";
  if (before > 0) {  // the kernel has per-task slices: every compute thread holds the long one
    EXPECT_NE(before, kLong);
    EXPECT_EQ(after, kLong);
    for (const auto& [id, slice] : seen) EXPECT_EQ(slice, kLong);
  } else {  // it has none: nothing changed
    EXPECT_EQ(after, before);
    for (const auto& [id, slice] : seen) EXPECT_EQ(slice, before);
  }
  // A thread that never asked keeps the default.
  long long other = -1;
  std::thread([&] { other = core::time_slice_ns(); }).join();
  EXPECT_EQ(other, before);
}

}  // namespace
}  // namespace zenith
