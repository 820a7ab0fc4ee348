// Datasets and the input pipeline, named as in MindSpore's mindspore.dataset:
//   auto ds = dataset::Cifar10Dataset("./cifar-10-batches-bin")
//                 .map({vision::Rescale(1.0 / 255.0, 0.0), vision::HWC2CHW()}).batch(32);
//   for (auto it = ds.create_iterator(epoch); auto row = it.next();) { (*row)[0] ... }
// A dataset is a chain of random-access nodes: item i of epoch e is a pure function of
// (seed, e, i), so the order and every random transform are the same for any worker count,
// and a run resumed at epoch k sees exactly the data of the uninterrupted run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "zenith/tensor.h"

namespace zenith::dataset {

// One item: its columns, e.g. {image, label}; a batch stacks each column.
using Row = std::vector<Tensor>;

// Process-wide pipeline defaults (MindSpore's ds.config).
namespace config {
void set_seed(uint64_t seed);  // used by shuffle() and random transforms made afterwards
uint64_t get_seed();
void set_num_parallel_workers(int n);  // default for map(); initially 1
int get_num_parallel_workers();
void set_prefetch_size(int n);  // items ready ahead of the consumer, per worker; initially 2
int get_prefetch_size();
}  // namespace config

// A per-sample transform of one column. `rng` is seeded from (seed, epoch, index).
class Transform {
 public:
  virtual ~Transform() = default;
  virtual Tensor apply(const Tensor& x, std::mt19937_64& rng) const = 0;
  virtual std::string name() const = 0;
};
using TransformPtr = std::shared_ptr<const Transform>;

// A node of a pipeline. get() must be thread-safe: iterator workers call it concurrently.
class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual int64_t size() const = 0;
  virtual Row get(int64_t index, int64_t epoch) const = 0;
  virtual std::vector<std::string> column_names() const = 0;
  // Worker threads this chain asks for (the largest num_parallel_workers of its maps).
  virtual int workers() const { return 1; }
};
using NodePtr = std::shared_ptr<const DatasetNode>;

class Iterator;
struct DistributedSamplerOptions;

class Dataset {
 public:
  Dataset() = default;
  explicit Dataset(NodePtr node) : node_(std::move(node)) {}

  // Applies `operations` in order to `input_column` (default: the first column).
  // num_parallel_workers 0: config::get_num_parallel_workers().
  Dataset map(std::vector<TransformPtr> operations, const std::string& input_column = "",
              int num_parallel_workers = 0) const;
  // A fresh permutation of the whole dataset every epoch, from (seed, epoch).
  Dataset shuffle(std::optional<uint64_t> seed = std::nullopt) const;
  // Stacks consecutive items; the last, smaller batch is dropped when drop_remainder.
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // `count` passes per epoch; each pass is shuffled as its own epoch.
  Dataset repeat(int64_t count) const;
  Dataset take(int64_t count) const;  // the first `count` items
  // Items [start, start + count): e.g. a validation split of a training set.
  Dataset slice(int64_t start, int64_t count) const;

  int64_t get_dataset_size() const;  // items (batches after batch())
  std::vector<std::string> get_col_names() const;
  Row get(int64_t index, int64_t epoch = 0) const;
  // Items `start`.. of `epoch` in order, computed ahead by `num_workers` threads (0: the
  // chain's num_parallel_workers) with `prefetch` items per worker queued (0: config default).
  Iterator create_iterator(int64_t epoch = 0, int num_workers = 0, int prefetch = 0,
                           int64_t start = 0) const;

  bool defined() const { return node_ != nullptr; }
  const NodePtr& node() const { return node_; }

 private:
  friend Dataset DistributedSampler(const Dataset&, int64_t, int64_t,
                                    const DistributedSamplerOptions&);
  Dataset derived(NodePtr node) const;  // a child one level deeper
  NodePtr node_;
  int64_t depth_ = 0;  // nodes above the source: a distinct random stream per map/shuffle
};

// Produces one epoch's items in order; worker threads stop and join when it is destroyed.
class Iterator {
 public:
  Iterator(NodePtr node, int64_t epoch, int num_workers, int prefetch, int64_t start = 0);
  ~Iterator();
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;

