// A loaded model's weights in one block of transparent huge pages (models/llama_pages.h).
#include "models/llama_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace zenith::models {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kPage = 4096;
// Storages of at least this many bytes start on a page of their own, so that releasing one
// returns whole pages; smaller ones are packed at the allocator's 64-byte alignment.
constexpr size_t kPageAlignedBytes = size_t(64) << 10;
// The old copies go back to the system whenever the allocator's cache holds this much of them,
// so moving the weights adds little to the process's peak memory.
constexpr size_t kCacheFlushBytes = size_t(8) << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// An anonymous mapping starting on a huge-page boundary, advised for huge pages; unmapped with
// the last tensor placed in it.
class HugePageRegion {
 public:
  static std::shared_ptr<HugePageRegion> map(size_t bytes) {
    const size_t size = round_up(bytes, kHugePage);
    // One huge page more than needed, then the unaligned ends are unmapped.
    void* p = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (p == MAP_FAILED) return nullptr;
    char* raw = static_cast<char*>(p);
    char* base = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePage));
    if (base > raw) ::munmap(raw, size_t(base - raw));
    ::munmap(base + size, kHugePage - size_t(base - raw));
    ::madvise(base, size, MADV_HUGEPAGE);  // where THP is off, 4 KiB pages as before
    return std::shared_ptr<HugePageRegion>(new HugePageRegion(base, size));
  }
  ~HugePageRegion() { ::munmap(base_, size_); }
  HugePageRegion(const HugePageRegion&) = delete;
  HugePageRegion& operator=(const HugePageRegion&) = delete;
  char* base() const { return base_; }

 private:
  HugePageRegion(char* base, size_t size) : base_(base), size_(size) {}
  char* base_;
  size_t size_;
};

// The pages lying wholly inside [p, p + n) back to the system (a tensor released while the rest
// of the region lives on: a float weight replaced by its quantized blocks).
void release_pages(char* p, size_t n) {
  const auto begin = round_up(reinterpret_cast<uintptr_t>(p), kPage);
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / kPage * kPage;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// A storage to move and the tensors that use it.
struct Placement {
  Storage* storage;
  std::vector<TensorImpl*> users;
  size_t offset = 0;
};

}  // namespace

int64_t place_weights_in_huge_pages(Llama& model, int64_t min_bytes) {
  std::vector<Tensor> tensors;
  for (const auto& [name, p] : model.named_parameters()) tensors.push_back(p);
  for (const auto& [path, layer] : model.linear_layers())
    if (const QuantizedWeight* q = layer->quantized_weight()) tensors.push_back(q->blocks);
  // Storages in model order, each with its distinct users.
  std::vector<Placement> placements;
  std::unordered_map<Storage*, size_t> index;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.device() != kCPU || t.has_layout() || !t.storage() ||
        t.storage()->nbytes() == 0)
      continue;
    Storage* s = t.storage().get();
    auto [it, fresh] = index.emplace(s, placements.size());
    if (fresh) placements.push_back({s, {}});
    std::vector<TensorImpl*>& users = placements[it->second].users;
    if (std::find(users.begin(), users.end(), &t.impl()) == users.end()) users.push_back(&t.impl());
  }
  // A storage that a tensor outside the model also holds stays where it is: moving it would
  // part the two.
  size_t total = 0;
  std::erase_if(placements, [](const Placement& p) {
    return p.users.front()->storage.use_count() != long(p.users.size());
  });
  for (Placement& p : placements) {
    const size_t n = p.storage->nbytes();
    p.offset = round_up(total, n >= kPageAlignedBytes ? kPage : 64);
    total = p.offset + n;
  }
  if (placements.empty() || int64_t(total) < min_bytes) return 0;
  std::shared_ptr<HugePageRegion> region = HugePageRegion::map(total);
  if (!region) return 0;
  for (const Placement& p : placements) {
    char* dst = region->base() + p.offset;
    const size_t n = p.storage->nbytes();
    std::memcpy(dst, p.storage->data(), n);
    auto moved =
        std::make_shared<Storage>(dst, n, kCPU, [region, dst, n] { release_pages(dst, n); });
    for (TensorImpl* user : p.users) user->storage = moved;  // the old storage is freed here
    if (core::allocator_stats().cached_bytes >= kCacheFlushBytes) core::empty_allocator_cache();
  }
  core::empty_allocator_cache();
  return int64_t(total);
}

}  // namespace zenith::models
