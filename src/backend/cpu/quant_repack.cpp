// The repacked q4_0 and q8_0 layouts (quant_repack.h) and the kernel's cache of repacked copies.
#include "backend/cpu/quant_repack.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

namespace zenith::cpu {

void repack_x8(QuantFormat f, const uint8_t* w, int64_t out, int64_t in, uint8_t* packed) {
  const int64_t blocks = in / 32, block_bytes = quant_block_bytes(f);
  const int64_t row_bytes = blocks * block_bytes;
  for (int64_t g = 0; g < out / 8; ++g)
    for (int64_t b = 0; b < blocks; ++b, packed += x8_block_bytes(f))
      for (int r = 0; r < 8; ++r) {
        const uint8_t* src = w + (8 * g + r) * row_bytes + block_bytes * b;
        std::memcpy(packed + 2 * r, src, 2);
        // Four bytes at a time: a chunk's 4 bytes of row r.
        auto load4 = [](const uint8_t* q) {
          uint32_t v;
          std::memcpy(&v, q, 4);
          return v;
        };
        auto store4 = [&](int c, uint32_t v) { std::memcpy(packed + 16 + 32 * c + 4 * r, &v, 4); };
        const uint8_t* qs = src + 2;
        if (f == QuantFormat::q8_0) {
          for (int c = 0; c < 8; ++c) store4(c, load4(qs + 4 * c) ^ 0x80808080u);
          continue;
        }
        // Element k of the block: byte k's low nibble (k < 16), byte k - 16's high one.
        constexpr uint32_t kLow = 0x0F0F0F0Fu;
        for (int c = 0; c < 2; ++c)
          store4(c, (load4(qs + 8 * c) & kLow) | ((load4(qs + 8 * c + 4) & kLow) << 4));
        for (int c = 2; c < 4; ++c)
          store4(c, ((load4(qs + 8 * c - 16) >> 4) & kLow) | (load4(qs + 8 * c - 12) & ~kLow));
      }
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

}  // namespace zenith::cpu
