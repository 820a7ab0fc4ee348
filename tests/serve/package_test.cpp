// Model packages (src/serve/package.cpp): made from a checkpoint, self-describing, refused
// when modified.
#include "serve/package.h"

#include <gtest/gtest.h>

#include <fstream>

#include "serve_test_util.h"
#include "support/temp_dir.h"

namespace zenith::serve {
namespace {

using zenith::testing::TempDir;

TEST(Package, FromCheckpointCarriesArchitectureInputSpecLabelsAndHash) {
  TempDir dir("package");
  const std::string ckpt = test::write_seedcnn_checkpoint(dir.str());
  auto spec = write_package(ckpt, dir.str() + "/pkg", "fmnist-api");
  EXPECT_EQ(spec.arch, "seedcnn");
  EXPECT_EQ(spec.channels, 1);
  EXPECT_EQ(spec.image_size, 28);
  EXPECT_EQ(spec.num_classes, 10);
  ASSERT_EQ(spec.labels.size(), 10u);
  EXPECT_EQ(spec.labels[9], "Ankle boot");
  ASSERT_EQ(spec.mean.size(), 1u);
  EXPECT_NEAR(spec.mean[0], 0.2860, 1e-9);
  EXPECT_EQ(spec.sha256.size(), 64u);

  auto read = read_package(dir.str() + "/pkg");
  EXPECT_EQ(read.sha256, spec.sha256);
  EXPECT_EQ(read.name, "fmnist-api");
  // The packaged network computes what the checkpoint's does.
  auto original = models::seed_cnn(1, 28, 10);
  io::load_checkpoint(ckpt, *original);
  original->set_train(false);
  auto packaged = load_network(dir.str() + "/pkg", read);
  NoGradGuard no_grad;
  Tensor x = Tensor::randn({3, 1, 28, 28});
  Tensor a = original->forward(x).contiguous(), b = packaged->forward(x).contiguous();
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.data<float>()[i], b.data<float>()[i]);
}

TEST(Package, ModifiedWeightsOrManifestAreRefused) {
  TempDir dir("package_tamper");
  const std::string ckpt = test::write_seedcnn_checkpoint(dir.str());
  write_package(ckpt, dir.str() + "/pkg", "m");
  {
    std::fstream f(dir.str() + "/pkg/weights.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x42');
  }
  try {
    read_package(dir.str() + "/pkg");
    FAIL() << "a modified package was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("content hash mismatch"), std::string::npos) << e.what();
  }
}

TEST(Package, LabelsFileAndErrors) {
  TempDir dir("package_labels");
  const std::string ckpt = test::write_seedcnn_checkpoint(dir.str());
  { std::ofstream(dir.str() + "/labels.txt") << "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"; }
  auto spec = write_package(ckpt, dir.str() + "/pkg", "m", {"", "", dir.str() + "/labels.txt"});
  EXPECT_EQ(spec.labels[2], "c");
  { std::ofstream(dir.str() + "/short.txt") << "a\nb\n"; }
  EXPECT_THROW(write_package(ckpt, dir.str() + "/pkg2", "m", {"", "", dir.str() + "/short.txt"}),
               std::exception);
  // The wrong architecture fails on the weights' names and shapes.
  EXPECT_THROW(write_package(ckpt, dir.str() + "/pkg3", "m", {"lenet", "", ""}), std::exception);
  EXPECT_THROW(write_package(dir.str() + "/missing.safetensors", dir.str() + "/pkg4", "m"),
               std::exception);
  EXPECT_THROW(read_package(dir.str()), std::exception);  // no package.json
}

}  // namespace
}  // namespace zenith::serve
