#include "core/allocator.h"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <mutex>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unordered_map>
#include <vector>

#include "zenith/error.h"

namespace zenith::core {
namespace {

constexpr size_t kAlign = 64;

// Sanitizer builds bypass the cache so use-after-free stays detectable.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif

// Size classes in steps of 1/8 of a power of two (at least 64 bytes): at most 12.5% slack.
size_t size_class(size_t n) {
  if (n <= kAlign) return kAlign;
  size_t p = size_t(1) << (63 - __builtin_clzll(n));
  size_t step = std::max(p / 8, kAlign);
  return (n + step - 1) / step * step;
}

struct Cache {
  std::mutex mu;
  // A freed block and when it was freed (seq counts frees): eviction takes the oldest first.
  struct Block {
    void* p;
    uint64_t seq;
  };
  struct SizeClass {
    std::vector<Block> blocks;  // oldest first
    int64_t last_used = -1;     // the allocation (hits + misses) that last asked for it; -1 none
  };
  std::unordered_map<size_t, SizeClass> free_blocks;  // by size class
  uint64_t seq = 0;
  // The longest a size class waited between two allocations of it (counted in allocations): a
  // loop of repeated shapes asks for each of its classes again within it.
  int64_t reuse_gap = 0;
  size_t cached_bytes = 0;
  size_t limit = [] {
    const char* env = std::getenv("ZENITH_ALLOC_CACHE_MB");
    return (env ? size_t(std::atoll(env)) : size_t(2048)) << 20;
  }();
  int64_t hits = 0, misses = 0;
  size_t live = 0, peak = 0, peak_held = 0;
  size_t high_water = 0;  // the most live bytes since empty_allocator_cache()
  // [base, base + size); live: its blocks handed out and not yet freed. An arena freed while
  // blocks of it are still held (a replay's outputs) is retired and released with the last.
  struct Arena {
    char* base;
    size_t size;
    int64_t live = 0;
    bool retired = false;
  };
  std::vector<Arena> arenas;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: Storage may be freed during static teardown
  return *c;
}

thread_local ArenaPlan* g_plan = nullptr;
thread_local const AllocationObserver* g_observer = nullptr;

void count_live(Cache& c, size_t bytes) {
  c.live += bytes;
  c.peak = std::max(c.peak, c.live);
  c.peak_held = std::max(c.peak_held, c.live + c.cached_bytes);
}

Cache::Arena* arena_of(Cache& c, const void* p) {
  for (auto& a : c.arenas)
    if (p >= a.base && p < a.base + a.size) return &a;
  return nullptr;
}

// A block of an arena comes back: the arena's plan owns the memory; a retired arena goes with
// its last block. Returns whether p was in an arena. Called with c.mu held.
bool free_in_arena(Cache& c, void* p) {
  if (c.arenas.empty()) return false;
  Cache::Arena* a = arena_of(c, p);
  if (!a) return false;
  a->live -= 1;
  if (a->retired && a->live <= 0) {
    char* base = a->base;
    c.live -= std::min(c.live, a->size);
    c.arenas.erase(c.arenas.begin() + (a - c.arenas.data()));
    std::free(base);
  }
  return true;
}

// The next allocation of the plan on this thread, or null (not planned, or the plan ended).
void* from_plan(size_t nbytes) {
  ArenaPlan& plan = *g_plan;
  if (plan.diverged) return nullptr;
  if (plan.next >= plan.sizes.size() || plan.sizes[plan.next] != nbytes) {
    plan.diverged = true;
    return nullptr;
  }
  int64_t offset = plan.offsets[plan.next++];
  if (offset < 0) return nullptr;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (Cache::Arena* a = arena_of(c, plan.base)) a->live += 1;
  return plan.base + offset;
}

// What was asked, what this process holds in tensors and the limit it ran into, if any.
[[noreturn]] void out_of_memory(size_t nbytes) {
  const double mib = 1 << 20;
  const AllocatorStats s = allocator_stats();
  std::string limit;
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    limit = detail::concat("; its address-space limit (RLIMIT_AS) is ",
                           std::llround(double(rl.rlim_cur) / mib), " MiB");
  ZENITH_FAIL("[storage] out of memory allocating ", nbytes, " bytes (",
              std::llround(double(nbytes) / mib), " MiB) for a tensor: this process holds ",
              std::llround(double(s.live_bytes) / mib), " MiB of tensors", limit);
}

// A miss of `cls` bytes is about to go to the system. While this allocator would then hold more
// than the most ever live at once, cached blocks of stale size classes (not asked for within
// the longest gap seen between two requests of one class) go back, the oldest first: batches padded
// each to its own length free blocks that fit no later size class, and these would otherwise pile
// up to the cache limit. A loop of repeated shapes asks for each of its classes again within that
// gap, so it keeps its blocks and its hits. Called with c.mu held.
void evict_stale(Cache& c, size_t cls) {
  c.high_water = std::max(c.high_water, c.live + cls);
  const int64_t now = c.hits + c.misses;
  while (c.cached_bytes > 0 && c.live + cls + c.cached_bytes > c.high_water) {
    auto oldest = c.free_blocks.end();
    for (auto it = c.free_blocks.begin(); it != c.free_blocks.end(); ++it) {
      const Cache::SizeClass& k = it->second;
      if (k.blocks.empty() || now - k.last_used <= c.reuse_gap) continue;
      if (oldest == c.free_blocks.end() || k.blocks.front().seq < oldest->second.blocks.front().seq)
        oldest = it;
    }
    if (oldest == c.free_blocks.end()) return;  // every cached class is still in use
    std::vector<Cache::Block>& blocks = oldest->second.blocks;
    std::free(blocks.front().p);
    blocks.erase(blocks.begin());
    c.cached_bytes -= oldest->first;
  }
}

void* cache_allocate(size_t nbytes) {
  size_t cls = size_class(nbytes);
  Cache& c = cache();
  if (kCacheEnabled) {
    std::lock_guard<std::mutex> lock(c.mu);
    Cache::SizeClass& k = c.free_blocks[cls];
    const int64_t now = c.hits + c.misses;
    if (k.last_used >= 0) c.reuse_gap = std::max(c.reuse_gap, now - k.last_used);
    k.last_used = now;
    if (!k.blocks.empty()) {
      void* p = k.blocks.back().p;
      k.blocks.pop_back();
      c.cached_bytes -= cls;
      count_live(c, cls);
      ++c.hits;
      return p;
    }
    evict_stale(c, cls);
    count_live(c, cls);
    ++c.misses;
  }
  void* p = std::aligned_alloc(kAlign, cls);
  if (!p && kCacheEnabled) {  // memory is short: give the cache back and retry once
    empty_allocator_cache();
    p = std::aligned_alloc(kAlign, cls);
  }
  if (!p) {
    if (kCacheEnabled) {  // it was counted as live when it was asked for
      std::lock_guard<std::mutex> lock(c.mu);
      c.live -= std::min(c.live, cls);
    }
    out_of_memory(nbytes);
  }
  return p;
}

}  // namespace

void* cpu_allocate(size_t nbytes) {
  void* p = g_plan ? from_plan(nbytes) : nullptr;
  if (!p) p = cache_allocate(nbytes);
  if (g_observer) g_observer->allocated(g_observer->user, p, nbytes);
  return p;
}

void cpu_free(void* p, size_t nbytes) {
  if (!p) return;
  if (g_observer) g_observer->freed(g_observer->user, p);
  size_t cls = size_class(nbytes);
  Cache& c = cache();
  if (kCacheEnabled) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (free_in_arena(c, p)) return;
    c.live -= std::min(c.live, cls);
    if (c.cached_bytes + cls <= c.limit) {
      c.free_blocks[cls].blocks.push_back({p, c.seq++});
      c.cached_bytes += cls;
      return;
    }
  } else {
    std::lock_guard<std::mutex> lock(c.mu);
    if (free_in_arena(c, p)) return;
  }
  std::free(p);
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.hits, c.misses, c.cached_bytes, c.live, c.peak, c.peak_held};
}

