// The CPU allocator behind Storage: 64-byte aligned blocks, kept in a cache by size class when
// freed and handed out again. A training step that allocates the same activations every
// iteration so stops paying for page faults and the kernel's zeroing of fresh pages (a large
// share of a small CNN's step) and for glibc's slow aligned allocation of small blocks.
// ZENITH_ALLOC_CACHE_MB bounds the cached bytes (default 2048; 0 disables the cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zenith/device.h"

namespace zenith::core {

void* cpu_allocate(size_t nbytes);
void cpu_free(void* p, size_t nbytes);

struct AllocatorStats {
  int64_t hits = 0;            // allocations served from the cache
  int64_t misses = 0;          // allocations that went to the system
  size_t cached_bytes = 0;     // held in the cache now
  size_t live_bytes = 0;       // handed out and not yet freed (size classes), arenas included
  size_t peak_live_bytes = 0;  // the most live_bytes since the last reset_peak_live_bytes()
  // The most live_bytes + cached_bytes (all this allocator holds from the system) since the
  // last reset: above peak_live_bytes by the cached blocks no allocation at the peak could use.
  size_t peak_held_bytes = 0;
};
AllocatorStats allocator_stats();
// Returns every cached block to the system.
void empty_allocator_cache();
// Starts a new peak: peak_live_bytes = live_bytes, peak_held_bytes = live + cached bytes.
void reset_peak_live_bytes();

// ---- graph replay's memory plan (src/graph/memory_plan.cpp)
// An arena: one block whose parts a plan hands out; cpu_free never releases memory inside it.
// arena_free while parts of it are still held releases it with the last of them.
void* arena_allocate(size_t nbytes);
void arena_free(void* base);
// Blocks of the arena at `base` handed out by a plan and not yet freed (0 for an unknown base).
int64_t arena_held_blocks(const void* base);
// While set on this thread, the next CPU allocations are served in order from the arena at
// `base`: allocation i at base + offsets[i] when its size is sizes[i]; offsets[i] < 0 sends it
// to the cache. The first allocation that does not match ends the plan (diverged = true).
struct ArenaPlan {
  char* base = nullptr;
  std::vector<int64_t> offsets;
  std::vector<size_t> sizes;
  size_t next = 0;
  bool diverged = false;
};
void set_arena_plan(ArenaPlan* plan);  // null: none
// Told of every CPU allocation and free on this thread while set (planning records a replay).
struct AllocationObserver {
  void (*allocated)(void* user, void* p, size_t nbytes) = nullptr;
  void (*freed)(void* user, void* p) = nullptr;
  void* user = nullptr;
};
void set_allocation_observer(const AllocationObserver* observer);  // null: none

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
