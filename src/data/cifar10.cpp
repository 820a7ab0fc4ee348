// CIFAR-10 binary version: records of 1 label byte + 3072 pixel bytes (1024 R, 1024 G,
// 1024 B, rows of 32), converted to HWC as MindSpore's Cifar10Dataset yields them.
#include <cstring>

#include "data/file_reader.h"
#include "data/image_array.h"
#include "zenith/data.h"

namespace zenith::dataset {

namespace {
constexpr int64_t kSide = 32, kPixels = kSide * kSide, kRecord = 1 + 3 * kPixels;
constexpr int64_t kNumClasses = 10;
}  // namespace

Dataset Cifar10Dataset(const std::string& dataset_dir, const std::string& usage) {
  detail::require_directory(
      dataset_dir, "cifar10",
      "CIFAR-10 is not packaged in Debian; unpack cifar-10-binary.tar.gz from "
      "https://www.cs.toronto.edu/~kriz/cifar.html to get cifar-10-batches-bin");
  std::vector<std::string> files;
  if (usage == "train" || usage == "all")
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  if (usage == "test" || usage == "all") files.push_back("test_batch.bin");
  ZENITH_CHECK(!files.empty(), "[cifar10] unknown usage '", usage, "' (known: train, test, all)");

  std::vector<std::string> contents;
  int64_t records = 0;
  for (auto& name : files) {
    std::string path = detail::find_file(dataset_dir, {name}, "cifar10");
    std::string bytes = detail::read_maybe_gzip(path, "cifar10");
    int64_t n = int64_t(bytes.size());
    ZENITH_CHECK(n > 0, "[cifar10] ", path, ": empty file");
    ZENITH_CHECK(n % kRecord == 0, "[cifar10] ", path, ": ", n, " bytes is not a whole number of ",
                 kRecord, "-byte records: record ", n / kRecord, " at offset ",
                 n / kRecord * kRecord, " is truncated");
    for (int64_t r = 0; r < n / kRecord; ++r) {
      auto label = uint8_t(bytes[size_t(r * kRecord)]);
      ZENITH_CHECK(label < kNumClasses, "[cifar10] ", path, ": label ", int(label), " of record ",
                   r, " at offset ", r * kRecord, " is out of range [0, ", kNumClasses, ")");
    }
    records += n / kRecord;
    name = path;
    contents.push_back(std::move(bytes));
  }

  Tensor images = Tensor::empty({records, kSide, kSide, 3}, DType::u8);
  std::vector<int64_t> labels;
  labels.reserve(size_t(records));
  uint8_t* dst = images.data<uint8_t>();
  for (const auto& bytes : contents) {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    for (size_t r = 0; r < bytes.size() / kRecord; ++r, p += kRecord) {
      labels.push_back(p[0]);
      for (int64_t i = 0; i < kPixels; ++i)  // CHW planes -> HWC pixels
        for (int64_t c = 0; c < 3; ++c) *dst++ = p[1 + c * kPixels + i];
    }
  }
  return Dataset(std::make_shared<detail::ImageArrayNode>(images, std::move(labels)));
}

}  // namespace zenith::dataset
