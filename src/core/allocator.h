// The CPU allocator behind Storage: 64-byte aligned blocks, kept in a cache by size class when
// freed and handed out again. A training step that allocates the same activations every
// iteration so stops paying for page faults and the kernel's zeroing of fresh pages (10 ms of a
// 17 ms SeedCNN step on this VM) and for glibc's slow aligned allocation of small blocks.
// ZENITH_ALLOC_CACHE_MB bounds the cached bytes (default 2048; 0 disables the cache).
#pragma once

#include <cstddef>
#include <cstdint>

#include "zenith/device.h"

namespace zenith::core {

void* cpu_allocate(size_t nbytes);
void cpu_free(void* p, size_t nbytes);

struct AllocatorStats {
  int64_t hits = 0;          // allocations served from the cache
  int64_t misses = 0;        // allocations that went to the system
  size_t cached_bytes = 0;   // held in the cache now
  int64_t in_use_bytes = 0;  // handed out and not yet freed (by size class)
  int64_t peak_bytes = 0;    // the most in use at once since the last reset_peak_bytes()
};
AllocatorStats allocator_stats();
// Bytes of CPU memory handed out and not yet freed (a lock-free read, for the profiler's memory
// counter), and the peak since reset_peak_bytes().
int64_t allocated_bytes();
int64_t peak_allocated_bytes();
void reset_peak_bytes();
// Returns every cached block to the system.
void empty_allocator_cache();

// The allocator of a non-CPU device type (Storage asks it for that device's memory). A backend
// registers one when it loads; without one, allocating on the device fails.
struct DeviceAllocator {
  void* (*allocate)(size_t nbytes) = nullptr;
  void (*free)(void* p, size_t nbytes) = nullptr;
};
void set_device_allocator(DeviceType type, DeviceAllocator allocator);
// Memory for `nbytes` on `type`, and its release (cpu_allocate / cpu_free for the CPU).
void* device_allocate(DeviceType type, size_t nbytes);
void device_free(DeviceType type, void* p, size_t nbytes);

}  // namespace zenith::core
