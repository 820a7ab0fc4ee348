// A source of images held in memory as one uint8 [N, H, W, C] array plus int64 labels
// (MNIST, CIFAR-10): columns "image" (HWC uint8) and "label" (int64 scalar).
#pragma once

#include <cstring>
#include <vector>

#include "zenith/data.h"

namespace zenith::dataset::detail {

class ImageArrayNode : public DatasetNode {
 public:
  ImageArrayNode(Tensor images, std::vector<int64_t> labels)
      : images_(std::move(images)), labels_(std::move(labels)) {}
  int64_t size() const override { return int64_t(labels_.size()); }
  Row get(int64_t index, int64_t) const override {
    ZENITH_CHECK(index >= 0 && index < size(), "[dataset] index ", index, " out of range [0, ",
                 size(), ")");
    Shape shape(images_.shape().begin() + 1, images_.shape().end());
    Tensor image = Tensor::empty(shape, DType::u8);
    const size_t n = image.nbytes();
    std::memcpy(image.raw_data(), images_.data<uint8_t>() + size_t(index) * n, n);
    Tensor label = Tensor::empty({}, DType::i64);
    *label.data<int64_t>() = labels_[size_t(index)];
    return {image, label};
  }
  std::vector<std::string> column_names() const override { return {"image", "label"}; }

 private:
  Tensor images_;
  std::vector<int64_t> labels_;
};

}  // namespace zenith::dataset::detail
