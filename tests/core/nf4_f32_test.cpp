// nf4_f32, QLoRA's nf4 without double quantization (bitsandbytes' compress_statistics=False,
// transformers' bnb_4bit_use_double_quant=False): each block's exact absmax kept as float32. The
// bytes and the decode against a float64 reference written here, the bits per weight against
// double-quantized nf4, and the quantized linear layer against float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "zenith/error.h"
#include "zenith/ops.h"
#include "zenith/quant.h"

namespace zenith::testing {
namespace {

// The nearest NF4 level of v (the lower one on a tie), by a linear scan in float64.
int nearest_level(double v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - double(kNf4Levels[k])) < std::fabs(v - double(kNf4Levels[best]))) best = k;
  return best;
}

struct RowReference {
  std::vector<uint8_t> bytes;  // nb f32 absmax, then 32 nb bytes of nibbles (element 2j high)
  std::vector<double> values;  // level * absmax in float64
};

RowReference reference_row(const std::vector<float>& x) {
  const size_t nb = x.size() / 64;
  RowReference r;
  r.bytes.resize(36 * nb);
  r.values.resize(x.size());
  for (size_t b = 0; b < nb; ++b) {
    double absmax = 0;
    for (size_t i = 0; i < 64; ++i) absmax = std::max(absmax, std::fabs(double(x[64 * b + i])));
    const float stored = float(absmax);  // exact: a float's magnitude
    std::memcpy(&r.bytes[4 * b], &stored, 4);
    int level[64];
    for (size_t i = 0; i < 64; ++i) {
      level[i] = absmax > 0 ? nearest_level(double(x[64 * b + i]) / absmax) : 7;
      r.values[64 * b + i] = double(kNf4Levels[level[i]]) * absmax;
    }
    for (size_t j = 0; j < 32; ++j)
      r.bytes[4 * nb + 32 * b + j] = uint8_t(level[2 * j] << 4 | level[2 * j + 1]);
  }
  return r;
}

TEST(Nf4F32, NamesAndSizes) {
  EXPECT_EQ(quant_from_name("NF4_F32"), QuantFormat::nf4_f32);
  EXPECT_STREQ(quant_name(QuantFormat::nf4_f32), "nf4_f32");
  EXPECT_EQ(quant_block_elems(QuantFormat::nf4_f32), 64);
  EXPECT_EQ(quant_block_bytes(QuantFormat::nf4_f32), 36);
  EXPECT_EQ(quant_row_bytes(QuantFormat::nf4_f32, 768), 12 * 36);
  EXPECT_TRUE(is_nf4(QuantFormat::nf4_f32) && is_nf4(QuantFormat::nf4));
  EXPECT_FALSE(is_nf4(QuantFormat::q4_0));
  // The stored values of the formats that were there before stay as they were.
  EXPECT_EQ(int(QuantFormat::nf4), 3);
  EXPECT_EQ(int(QuantFormat::nf4_f32), 4);
  EXPECT_THROW(quant_row_bytes(QuantFormat::nf4_f32, 96), Error);
}

// Rows of 1, 3 and 257 blocks of different spreads, a block of zeros and a block of one value.
TEST(Nf4F32, BytesAndDecodeEqualAFloat64Reference) {
  std::mt19937 rng(40);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> spread(0.2f, 3.0f);
  for (int64_t blocks : {1, 3, 257}) {
    const int64_t n = 64 * blocks;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t b = 0; b < blocks; ++b) {
      const float s = 0.02f * spread(rng);
      for (int i = 0; i < 64; ++i) x[size_t(64 * b + i)] = s * normal(rng);
    }
    if (blocks > 1) {
      std::fill(x.begin(), x.begin() + 64, 0.0f);
      std::fill(x.begin() + 64, x.begin() + 128, -0.75f);
    }
    const RowReference want = reference_row(x);
    std::vector<uint8_t> got(static_cast<size_t>(quant_row_bytes(QuantFormat::nf4_f32, n)));
    ASSERT_EQ(got.size(), want.bytes.size());
    quantize_row(QuantFormat::nf4_f32, x.data(), n, got.data());
    EXPECT_EQ(got, want.bytes) << blocks << " blocks";
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(QuantFormat::nf4_f32, got.data(), n, y.data());
    int64_t off = 0;
    for (int64_t i = 0; i < n; ++i)  // one float32 product: the reference rounded once
      off += y[size_t(i)] != float(want.values[size_t(i)]);
    EXPECT_EQ(off, 0) << blocks << " blocks";
    if (blocks > 1) EXPECT_EQ(y[64], -0.75f);  // a block of one value decodes exactly
  }
}

// The same nibbles as nf4, byte for byte: the two differ only in the absmax each block is scaled
// by, exact here and 8-bit there, which moves the squared error by well under 1%.
TEST(Nf4F32, SameNibblesAsNf4) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const int64_t nb = 300, n = 64 * nb;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> plain(static_cast<size_t>(quant_row_bytes(QuantFormat::nf4_f32, n)));
  std::vector<uint8_t> dq(static_cast<size_t>(quant_row_bytes(QuantFormat::nf4, n)));
  quantize_row(QuantFormat::nf4_f32, x.data(), n, plain.data());
  quantize_row(QuantFormat::nf4, x.data(), n, dq.data());
  EXPECT_TRUE(std::equal(plain.begin() + 4 * nb, plain.end(), dq.begin() + nb));
  auto error = [&](QuantFormat f, const std::vector<uint8_t>& q) {
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(f, q.data(), n, y.data());
    double e = 0;
    for (int64_t i = 0; i < n; ++i) e += std::pow(double(y[size_t(i)]) - x[size_t(i)], 2);
    return e;
  };
  const double e_plain = error(QuantFormat::nf4_f32, plain), e_dq = error(QuantFormat::nf4, dq);
  EXPECT_NEAR(e_plain, e_dq, 0.01 * e_dq);
}

// 4 bits plus a float32 absmax per 64 weights: 4.5 at any row length, where double quantization
// takes 4.13-4.21 (an 8-bit code per block, a row's group scales and offset).
TEST(Nf4F32, BitsPerWeight) {
  auto bits = [](QuantFormat f, int64_t n) {
    return 8.0 * double(quant_row_bytes(f, n)) / double(n);
  };
  for (int64_t n : {64, 768, 2048, 4096, 11008})
    EXPECT_DOUBLE_EQ(bits(QuantFormat::nf4_f32, n), 4.5);
  EXPECT_DOUBLE_EQ(bits(QuantFormat::nf4, 768), 4.0 + 0.125 + 64.0 / 768);  // 4.21
  EXPECT_LT(bits(QuantFormat::nf4, 4096), 4.15);
}

TEST(Nf4F32, QuantizedLinearAgainstFloat64) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t out = 48, in = 192, m = 3;
  std::vector<float> w(size_t(out * in)), x(size_t(m * in));
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : x) v = normal(rng);
  const QuantizedWeight q =
      quantize_weight(Tensor::from_vector(w, {out, in}), QuantFormat::nf4_f32);
  const Tensor deq = dequantize_weight(q);
  const Tensor got = ops::quantized_linear(Tensor::from_vector(x, {m, in}), q);
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{m, out}));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double want = 0, magnitude = 0;
      for (int64_t i = 0; i < in; ++i) {
        const double p = double(x[size_t(r * in + i)]) * double(deq.data<float>()[o * in + i]);
        want += p;
        magnitude += std::fabs(p);
      }
      EXPECT_NEAR(got.data<float>()[r * out + o], want, 1e-6 * magnitude) << r << " " << o;
    }
}

}  // namespace
}  // namespace zenith::testing
