// Datasets by name, for `zenith train --dataset NAME` and the examples.
#include <algorithm>
#include <filesystem>

#include "zenith/data.h"

namespace zenith::dataset {

namespace {

const std::vector<DatasetInfo>& infos() {
  // Means and standard deviations of the training images scaled to [0, 1].
  static const std::vector<DatasetInfo> all = {
      {"fashion-mnist",
       "/usr/share/datasets/fashion-mnist",
       "dataset-fashion-mnist",
       1,
       28,
       10,
       {0.2860},
       {0.3530}},
      {"mnist", "", "", 1, 28, 10, {0.1307}, {0.3081}, /*flip_invariant=*/false},
      {"cifar10", "", "", 3, 32, 10, {0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}},
      // Channels, size and classes come from the files; the CLI fills them in.
      {"image-folder", "", "", 3, 0, 0, {0.5}, {0.5}},
  };
  return all;
}

}  // namespace

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const auto& i : infos()) names.push_back(i.name);
  return names;
}

const DatasetInfo& dataset_info(const std::string& name) {
  for (const auto& i : infos())
    if (i.name == name) return i;
  std::string known;
  for (const auto& n : dataset_names()) known += (known.empty() ? "" : ", ") + n;
  ZENITH_FAIL("[dataset] unknown dataset '", name, "' (known: ", known, ")");
}

Dataset load_dataset(const std::string& name, const std::string& dir, const std::string& usage) {
  const DatasetInfo& info = dataset_info(name);
  std::string d = dir.empty() ? info.default_dir : dir;
  ZENITH_CHECK(!d.empty(), "[", name, "] has no default directory; give one (--data-dir)");
  if (name == "fashion-mnist") return FashionMnistDataset(d, usage);
  if (name == "mnist") return MnistDataset(d, usage);
  if (name == "cifar10") return Cifar10Dataset(d, usage);
  // image-folder: DIR/train and DIR/test when they exist, else DIR itself for both.
  std::filesystem::path split = std::filesystem::path(d) / usage;
  return ImageFolderDataset(std::filesystem::is_directory(split) ? split.string() : d,
                            int(info.channels));
}

Pipeline classification_pipeline(const std::string& name, const std::string& dir,
                                 const std::string& usage, const PipelineOptions& options) {
  ZENITH_CHECK(options.batch_size > 0, "[dataset] batch size must be positive, got ",
               options.batch_size);
  Pipeline p;
  p.info = dataset_info(name);
  Dataset raw = load_dataset(name, dir, usage);
  if (options.limit > 0) raw = raw.take(options.limit);
  std::vector<TransformPtr> ops;
  if (name == "image-folder") {
    // Size and classes come from the files: the first image, the last (highest) label.
    Row first = raw.get(0);
    p.info.channels = first[0].size(2);
    p.info.image_size = options.image_size > 0 ? options.image_size : first[0].size(0);
    p.info.num_classes = int64_t(raw.get(raw.get_dataset_size() - 1)[1].item()) + 1;
    ops.push_back(vision::Resize({p.info.image_size, p.info.image_size}));
  } else if (options.image_size > 0 && options.image_size != p.info.image_size) {
    // MindSpore's LeNet recipe resizes MNIST's 28 x 28 to 32 x 32 the same way.
    p.info.image_size = options.image_size;
    ops.push_back(vision::Resize({p.info.image_size, p.info.image_size}));
  }
  p.samples = raw.get_dataset_size();
  ZENITH_CHECK(
      options.num_shards > 0 && options.shard_id >= 0 && options.shard_id < options.num_shards,
      "[dataset] shard ", options.shard_id, " of ", options.num_shards, " is invalid");
  if (options.num_shards > 1)  // training: shuffled, padded to equal shards (equal step counts)
    raw = DistributedSampler(
        raw, options.num_shards, options.shard_id,
        {.shuffle = options.training, .remainder = options.training ? "pad" : "none"});
  else if (options.training)
    raw = raw.shuffle();
  if (options.training && options.random_crop)
    ops.push_back(vision::RandomCrop(p.info.image_size, p.info.image_size / 8));
  if (options.training && options.random_flip && p.info.flip_invariant)
    ops.push_back(vision::RandomHorizontalFlip());
  ops.push_back(vision::Rescale(1.0 / 255.0, 0.0));
  ops.push_back(vision::Normalize(p.info.mean, p.info.std));
  ops.push_back(vision::HWC2CHW());
  p.dataset = raw.map(std::move(ops), "image", std::max(1, options.num_workers))
                  .batch(options.batch_size, /*drop_remainder=*/options.training);
  ZENITH_CHECK(p.dataset.get_dataset_size() > 0, "[dataset] ", name, " (", usage,
               "): ", raw.get_dataset_size(), " items make no batch of ", options.batch_size);
  return p;
}

}  // namespace zenith::dataset
