// The model zoo by name.
#include <sstream>

#include "zenith/models.h"

namespace zenith::models {

std::vector<std::string> names() { return {"seedcnn", "lenet", "resnet18"}; }

nn::CellPtr create(const std::string& name, int64_t in_channels, int64_t image_size,
                   int64_t num_classes) {
  if (name == "seedcnn" || name == "seed_cnn")
    return seed_cnn(in_channels, image_size, num_classes);
  if (name == "lenet" || name == "lenet5") return lenet5(in_channels, image_size, num_classes);
  if (name == "resnet18") return resnet18(in_channels, num_classes);
  std::ostringstream known;
  for (auto& n : names()) known << (known.tellp() ? ", " : "") << n;
  ZENITH_FAIL("[models] unknown model '", name, "'; known models: ", known.str());
}

}  // namespace zenith::models
