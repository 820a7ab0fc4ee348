// DistributedSampler: one rank's disjoint shard of a dataset, reshuffled each epoch with the
// same permutation on every rank.
#include <algorithm>
#include <mutex>
#include <numeric>

#include "data/seed.h"
#include "zenith/data.h"

namespace zenith::dataset {

namespace {

class DistributedSamplerNode : public DatasetNode {
 public:
  DistributedSamplerNode(NodePtr parent, int64_t num_shards, int64_t shard_id, bool shuffle,
                         uint64_t seed, uint64_t stream, std::string remainder)
      : parent_(std::move(parent)),
        shards_(num_shards),
        id_(shard_id),
        shuffle_(shuffle),
        seed_(seed),
        stream_(stream),
        remainder_(std::move(remainder)) {}

  int64_t size() const override {
    const int64_t n = parent_->size();
    if (remainder_ == "pad") return (n + shards_ - 1) / shards_;
    if (remainder_ == "drop") return n / shards_;
    return n > id_ ? (n - id_ + shards_ - 1) / shards_ : 0;  // "none"
  }
  Row get(int64_t index, int64_t epoch) const override {
    ZENITH_CHECK(index >= 0 && index < size(), "[DistributedSampler] index ", index,
                 " out of range [0, ", size(), ")");
    const int64_t n = parent_->size();
    int64_t position = (id_ + index * shards_) % n;  // wraps for the padding items
    int64_t item = shuffle_ ? (*permutation(epoch))[size_t(position)] : position;
    return parent_->get(item, epoch);
  }
  std::vector<std::string> column_names() const override { return parent_->column_names(); }
  int workers() const override { return parent_->workers(); }

 private:
  // The same Fisher-Yates from (seed, stream, epoch) as shuffle(); the last epoch's is cached.
  std::shared_ptr<const std::vector<int64_t>> permutation(int64_t epoch) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ && cached_epoch_ == epoch) return cached_;
    auto p = std::make_shared<std::vector<int64_t>>(size_t(parent_->size()));
    std::iota(p->begin(), p->end(), 0);
    std::mt19937_64 rng(detail::derive_seed({seed_, stream_, uint64_t(epoch)}));
    for (size_t i = p->size(); i > 1; --i) std::swap((*p)[i - 1], (*p)[rng() % i]);
    cached_ = p;
    cached_epoch_ = epoch;
    return p;
  }

  NodePtr parent_;
  int64_t shards_, id_;
  bool shuffle_;
  uint64_t seed_, stream_;
  std::string remainder_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const std::vector<int64_t>> cached_;
  mutable int64_t cached_epoch_ = -1;
};

}  // namespace

Dataset DistributedSampler(const Dataset& dataset, int64_t num_shards, int64_t shard_id,
                           const DistributedSamplerOptions& options) {
  ZENITH_CHECK(dataset.defined(), "[DistributedSampler] on an empty dataset");
  ZENITH_CHECK(num_shards > 0, "[DistributedSampler] num_shards must be positive, got ",
               num_shards);
  ZENITH_CHECK(shard_id >= 0 && shard_id < num_shards, "[DistributedSampler] shard_id ", shard_id,
               " out of range [0, ", num_shards, ")");
  ZENITH_CHECK(
      options.remainder == "pad" || options.remainder == "drop" || options.remainder == "none",
      "[DistributedSampler] unknown remainder '", options.remainder, "' (known: pad, drop, none)");
  ZENITH_CHECK(dataset.get_dataset_size() > 0, "[DistributedSampler] the dataset is empty");
  // The stream is the depth, as for shuffle(): one shard of one is exactly shuffle().
  return dataset.derived(std::make_shared<DistributedSamplerNode>(
      dataset.node(), num_shards, shard_id, options.shuffle,
      options.seed ? *options.seed : config::get_seed(), uint64_t(dataset.depth_),
      options.remainder));
}

}  // namespace zenith::dataset
