#include "core/allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
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
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t cached_bytes = 0;
  size_t limit = [] {
    const char* env = std::getenv("ZENITH_ALLOC_CACHE_MB");
    return (env ? size_t(std::atoll(env)) : size_t(2048)) << 20;
  }();
  int64_t hits = 0, misses = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: Storage may be freed during static teardown
  return *c;
}

std::atomic<int64_t> g_in_use{0};
std::atomic<int64_t> g_peak{0};

void count_allocation(size_t cls) {
  const int64_t now = g_in_use.fetch_add(int64_t(cls), std::memory_order_relaxed) + int64_t(cls);
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

void* cpu_allocate(size_t nbytes) {
  size_t cls = size_class(nbytes);
  if (kCacheEnabled) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_blocks.find(cls);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.cached_bytes -= cls;
      ++c.hits;
      count_allocation(cls);
      return p;
    }
    ++c.misses;
  }
  void* p = std::aligned_alloc(kAlign, cls);
  if (!p && kCacheEnabled) {  // memory is short: give the cache back and retry once
    empty_allocator_cache();
    p = std::aligned_alloc(kAlign, cls);
  }
  ZENITH_CHECK(p != nullptr, "[storage] out of memory allocating ", nbytes, " bytes");
  count_allocation(cls);
  return p;
}

void cpu_free(void* p, size_t nbytes) {
  if (!p) return;
  size_t cls = size_class(nbytes);
  g_in_use.fetch_sub(int64_t(cls), std::memory_order_relaxed);
  if (kCacheEnabled) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.cached_bytes + cls <= c.limit) {
      c.free_blocks[cls].push_back(p);
      c.cached_bytes += cls;
      return;
    }
  }
  std::free(p);
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.hits, c.misses, c.cached_bytes, allocated_bytes(), peak_allocated_bytes()};
}

int64_t allocated_bytes() { return g_in_use.load(std::memory_order_relaxed); }
int64_t peak_allocated_bytes() { return g_peak.load(std::memory_order_relaxed); }
void reset_peak_bytes() { g_peak.store(allocated_bytes(), std::memory_order_relaxed); }

void empty_allocator_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [cls, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.cached_bytes = 0;
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
