// The repacked q4_0, q8_0 and q4_K layouts (quant_repack.h) and the kernel's cache of repacked
// copies.
#include "backend/cpu/quant_repack.h"

#include <mutex>
#include <unordered_map>

#include "core/quant_x8.h"

namespace zenith::cpu {

void repack_x8(QuantFormat f, const uint8_t* w, int64_t out, int64_t in, uint8_t* packed) {
  quant_x8_pack(f, w, out, in, packed);
}

namespace {

// Keyed by the blocks' address; the weak pointer tells a live storage from a freed one whose
// address was reused.
struct CacheEntry {
  std::weak_ptr<Storage> storage;
  QuantFormat format;
  int64_t out, in;
  std::shared_ptr<const std::vector<uint8_t>> packed;
};

std::mutex cache_mutex;
std::unordered_map<const void*, CacheEntry>& cache() {
  static auto* entries = new std::unordered_map<const void*, CacheEntry>();  // never destroyed
  return *entries;
}

// What core's quant_x8_preferred asks (pack_for_inference's choice): the kernels' own test.
const bool probe_registered = [] {
  set_quant_x8_probe([](QuantFormat f, int64_t out) { return x8_applies(quant_isa(), f, out); });
  return true;
}();

bool same_storage(const std::weak_ptr<Storage>& a, const std::shared_ptr<Storage>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace

std::shared_ptr<const std::vector<uint8_t>> x8_copy(const Tensor& blocks, QuantFormat f,
                                                    int64_t out, int64_t in) {
  const uint8_t* data = blocks.data<uint8_t>();
  const std::shared_ptr<Storage>& storage = blocks.storage();
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto& entries = cache();
  auto it = entries.find(data);
  if (it != entries.end() && !it->second.storage.expired() &&
      same_storage(it->second.storage, storage) && it->second.format == f &&
      it->second.out == out && it->second.in == in)
    return it->second.packed;
  // A miss: drop the copies of freed weights, then repack this one.
  for (auto e = entries.begin(); e != entries.end();)
    e = e->second.storage.expired() ? entries.erase(e) : std::next(e);
  auto packed =
      std::make_shared<std::vector<uint8_t>>(size_t(out / 8 * in / 32 * x8_block_bytes(f)));
  repack_x8(f, data, out, in, packed->data());
  entries[data] = CacheEntry{storage, f, out, in, packed};
  return packed;
}

void x8_drop(const Tensor& blocks) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto it = cache().find(blocks.data<uint8_t>());
  if (it != cache().end() && same_storage(it->second.storage, blocks.storage())) cache().erase(it);
}

int64_t x8_cached_bytes() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  int64_t bytes = 0;
  for (const auto& [data, e] : cache())
    if (!e.storage.expired()) bytes += int64_t(e.packed->size());
  return bytes;
}

}  // namespace zenith::cpu
