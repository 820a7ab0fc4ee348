// ImageFolderDataset: dataset_dir/<class>/<image>.{png,jpg,jpeg}; classes are the sorted
// sub-folder names. Images are read and decoded by the iterator's workers.
#include <algorithm>
#include <filesystem>

#include "core/atomic_file.h"
#include "data/file_reader.h"
#include "data/image_codec.h"
#include "zenith/data.h"

namespace zenith::dataset {

namespace fs = std::filesystem;

namespace {

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

class ImageFolderNode : public DatasetNode {
 public:
  ImageFolderNode(std::vector<std::pair<std::string, int64_t>> files, int channels)
      : files_(std::move(files)), channels_(channels) {}
  int64_t size() const override { return int64_t(files_.size()); }
  Row get(int64_t index, int64_t) const override {
    ZENITH_CHECK(index >= 0 && index < size(), "[image-folder] index ", index, " out of range [0, ",
                 size(), ")");
    const auto& [path, label] = files_[size_t(index)];
    Tensor image = vision::decode_image(core::read_file(path, "image-folder"), path, channels_);
    Tensor l = Tensor::empty({}, DType::i64);
    *l.data<int64_t>() = label;
    return {image, l};
  }
  std::vector<std::string> column_names() const override { return {"image", "label"}; }

 private:
  std::vector<std::pair<std::string, int64_t>> files_;
  int channels_;
};

}  // namespace

Dataset ImageFolderDataset(const std::string& dataset_dir, int channels) {
  detail::require_directory(dataset_dir, "image-folder",
                            "expected one sub-folder of PNG/JPEG images per class");
  ZENITH_CHECK(channels == 0 || channels == 1 || channels == 3,
               "[image-folder] channels must be 0, 1 or 3, got ", channels);
  std::vector<std::string> classes;
  for (const auto& e : fs::directory_iterator(dataset_dir))
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  std::sort(classes.begin(), classes.end());
  ZENITH_CHECK(!classes.empty(), "[image-folder] ", dataset_dir,
               ": no class sub-folders (expected one sub-folder of images per class)");
  std::vector<std::pair<std::string, int64_t>> files;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> images;
    for (const auto& e : fs::directory_iterator(fs::path(dataset_dir) / classes[c]))
      if (e.is_regular_file() && is_image_file(e.path())) images.push_back(e.path().string());
    std::sort(images.begin(), images.end());
    for (auto& p : images) files.emplace_back(std::move(p), int64_t(c));
  }
  ZENITH_CHECK(!files.empty(), "[image-folder] ", dataset_dir,
               ": no .png/.jpg/.jpeg images in its class sub-folders");
  return Dataset(std::make_shared<ImageFolderNode>(std::move(files), channels));
}

}  // namespace zenith::dataset