  // The next item, or nullopt at the end. Rethrows a worker's error at the failing item.
  std::optional<Row> next();
  int64_t size() const;
  int64_t position() const;  // index of the next item
  // Seconds the consumer spent blocked waiting for data (near 0 when workers keep up).
  double wait_seconds() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ---- data parallelism (src/data/distributed_sampler.cpp)
struct DistributedSamplerOptions {
  bool shuffle = true;
  std::optional<uint64_t> seed{};  // default: config::get_seed()
  // Sizes not divisible by num_shards: "pad" repeats items from the start of the epoch's order
  // (every shard ceil(n / num_shards) items, as PyTorch), "drop" drops the tail (floor), "none"
  // leaves shards uneven so that every item is read exactly once (evaluation).
  std::string remainder = "pad";
};
// The shard `shard_id` of `num_shards` of `dataset`: items order[shard_id + k * num_shards] of
// one permutation of the whole dataset per epoch, the same on every rank (from seed and the
// epoch number given to create_iterator(), so no set_epoch() is needed). With shuffle the order
// is exactly the one shuffle() would give, so num_shards ranks each batching b items see, step
// by step, the same items as one process batching num_shards * b.
Dataset DistributedSampler(const Dataset& dataset, int64_t num_shards, int64_t shard_id,
                           const DistributedSamplerOptions& options = {});

// ---- sources. Images are HWC uint8 as in MindSpore; labels are int64 scalars.
// usage: "train", "test" or "all". Missing directories name the Debian package to install.
Dataset MnistDataset(const std::string& dataset_dir, const std::string& usage = "all");
Dataset FashionMnistDataset(const std::string& dataset_dir, const std::string& usage = "all");
// cifar-10-batches-bin: data_batch_1..5.bin (train), test_batch.bin (test); 3073-byte records.
Dataset Cifar10Dataset(const std::string& dataset_dir, const std::string& usage = "all");
// One class per sub-folder (sorted names -> 0, 1, ...); PNG and JPEG decoded when read.
// channels: 3 (RGB, MindSpore's Decode), 1 (grayscale) or 0 (as stored, alpha dropped).
Dataset ImageFolderDataset(const std::string& dataset_dir, int channels = 3);
// One JSON object per line; each listed key becomes a column (numbers or nested arrays of
// numbers: float32, or int64 when every value is an integer).
Dataset JsonLinesDataset(const std::string& path, const std::vector<std::string>& columns);
// In-memory columns; item i is (columns[0][i], columns[1][i], ...).
Dataset TensorDataset(std::vector<Tensor> columns, std::vector<std::string> names = {});

// ---- datasets by name, for the command line: "fashion-mnist", "mnist", "cifar10",
// "image-folder". Unknown names list the known ones.
struct DatasetInfo {
  std::string name;
  std::string default_dir;     // "" when there is none
  std::string debian_package;  // that provides default_dir, "" when none
  int64_t channels = 1, image_size = 28, num_classes = 10;
  std::vector<double> mean, std;  // per channel, of pixels scaled to [0, 1]
  bool flip_invariant = true;     // a mirrored image keeps its class (not for digits)
};
const DatasetInfo& dataset_info(const std::string& name);
std::vector<std::string> dataset_names();
// The raw split ("train" or "test") of a named dataset; dir "" means its default_dir.
Dataset load_dataset(const std::string& name, const std::string& dir, const std::string& usage);

// The standard image-classification input pipeline of a named dataset: (limit) -> shuffle ->
// (RandomCrop padded by size/8) -> (RandomHorizontalFlip, for datasets whose classes are
// mirror-symmetric) -> Rescale 1/255 -> Normalize(mean, std) -> HWC2CHW -> batch. Evaluation
// pipelines neither shuffle nor augment.
struct PipelineOptions {
  int64_t batch_size = 64;
  bool training = true;  // shuffle, augment, drop the last partial batch
  bool random_crop = false;
  bool random_flip = false;  // ignored where flipping changes the class (digits)
  int num_workers = 1;
  int64_t limit = 0;  // use only the first `limit` items (0: all)
  int64_t image_size =
      0;  // resize to this square size (0: the dataset's own; image-folder: the first image's)
  // Data parallelism: this rank's shard (DistributedSampler; training pads, evaluation reads
  // every item once across shards).
  int64_t num_shards = 1;
  int64_t shard_id = 0;
};
struct Pipeline {
  Dataset dataset;
  DatasetInfo info;     // with channels, image_size and num_classes resolved
  int64_t samples = 0;  // items per epoch, before batching
};
Pipeline classification_pipeline(const std::string& name, const std::string& dir,
                                 const std::string& usage, const PipelineOptions& options);

}  // namespace zenith::dataset

// Per-sample image transforms on HWC images (HW images are treated as one channel), as in
// mindspore.dataset.vision.
namespace zenith::vision {

using dataset::TransformPtr;
// x * rescale + shift, as float32.
TransformPtr Rescale(double rescale, double shift);
// (x - mean[c]) / std[c], as float32; one value applies to every channel.
TransformPtr Normalize(std::vector<double> mean, std::vector<double> std, bool is_hwc = true);
TransformPtr HWC2CHW();
// Pads each side by `padding` with `fill_value`, then crops a random size x size window.
TransformPtr RandomCrop(int64_t size, int64_t padding = 0, double fill_value = 0.0);
TransformPtr RandomCrop(std::vector<int64_t> size, int64_t padding = 0, double fill_value = 0.0);
TransformPtr RandomHorizontalFlip(double prob = 0.5);
// Bilinear. {h, w}, or {s}: the smaller edge becomes s, keeping the aspect ratio.
TransformPtr Resize(std::vector<int64_t> size);

}  // namespace zenith::vision

namespace zenith::transforms {

using dataset::TransformPtr;
TransformPtr TypeCast(DType dtype);
// Any function of the tensor (deterministic; no randomness).
TransformPtr Lambda(std::function<Tensor(const Tensor&)> fn, std::string name = "Lambda");

}  // namespace zenith::transforms
