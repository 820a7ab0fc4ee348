// Pipeline nodes: map, shuffle, batch, repeat, take/slice, in-memory tensors; and ds.config.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <numeric>

#include "data/seed.h"
#include "zenith/data.h"

namespace zenith::dataset {

namespace config {
namespace {
std::atomic<uint64_t> g_seed{0};
std::atomic<int> g_workers{1};
std::atomic<int> g_prefetch{2};
}  // namespace
void set_seed(uint64_t seed) { g_seed = seed; }
uint64_t get_seed() { return g_seed; }
void set_num_parallel_workers(int n) {
  ZENITH_CHECK(n > 0, "[dataset] num_parallel_workers must be positive, got ", n);
  g_workers = n;
}
int get_num_parallel_workers() { return g_workers; }
void set_prefetch_size(int n) {
  ZENITH_CHECK(n > 0, "[dataset] prefetch_size must be positive, got ", n);
  g_prefetch = n;
}
int get_prefetch_size() { return g_prefetch; }
}  // namespace config

namespace {

void check_index(const char* node, int64_t index, int64_t size) {
  ZENITH_CHECK(index >= 0 && index < size, "[", node, "] index ", index, " out of range [0, ", size,
               ")");
}

// Wraps nodes that pass everything but get() through to their parent.
class ChildNode : public DatasetNode {
 public:
  explicit ChildNode(NodePtr parent) : parent_(std::move(parent)) {}
  int64_t size() const override { return parent_->size(); }
  std::vector<std::string> column_names() const override { return parent_->column_names(); }
  int workers() const override { return parent_->workers(); }

 protected:
  NodePtr parent_;
};

class MapNode : public ChildNode {
 public:
  MapNode(NodePtr parent, std::vector<TransformPtr> ops, size_t column, int workers, uint64_t seed,
          uint64_t stream)
      : ChildNode(std::move(parent)),
        ops_(std::move(ops)),
        column_(column),
        workers_(workers),
        seed_(seed),
        stream_(stream) {}
  Row get(int64_t index, int64_t epoch) const override {
    Row row = parent_->get(index, epoch);
    std::mt19937_64 rng(detail::derive_seed({seed_, stream_, uint64_t(epoch), uint64_t(index)}));
    for (const auto& op : ops_) row[column_] = op->apply(row[column_], rng);
    return row;
  }
  int workers() const override { return std::max(workers_, parent_->workers()); }

 private:
  std::vector<TransformPtr> ops_;
  size_t column_;
  int workers_;
  uint64_t seed_, stream_;
};

class ShuffleNode : public ChildNode {
 public:
  ShuffleNode(NodePtr parent, uint64_t seed, uint64_t stream)
      : ChildNode(std::move(parent)), seed_(seed), stream_(stream) {}
  Row get(int64_t index, int64_t epoch) const override {
    check_index("shuffle", index, size());
    return parent_->get((*permutation(epoch))[size_t(index)], epoch);
  }

 private:
  // Fisher-Yates from (seed, epoch); the last epoch's permutation is cached.
  std::shared_ptr<const std::vector<int64_t>> permutation(int64_t epoch) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ && cached_epoch_ == epoch) return cached_;
    auto p = std::make_shared<std::vector<int64_t>>(size_t(size()));
    std::iota(p->begin(), p->end(), 0);
    std::mt19937_64 rng(detail::derive_seed({seed_, stream_, uint64_t(epoch)}));
    for (size_t i = p->size(); i > 1; --i) std::swap((*p)[i - 1], (*p)[rng() % i]);
    cached_ = p;
    cached_epoch_ = epoch;
    return p;
  }
  uint64_t seed_, stream_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const std::vector<int64_t>> cached_;
  mutable int64_t cached_epoch_ = -1;
};

// Stacks same-shape tensors along a new leading dimension.
Tensor stack_column(const std::vector<Tensor>& items, const std::string& column, int64_t first) {
  const Tensor& ref = items[0];
  Shape shape = ref.shape();
  shape.insert(shape.begin(), int64_t(items.size()));
  Tensor out = Tensor::empty(shape, ref.dtype());
  const size_t bytes = ref.nbytes();
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor& t = items[i];
    ZENITH_CHECK(t.shape() == ref.shape() && t.dtype() == ref.dtype(), "[batch] column '", column,
                 "': item ", first + int64_t(i), " is ", dtype_name(t.dtype()), " ",
                 shape_str(t.shape()), " but item ", first, " is ", dtype_name(ref.dtype()), " ",
                 shape_str(ref.shape()), "; resize images to one size before batch()");
    Tensor c = t.contiguous();
    if (bytes) std::memcpy(dst + i * bytes, c.raw_data(), bytes);
  }
  return out;
}

class BatchNode : public ChildNode {
 public:
  BatchNode(NodePtr parent, int64_t batch_size, bool drop_remainder)
      : ChildNode(std::move(parent)), batch_(batch_size), drop_(drop_remainder) {}
  int64_t size() const override {
    int64_t n = parent_->size();
    return drop_ ? n / batch_ : (n + batch_ - 1) / batch_;
  }
  Row get(int64_t index, int64_t epoch) const override {
    check_index("batch", index, size());
    int64_t first = index * batch_;
    int64_t last = std::min(first + batch_, parent_->size());
    std::vector<Row> rows;
    rows.reserve(size_t(last - first));
    for (int64_t i = first; i < last; ++i) rows.push_back(parent_->get(i, epoch));
    auto names = column_names();
    Row out;
    for (size_t c = 0; c < rows[0].size(); ++c) {
      std::vector<Tensor> column;
      column.reserve(rows.size());
      for (auto& r : rows) column.push_back(std::move(r[c]));
      out.push_back(stack_column(column, c < names.size() ? names[c] : std::to_string(c), first));
    }
    return out;
  }

