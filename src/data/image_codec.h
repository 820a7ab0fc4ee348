// PNG (libpng) and JPEG (libjpeg-turbo) decoding to HWC uint8 tensors, and encoding (for
// tests and for writing sample images).
#pragma once

#include <string>

#include "zenith/tensor.h"

namespace zenith::vision {

// channels: 3 RGB, 1 grayscale, 0 as stored (alpha dropped). `name` is used in errors.
Tensor decode_image(const std::string& bytes, const std::string& name, int channels = 3);
// image: HWC (or HW) uint8 with 1 or 3 channels.
std::string encode_png(const Tensor& image);
std::string encode_jpeg(const Tensor& image, int quality = 95);

}  // namespace zenith::vision
