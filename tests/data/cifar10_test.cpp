// CIFAR-10 binary reader on files generated in the exact format: 3073-byte records, label
// byte then R, G, B planes of 32x32.
#include <gtest/gtest.h>

#include "support/files.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/data.h"

namespace zt = zenith::testing;
using zenith::dataset::Cifar10Dataset;

namespace {

// Record r: label r % 10; pixel (y, x) of channel c = (r + c * 50 + y + x) % 256.
std::string cifar_batch(int records, int first) {
  std::string s;
  for (int r = first; r < first + records; ++r) {
    s.push_back(char(r % 10));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) s.push_back(char((r + c * 50 + y + x) % 256));
  }
  return s;
}

void write_cifar(const zt::TempDir& dir, int per_batch) {
  for (int i = 1; i <= 5; ++i)
    zt::write_bytes(dir / ("data_batch_" + std::to_string(i) + ".bin"),
                    cifar_batch(per_batch, (i - 1) * per_batch));
  zt::write_bytes(dir / "test_batch.bin", cifar_batch(per_batch, 1000));
}

TEST(Cifar10, ReadsRecordsAsHwcImages) {
  zt::TempDir dir;
  write_cifar(dir, 3);
  auto train = Cifar10Dataset(dir.str(), "train");
  ASSERT_EQ(train.get_dataset_size(), 15);
  auto row = train.get(7);
  ASSERT_EQ(row[0].shape(), (zenith::Shape{32, 32, 3}));
  EXPECT_EQ(row[1].item(), 7);
  const uint8_t* p = row[0].data<uint8_t>();
  for (int y : {0, 5, 31})
    for (int x : {0, 9, 31})
      for (int c = 0; c < 3; ++c) EXPECT_EQ(p[(y * 32 + x) * 3 + c], (7 + c * 50 + y + x) % 256);
  auto test = Cifar10Dataset(dir.str(), "test");
  ASSERT_EQ(test.get_dataset_size(), 3);
  EXPECT_EQ(test.get(2)[1].item(), 2);  // record 1002
  EXPECT_EQ(Cifar10Dataset(dir.str()).get_dataset_size(), 18);
}

TEST(Cifar10, TheSeedPipelineGivesChwBatches) {
  zt::TempDir dir;
  write_cifar(dir, 8);
  namespace vision = zenith::vision;
  auto ds = Cifar10Dataset(dir.str())
                .map({vision::Rescale(1.0 / 255.0, 0.0), vision::HWC2CHW()})
                .batch(32);
  ASSERT_EQ(ds.get_dataset_size(), 2);
  auto it = ds.create_iterator();
  auto b = it.next();
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)[0].shape(), (zenith::Shape{32, 3, 32, 32}));
  EXPECT_EQ((*b)[1].shape(), (zenith::Shape{32}));
  // Item 1, channel 2, pixel (3, 4) = (1 + 100 + 7) / 255.
  EXPECT_FLOAT_EQ((*b)[0].data<float>()[((1 * 3 + 2) * 32 + 3) * 32 + 4], 108 / 255.0f);
  EXPECT_EQ(it.next()->at(0).shape(), (zenith::Shape{16, 3, 32, 32}));
  EXPECT_FALSE(it.next());
}

TEST(Cifar10, BadFilesGiveErrorsWithFileAndOffset) {
  zt::TempDir dir;
  write_cifar(dir, 2);
  std::string bad = cifar_batch(3, 0);
  bad.resize(bad.size() - 100);
  zt::write_bytes(dir / "data_batch_3.bin", bad);
  EXPECT_TRUE(zt::throws_with([&] { Cifar10Dataset(dir.str(), "train"); },
                              dir / "data_batch_3.bin" +
                                  ": 9119 bytes is not a whole number of "
                                  "3073-byte records: record 2 at offset 6146 is truncated"));
  std::string labels = cifar_batch(3, 0);
  labels[3073] = char(11);
  zt::write_bytes(dir / "data_batch_3.bin", labels);
  EXPECT_TRUE(zt::throws_with([&] { Cifar10Dataset(dir.str(), "train"); },
                              "label 11 of record 1 at offset 3073 is out of range"));
  std::filesystem::remove(dir / "data_batch_3.bin");
  EXPECT_TRUE(zt::throws_with([&] { Cifar10Dataset(dir.str(), "train"); },
                              "missing file (looked for data_batch_3.bin)"));
  EXPECT_TRUE(zt::throws_with([&] { Cifar10Dataset(dir / "nope"); }, "nope: no such directory"));
}

}  // namespace