 private:
  int64_t batch_;
  bool drop_;
};

class RepeatNode : public ChildNode {
 public:
  RepeatNode(NodePtr parent, int64_t count) : ChildNode(std::move(parent)), count_(count) {}
  int64_t size() const override { return parent_->size() * count_; }
  Row get(int64_t index, int64_t epoch) const override {
    check_index("repeat", index, size());
    int64_t n = parent_->size();
    return parent_->get(index % n, epoch * count_ + index / n);
  }

 private:
  int64_t count_;
};

class SliceNode : public ChildNode {
 public:
  SliceNode(NodePtr parent, int64_t start, int64_t count)
      : ChildNode(std::move(parent)), start_(start), count_(count) {}
  int64_t size() const override { return count_; }
  Row get(int64_t index, int64_t epoch) const override {
    check_index("slice", index, count_);
    return parent_->get(start_ + index, epoch);
  }

 private:
  int64_t start_, count_;
};

class TensorNode : public DatasetNode {
 public:
  TensorNode(std::vector<Tensor> columns, std::vector<std::string> names)
      : columns_(std::move(columns)), names_(std::move(names)) {}
  int64_t size() const override { return columns_[0].size(0); }
  Row get(int64_t index, int64_t) const override {
    check_index("TensorDataset", index, size());
    Row row;
    for (const auto& c : columns_) row.push_back(c.select(0, index).contiguous().clone());
    return row;
  }
  std::vector<std::string> column_names() const override { return names_; }

 private:
  std::vector<Tensor> columns_;
  std::vector<std::string> names_;
};

}  // namespace

Dataset Dataset::derived(NodePtr node) const {
  Dataset d(std::move(node));
  d.depth_ = depth_ + 1;
  return d;
}

Dataset Dataset::map(std::vector<TransformPtr> operations, const std::string& input_column,
                     int num_parallel_workers) const {
  ZENITH_CHECK(defined(), "[map] on an empty dataset");
  for (const auto& op : operations) ZENITH_CHECK(op, "[map] null transform");
  auto names = node_->column_names();
  size_t column = 0;
  if (!input_column.empty()) {
    auto it = std::find(names.begin(), names.end(), input_column);
    if (it == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      ZENITH_FAIL("[map] unknown input column '", input_column, "' (columns: ", known, ")");
    }
    column = size_t(it - names.begin());
  }
  int workers =
      num_parallel_workers > 0 ? num_parallel_workers : config::get_num_parallel_workers();
  return derived(std::make_shared<MapNode>(node_, std::move(operations), column, workers,
                                           config::get_seed(), uint64_t(depth_)));
}

Dataset Dataset::shuffle(std::optional<uint64_t> seed) const {
  ZENITH_CHECK(defined(), "[shuffle] on an empty dataset");
  return derived(
      std::make_shared<ShuffleNode>(node_, seed ? *seed : config::get_seed(), uint64_t(depth_)));
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  ZENITH_CHECK(defined(), "[batch] on an empty dataset");
  ZENITH_CHECK(batch_size > 0, "[batch] batch_size must be positive, got ", batch_size);
  return derived(std::make_shared<BatchNode>(node_, batch_size, drop_remainder));
}

Dataset Dataset::repeat(int64_t count) const {
  ZENITH_CHECK(defined(), "[repeat] on an empty dataset");
  ZENITH_CHECK(count > 0, "[repeat] count must be positive, got ", count);
  return derived(std::make_shared<RepeatNode>(node_, count));
}

Dataset Dataset::take(int64_t count) const {
  ZENITH_CHECK(defined(), "[take] on an empty dataset");
  return slice(0, std::min(count, node_->size()));
}

Dataset Dataset::slice(int64_t start, int64_t count) const {
  ZENITH_CHECK(defined(), "[slice] on an empty dataset");
  ZENITH_CHECK(start >= 0 && count >= 0 && start + count <= node_->size(), "[slice] items [", start,
               ", ", start + count, ") out of range [0, ", node_->size(), ")");
  return derived(std::make_shared<SliceNode>(node_, start, count));
}

int64_t Dataset::get_dataset_size() const { return defined() ? node_->size() : 0; }

std::vector<std::string> Dataset::get_col_names() const {
  return defined() ? node_->column_names() : std::vector<std::string>{};
}

Row Dataset::get(int64_t index, int64_t epoch) const {
  ZENITH_CHECK(defined(), "[dataset] get on an empty dataset");
  check_index("dataset", index, node_->size());
  return node_->get(index, epoch);
}

Iterator Dataset::create_iterator(int64_t epoch, int num_workers, int prefetch,
                                  int64_t start) const {
  ZENITH_CHECK(defined(), "[dataset] iterating an empty dataset");
  return Iterator(node_, epoch, num_workers > 0 ? num_workers : node_->workers(),
                  prefetch > 0 ? prefetch : config::get_prefetch_size(), start);
}

Dataset TensorDataset(std::vector<Tensor> columns, std::vector<std::string> names) {
  ZENITH_CHECK(!columns.empty(), "[TensorDataset] needs at least one column");
  for (const auto& c : columns)
    ZENITH_CHECK(c.dim() >= 1 && c.size(0) == columns[0].size(0),
                 "[TensorDataset] every column needs the same leading size, got ",
                 shape_str(c.shape()), " and ", shape_str(columns[0].shape()));
  for (size_t i = names.size(); i < columns.size(); ++i)
    names.push_back("column_" + std::to_string(i));
  return Dataset(std::make_shared<TensorNode>(std::move(columns), std::move(names)));
}

}  // namespace zenith::dataset
