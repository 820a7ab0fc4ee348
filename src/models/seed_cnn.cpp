// The seed's CNN, with the two pooling layers its Dense(64*6*6) needs restored.
#include "zenith/models.h"

namespace zenith::models {

// Convs use MindSpore's default has_bias=false (the PyTorch reference script builds the same).
nn::CellPtr seed_cnn(int64_t in_channels, int64_t image_size, int64_t num_classes) {
  // conv 3 valid: s - 2; pool 2: floor(/2); twice.
  int64_t s = ((image_size - 2) / 2 - 2) / 2;
  ZENITH_CHECK(in_channels > 0 && num_classes > 0 && s > 0,
               "[seed_cnn] needs positive channels "
               "and classes and image_size >= 10, got in_channels ",
               in_channels, ", image_size ", image_size, ", num_classes ", num_classes);
  return nn::SequentialCell({nn::Conv2d(in_channels, 32, 3, 1, "valid"), nn::ReLU(),
                             nn::MaxPool2d(2), nn::Conv2d(32, 64, 3, 1, "valid"), nn::ReLU(),
                             nn::MaxPool2d(2), nn::Flatten(), nn::Dense(64 * s * s, num_classes)});
}

}  // namespace zenith::models
