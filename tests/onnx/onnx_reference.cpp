// zenith's side of tests/e2e/onnx_export.sh: a checkpoint's logits on the first N images of its
// dataset's test split, preprocessed as `zenith eval` does, written as NumPy files for the
// Python check (OUT/inputs.npy [N, C, H, W] float32, OUT/outputs.npy [N, classes] float32,
// OUT/labels.npy [N] int64).
//   onnx_reference CHECKPOINT N OUT
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zenith/zenith.h"

namespace {

using namespace zenith;

// NPY format 1.0: magic, version, header length, a Python dict padded to 64 bytes, raw data.
void write_npy(const std::string& path, const Tensor& t) {
  const Tensor c = t.contiguous();
  const char* descr = c.dtype() == DType::f32 ? "<f4" : "<i8";
  std::string shape;
  for (int64_t d : c.shape()) shape += std::to_string(d) + ",";
  std::string header =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(static_cast<const char*>(c.raw_data()), std::streamsize(c.nbytes()));
  ZENITH_CHECK(bool(out), "[onnx_reference] cannot write ", path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: onnx_reference CHECKPOINT N OUT\n");
    return 2;
  }
  const std::string checkpoint = argv[1], out = argv[3];
  const int64_t n = std::atoll(argv[2]);
  auto config = nlohmann::json::parse(io::read_safetensors_metadata(checkpoint).at("config"));
  const std::string model = config.at("model"), dataset_name = config.at("dataset");
  auto data = dataset::classification_pipeline(dataset_name, config.value("data-dir", ""), "test",
                                               {.batch_size = n,
                                                .training = false,
                                                .limit = n,
                                                .image_size = config.value("image-size", 0)});
  const auto& info = data.info;
  auto net = models::create(model, info.channels, info.image_size, info.num_classes);
  io::load_checkpoint(checkpoint, *net);
  net->set_train(false);
  dataset::Row batch = data.dataset.get(0);
  NoGradGuard no_grad;
  Tensor logits = net->forward(batch[0]);
  std::filesystem::create_directories(out);
  write_npy(out + "/inputs.npy", batch[0].to(DType::f32));
  write_npy(out + "/outputs.npy", logits.to(DType::f32));
  write_npy(out + "/labels.npy", batch[1].to(DType::i64));
  std::printf("%s: %lld %s test images -> %s\n", model.c_str(), (long long)batch[0].size(0),
              dataset_name.c_str(), out.c_str());
  return 0;
}
