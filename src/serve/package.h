// Model packages: a directory that holds everything a service needs to answer requests.
//
//   DIR/package.json       architecture, input spec, preprocessing, label names, content hash
//   DIR/weights.safetensors the network's parameters and buffers (no optimizer state), or
//   DIR/model.onnx         a graph from `zenith export` (package.json's "model_file" says which),
//                          run by zenith's ONNX interpreter (onnx/onnx_runtime.h)
//
// The content hash is the SHA-256 of the model file followed by package.json without its
// "sha256" field (compact JSON); read_package() and the server recompute it, so a modified
// package is refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zenith/nn.h"

namespace zenith::serve {

struct PackageSpec {
  std::string name;  // the service name it was made for
  std::string arch;  // zoo name: seedcnn, lenet, resnet18
  int64_t channels = 1, image_size = 28, num_classes = 10;
  // Input preprocessing, as in training: pixels * 1/255, then (x - mean) / std per channel.
  std::vector<double> mean, std;
  std::vector<std::string> labels;  // num_classes names
  std::string dataset;              // what it was trained on
  std::string source;               // the checkpoint it was made from
  int64_t epoch = 0;
  std::string sha256;
  double created_at = 0;
  std::string model_file = "weights.safetensors";  // or "model.onnx"

  nlohmann::json to_json() const;
  static PackageSpec from_json(const nlohmann::json& j);
};

struct PackageOptions {
  std::string arch;         // "" : the checkpoint's
  std::string dataset;      // "" : the checkpoint's (decides input spec and preprocessing)
  std::string labels_file;  // one name per line; "" : the dataset's class names or "0".."n-1"
};

// Builds a package from a training checkpoint, or from an exported .onnx file (its metadata names
// the arch and dataset; its input and output shapes give the image size and classes), into
// `dir` (created; must not hold a package).
PackageSpec write_package(const std::string& checkpoint, const std::string& dir,
                          const std::string& name, const PackageOptions& options = {});
// Reads DIR/package.json and checks the content hash; errors name the directory.
PackageSpec read_package(const std::string& dir);
// The package's network, in inference mode, with its weights loaded.
nn::CellPtr load_network(const std::string& dir, const PackageSpec& spec);
// The hash read_package() checks (platform::package_content_hash).
std::string package_hash(const std::string& dir);
// Known class names of a dataset ("fashion-mnist", "cifar10"), else "0".."n-1".
std::vector<std::string> default_labels(const std::string& dataset, int64_t num_classes);

}  // namespace zenith::serve