void reset_peak_live_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.peak = c.live;
  c.peak_held = c.live + c.cached_bytes;
}

void* arena_allocate(size_t nbytes) {
  size_t size = std::max(size_class(nbytes), kAlign);
  char* p = static_cast<char*>(std::aligned_alloc(kAlign, size));
  ZENITH_CHECK(p != nullptr, "[storage] out of memory allocating an arena of ", nbytes, " bytes");
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.arenas.push_back({p, size});
  count_live(c, size);
  return p;
}

void arena_free(void* base) {
  if (!base) return;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = std::find_if(c.arenas.begin(), c.arenas.end(),
                         [&](const Cache::Arena& a) { return a.base == base; });
  ZENITH_CHECK(it != c.arenas.end(), "[allocator] arena_free of an unknown arena");
  if (it->live > 0) {  // blocks of it are still held: it goes with the last
    it->retired = true;
    return;
  }
  c.live -= std::min(c.live, it->size);
  c.arenas.erase(it);
  std::free(base);
}

int64_t arena_held_blocks(const void* base) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (const auto& a : c.arenas)
    if (a.base == base) return a.live;
  return 0;
}

void set_arena_plan(ArenaPlan* plan) { g_plan = plan; }

void set_allocation_observer(const AllocationObserver* observer) { g_observer = observer; }

void empty_allocator_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [cls, k] : c.free_blocks)
    for (const Cache::Block& b : k.blocks) std::free(b.p);
  c.free_blocks.clear();
  c.cached_bytes = 0;
  c.high_water = c.live;  // the cache's bound and what it counts as in use start again
  c.reuse_gap = 0;
#if defined(__GLIBC__)
  malloc_trim(0);  // blocks below the mmap threshold went to malloc's free lists, not the system
#endif
}

namespace {
std::array<DeviceAllocator, kDeviceTypeCount>& device_allocators() {
  static std::array<DeviceAllocator, kDeviceTypeCount> allocators{};
  return allocators;
}
}  // namespace

void set_device_allocator(DeviceType type, DeviceAllocator allocator) {
  ZENITH_CHECK(type != DeviceType::CPU, "[allocator] the CPU allocator is built in");
  device_allocators()[size_t(type)] = allocator;
}

void* device_allocate(DeviceType type, size_t nbytes) {
  if (type == DeviceType::CPU) return cpu_allocate(nbytes);
  const DeviceAllocator& a = device_allocators()[size_t(type)];
  ZENITH_CHECK(a.allocate != nullptr, "[storage] no allocator for ", device_type_name(type));
  return a.allocate(nbytes);
}

void device_free(DeviceType type, void* p, size_t nbytes) {
  if (type == DeviceType::CPU) return cpu_free(p, nbytes);
  device_allocators()[size_t(type)].free(p, nbytes);
}

}  // namespace zenith::core
