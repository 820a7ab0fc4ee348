// MNIST / Fashion-MNIST IDX reader: generated files (plain and gzipped), the real
// Fashion-MNIST package when installed, and clear errors for bad files.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/files.h"
#include "support/gzip.h"
#include "support/mnist.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/data.h"

namespace zt = zenith::testing;
using zenith::dataset::FashionMnistDataset;
using zenith::dataset::MnistDataset;
using zenith::testing::be32;

namespace {

std::string idx_images(int n, int rows, int cols, uint32_t magic = 0x803) {
  std::string s = be32(magic) + be32(n) + be32(rows) + be32(cols);
  for (int i = 0; i < n * rows * cols; ++i) s.push_back(char(i % 251));
  return s;
}

std::string idx_labels(const std::vector<int>& labels) {
  std::string s = be32(0x801) + be32(uint32_t(labels.size()));
  for (int l : labels) s.push_back(char(l));
  return s;
}

void write_split(const zt::TempDir& dir, const std::string& prefix, const std::string& images,
                 const std::string& labels, bool gz) {
  auto w = gz ? zt::write_gzip : zt::write_bytes;
  std::string sfx = gz ? ".gz" : "";
  w(dir / (prefix + "-images-idx3-ubyte" + sfx), images);
  w(dir / (prefix + "-labels-idx1-ubyte" + sfx), labels);
}

TEST(Idx, ReadsPlainAndGzippedSplits) {
  zt::TempDir dir;
  write_split(dir, "train", idx_images(3, 4, 5), idx_labels({7, 0, 9}), /*gz=*/true);
  write_split(dir, "t10k", idx_images(2, 4, 5), idx_labels({1, 2}), /*gz=*/false);
  auto train = MnistDataset(dir.str(), "train");
  ASSERT_EQ(train.get_dataset_size(), 3);
  EXPECT_EQ(train.get_col_names(), (std::vector<std::string>{"image", "label"}));
  auto row = train.get(1);
  EXPECT_EQ(row[0].shape(), (zenith::Shape{4, 5, 1}));
  EXPECT_EQ(row[0].dtype(), zenith::DType::u8);
  EXPECT_EQ(row[0].data<uint8_t>()[0], 20);  // first pixel of image 1: 1 * 4 * 5
  EXPECT_EQ(row[1].dtype(), zenith::DType::i64);
  EXPECT_EQ(row[1].item(), 0);
  EXPECT_EQ(MnistDataset(dir.str(), "test").get_dataset_size(), 2);
  auto all = MnistDataset(dir.str(), "all");
  ASSERT_EQ(all.get_dataset_size(), 5);
  EXPECT_EQ(all.get(4)[1].item(), 2);
}

TEST(Idx, BadFilesGiveErrorsWithFileAndOffset) {
  zt::TempDir dir;
  std::string images = dir / "train-images-idx3-ubyte.gz";
  write_split(dir, "train", idx_images(3, 4, 5, 0x802), idx_labels({1, 2, 3}), true);
  EXPECT_TRUE(zt::throws_with([&] { MnistDataset(dir.str(), "train"); },
                              "[idx] " + images +
                                  ": bad magic 0x00000802 at offset 0, expected "
                                  "0x00000803"));

  std::string truncated = idx_images(3, 4, 5);
  truncated.resize(truncated.size() - 7);
  write_split(dir, "train", truncated, idx_labels({1, 2, 3}), true);
  EXPECT_TRUE(zt::throws_with([&] { MnistDataset(dir.str(), "train"); },
                              images + ": truncated at offset 69"));

  write_split(dir, "train", idx_images(3, 4, 5), idx_labels({1, 12, 3}), true);
  EXPECT_TRUE(zt::throws_with([&] { MnistDataset(dir.str(), "train"); },
                              "train-labels-idx1-ubyte.gz: label 12 at offset 9 is out of range"));

  write_split(dir, "train", idx_images(3, 4, 5), idx_labels({1, 2}), true);
  EXPECT_TRUE(zt::throws_with([&] { MnistDataset(dir.str(), "train"); }, "2 labels but"));

  // A gzip file cut short.
  std::string gz = zt::gzip_stored(idx_images(3, 4, 5));
  zt::write_bytes(images, gz.substr(0, gz.size() - 20));
  EXPECT_TRUE(zt::throws_with([&] { MnistDataset(dir.str(), "train"); }, images));

  EXPECT_TRUE(zt::throws_with([&] { MnistDataset(dir.str(), "test"); },
                              "missing file (looked for t10k-images-idx3-ubyte"));
  EXPECT_TRUE(zt::throws_with([&] { MnistDataset(dir.str(), "val"); }, "unknown usage 'val'"));
}

TEST(Idx, MissingDirectoryNamesTheDebianPackage) {
  EXPECT_TRUE(zt::throws_with([] { FashionMnistDataset("/nonexistent/fmnist"); },
                              "/nonexistent/fmnist: no such directory"));
  EXPECT_TRUE(
      zt::throws_with([] { FashionMnistDataset("/nonexistent/fmnist"); }, "dataset-fashion-mnist"));
  EXPECT_TRUE(zt::throws_with([] { zenith::dataset::load_dataset("fashion-mnst", "", "train"); },
                              "unknown dataset 'fashion-mnst' (known: fashion-mnist, mnist, "
                              "cifar10, image-folder)"));
}

TEST(Idx, RealFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto train = FashionMnistDataset(dir, "train");
  auto test = FashionMnistDataset(dir, "test");
  EXPECT_EQ(train.get_dataset_size(), 60000);
  EXPECT_EQ(test.get_dataset_size(), 10000);
  EXPECT_EQ(train.get(0)[0].shape(), (zenith::Shape{28, 28, 1}));
  EXPECT_EQ(train.get(0)[1].item(), 9);  // the first training image is an ankle boot
  EXPECT_EQ(test.get(0)[1].item(), 9);
  // Pixel statistics match the mean/std the registry gives for Normalize.
  const auto& info = zenith::dataset::dataset_info("fashion-mnist");
  double sum = 0, sq = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    auto img = train.get(i)[0];
    for (int64_t k = 0; k < img.numel(); ++k) {
      double v = img.data<uint8_t>()[k] / 255.0;
      sum += v;
      sq += v * v;
    }
  }
  double count = n * 784.0, mean = sum / count;
  EXPECT_NEAR(mean, info.mean[0], 0.01);
  EXPECT_NEAR(std::sqrt(sq / count - mean * mean), info.std[0], 0.01);
}

}  // namespace
