#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "zenith/tensor.h"

using namespace zenith;

TEST(Allocator, LargeBlocksAreReusedAndAligned) {
  core::empty_allocator_cache();
  void* a = core::cpu_allocate(1 << 20);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, 1 << 20);
  core::cpu_free(a, 1 << 20);
  auto before = core::allocator_stats();
  void* b = core::cpu_allocate((1 << 20) - 100);  // same size class
#if !defined(__SANITIZE_ADDRESS__)                // sanitizer builds bypass the cache
  EXPECT_GE(before.cached_bytes, size_t(1) << 20);
  EXPECT_EQ(b, a);
  EXPECT_EQ(core::allocator_stats().hits, before.hits + 1);
#endif
  core::cpu_free(b, (1 << 20) - 100);
  core::empty_allocator_cache();
  EXPECT_EQ(core::allocator_stats().cached_bytes, 0u);
}

TEST(Allocator, SmallBlocksAreAlignedAndCached) {
  core::empty_allocator_cache();
  void* a = core::cpu_allocate(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  core::cpu_free(a, 100);
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(core::allocator_stats().cached_bytes, 128u);
  EXPECT_EQ(core::cpu_allocate(128), a);
  core::cpu_free(a, 128);
#endif
  core::empty_allocator_cache();
}

TEST(Allocator, TensorsOfARepeatedShapeHitTheCache) {
  Tensor::empty({64, 32, 26, 26});  // allocated and freed
  auto before = core::allocator_stats();
  for (int i = 0; i < 3; ++i) Tensor::empty({64, 32, 26, 26});
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(core::allocator_stats().hits, before.hits + 3);
#endif
}

// peak_held_bytes counts the cached blocks beside the live ones: a block of another size class
// cannot serve a new allocation, so both are resident at its peak.
TEST(Allocator, PeakHeldCountsCachedBlocksOfOtherSizes) {
  core::empty_allocator_cache();
  void* a = core::cpu_allocate(1 << 20);
  core::cpu_free(a, 1 << 20);
  core::reset_peak_live_bytes();
  const auto before = core::allocator_stats();
  void* b = core::cpu_allocate(3 << 20);
  const auto during = core::allocator_stats();
  EXPECT_EQ(during.peak_live_bytes, before.live_bytes + (3 << 20));
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(before.peak_held_bytes, before.live_bytes + (1 << 20));
  EXPECT_EQ(during.peak_held_bytes, before.live_bytes + (4 << 20));
#endif
  core::cpu_free(b, 3 << 20);
  core::empty_allocator_cache();
  core::reset_peak_live_bytes();
  EXPECT_EQ(core::allocator_stats().peak_held_bytes, core::allocator_stats().live_bytes);
}
