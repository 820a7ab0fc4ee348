// Datasets by name, for `zenith train --dataset NAME` and the examples.
#include <filesystem>

#include "zenith/data.h"

namespace zenith::dataset {

namespace {

const std::vector<DatasetInfo>& infos() {
  // Means and standard deviations of the training images scaled to [0, 1].
  static const std::vector<DatasetInfo> all = {
      {"fashion-mnist", "/usr/share/datasets/fashion-mnist", "dataset-fashion-mnist", 1, 28, 10,
       {0.2860}, {0.3530}},
      {"mnist", "", "", 1, 28, 10, {0.1307}, {0.3081}},
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

}  // namespace zenith::dataset
