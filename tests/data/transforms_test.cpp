// Vision transforms against hand-computed values.
#include <gtest/gtest.h>

#include "support/op_check.h"
#include "zenith/data.h"

namespace zt = zenith::testing;
using zenith::DType;
using zenith::Tensor;
namespace vision = zenith::vision;

namespace {

std::mt19937_64 rng(1);

// [H, W, C] image with value 100*y + 10*x + c.
Tensor coded(int64_t h, int64_t w, int64_t c, DType dtype = DType::f32, double base = 0) {
  std::vector<double> v;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) v.push_back(base + double(100 * y + 10 * x + k));
  return Tensor::from_vector(v, {h, w, c}, dtype);
}

double at(const Tensor& t, int64_t y, int64_t x, int64_t k) {
  return t.to(DType::f64).contiguous().data<double>()[(y * t.size(1) + x) * t.size(2) + k];
}

TEST(Transforms, RescaleNormalizeHwc2chw) {
  Tensor img = Tensor::from_vector(std::vector<double>{0, 255, 51, 102}, {2, 1, 2}, DType::u8);
  Tensor r = vision::Rescale(1.0 / 255.0, -0.5)->apply(img, rng);
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_TRUE(zt::all_close(
      r, Tensor::from_vector(std::vector<float>{-0.5f, 0.5f, -0.3f, -0.1f}, {2, 1, 2}), 1e-6,
      1e-6));
  Tensor n = vision::Normalize({1, 2}, {2, 4})->apply(coded(1, 2, 2), rng);
  // values 0, 1, 10, 11 -> (0-1)/2, (1-2)/4, (10-1)/2, (11-2)/4
  EXPECT_EQ(n.to_float_vector(), (std::vector<float>{-0.5f, -0.25f, 4.5f, 2.25f}));
  Tensor chw = vision::HWC2CHW()->apply(coded(2, 3, 2, DType::u8), rng);
  EXPECT_EQ(chw.shape(), (zenith::Shape{2, 2, 3}));
  EXPECT_EQ(chw.to_int_vector(), (std::vector<int64_t>{0, 10, 20, 100, 110, 120,  // channel 0
                                                       1, 11, 21, 101, 111, 121}));
  Tensor nc = vision::Normalize({1, 2}, {2, 4}, /*is_hwc=*/false)->apply(chw.to(DType::f32), rng);
  EXPECT_FLOAT_EQ(nc.to_float_vector()[6], (1 - 2) / 4.0f);
  EXPECT_TRUE(zt::throws_with(
      [] {
        vision::Normalize({1, 2, 3}, {1, 1, 1})->apply(coded(2, 2, 2), rng);
      },
      "3 mean values"));
  Tensor cast = zenith::transforms::TypeCast(DType::i32)->apply(coded(1, 2, 1), rng);
  EXPECT_EQ(cast.dtype(), DType::i32);
}

TEST(Transforms, RandomCropWithPaddingStaysInsideThePaddedImage) {
  Tensor img = coded(4, 4, 1, DType::f32, /*base=*/1);  // 0 only in the padding
  auto crop = vision::RandomCrop(4, 2);
  bool saw_shift = false;
  for (int trial = 0; trial < 50; ++trial) {
    std::mt19937_64 r(trial);
    Tensor out = crop->apply(img, r);
    ASSERT_EQ(out.shape(), (zenith::Shape{4, 4, 1}));
    // Each non-padding pixel keeps its neighbour relation: a shifted copy of the image.
    int64_t dy = -100, dx = -100;
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t x = 0; x < 4; ++x) {
        double v = at(out, y, x, 0) - 1;
        if (v < 0) continue;  // padding
        int64_t sy = int64_t(v) / 100, sx = int64_t(v) % 100 / 10;
        if (dy == -100) dy = sy - y, dx = sx - x;
        EXPECT_EQ(sy - y, dy);
        EXPECT_EQ(sx - x, dx);
      }
    saw_shift |= dy != 0 || dx != 0;
  }
  EXPECT_TRUE(saw_shift);
  std::mt19937_64 r(3);
  EXPECT_TRUE(zt::throws_with([&] { vision::RandomCrop(9, 2)->apply(img, r); }, "larger than"));
  EXPECT_EQ(vision::RandomCrop({2, 3})->apply(img, r).shape(), (zenith::Shape{2, 3, 1}));
}

TEST(Transforms, RandomHorizontalFlip) {
  Tensor img = coded(2, 3, 2, DType::u8);
  std::mt19937_64 r(5);
  Tensor always = vision::RandomHorizontalFlip(1.0)->apply(img, r);
  EXPECT_EQ(at(always, 1, 0, 1), 121);
  EXPECT_EQ(at(always, 0, 2, 0), 0);
  Tensor never = vision::RandomHorizontalFlip(0.0)->apply(img, r);
  EXPECT_EQ(never.to_int_vector(), img.to_int_vector());
  int flipped = 0;
  auto half = vision::RandomHorizontalFlip(0.5);
  for (int i = 0; i < 400; ++i) flipped += at(half->apply(img, r), 0, 0, 0) != 0;
  EXPECT_NEAR(flipped, 200, 40);
}

TEST(Transforms, ResizeBilinear) {
  // Upsampling 1x2 -> 1x4 with half-pixel centres: 0, 2.5, 7.5, 10 for values 0, 10.
  Tensor img = Tensor::from_vector(std::vector<float>{0, 10}, {1, 2, 1});
  Tensor up = vision::Resize({1, 4})->apply(img, rng);
  EXPECT_EQ(up.to_float_vector(), (std::vector<float>{0, 2.5f, 7.5f, 10}));
  // Same size is the identity; u8 stays u8.
  Tensor u8 = coded(3, 3, 3, DType::u8);
  Tensor same = vision::Resize({3, 3})->apply(u8, rng);
  EXPECT_EQ(same.dtype(), DType::u8);
  EXPECT_EQ(same.to_int_vector(), u8.to_int_vector());
  // One value: the smaller edge.
  EXPECT_EQ(vision::Resize({16})->apply(coded(8, 12, 1), rng).shape(), (zenith::Shape{16, 24, 1}));
}

}  // namespace
