// GGML's block formats (src/core/quant.cpp): blocks worked out by hand byte for byte, the
// decoding against a float64 reading of the documented layout, and the round-trip error of
// each format on random rows.
#include "zenith/quant.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/quant_x8.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

const QuantFormat kFormats[] = {QuantFormat::q8_0, QuantFormat::q4_0, QuantFormat::q4_k};

std::vector<float> gaussian(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(size_t(n), 0.0f);
  for (float& v : x) v = dist(rng);
  return x;
}

double half_at(const uint8_t* p) {
  const unsigned bits = p[0] | (p[1] << 8);  // little-endian IEEE half
  const int exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  const double sign = (bits >> 15) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// A float64 reading of one block straight from the layout in include/zenith/quant.h.
std::vector<double> decode_block(QuantFormat f, const uint8_t* b) {
  std::vector<double> y;
  if (f == QuantFormat::q8_0) {
    for (int i = 0; i < 32; ++i) y.push_back(half_at(b) * int8_t(b[2 + i]));
  } else if (f == QuantFormat::q4_0) {
    y.resize(32);
    for (int j = 0; j < 16; ++j) {
      y[j] = half_at(b) * ((b[2 + j] & 15) - 8);
      y[j + 16] = half_at(b) * ((b[2 + j] >> 4) - 8);
    }
  } else {
    const uint8_t* s = b + 4;
    for (int e = 0; e < 256; ++e) {
      const int j = e / 32, c = e / 64, l = e % 32;
      const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
      const int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      const int q = (b[16 + 32 * c + l] >> (4 * (j % 2))) & 15;
      y.push_back(half_at(b) * sc * q - half_at(b + 2) * mn);
    }
  }
  return y;
}

}  // namespace

TEST(Quant, SizesAndNames) {
  EXPECT_EQ(quant_block_elems(QuantFormat::q8_0), 32);
  EXPECT_EQ(quant_block_bytes(QuantFormat::q8_0), 34);
  EXPECT_EQ(quant_block_bytes(QuantFormat::q4_0), 18);
  EXPECT_EQ(quant_block_elems(QuantFormat::q4_k), 256);
  EXPECT_EQ(quant_block_bytes(QuantFormat::q4_k), 144);
  EXPECT_EQ(quant_row_bytes(QuantFormat::q4_0, 96), 54);
  EXPECT_EQ(quant_from_name("Q4_K"), QuantFormat::q4_k);
  for (QuantFormat f : kFormats) EXPECT_EQ(quant_from_name(quant_name(f)), f);
  EXPECT_TRUE(throws_with([] { quant_from_name("q5_1"); }, "unknown quantized format 'q5_1'"));
  EXPECT_TRUE(throws_with([] { quant_row_bytes(QuantFormat::q4_k, 96); },
                          "a q4_k row of 96 elements is not a whole number of 256-element"));
}

// x_i = i - 16: d = 16 / 127 (half 0x3008), q_0 = -127, q_31 = round(15 * 127 / 16) = 119.
TEST(Quant, Q8_0KnownBlock) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = float(i - 16);
  uint8_t b[34];
  quantize_row(QuantFormat::q8_0, x.data(), 32, b);
  EXPECT_EQ(b[0], 0x08);
  EXPECT_EQ(b[1], 0x30);
  EXPECT_EQ(int8_t(b[2]), -127);
  EXPECT_EQ(int8_t(b[2 + 16]), 0);
  EXPECT_EQ(int8_t(b[2 + 31]), 119);
}

// x_i = i - 16: the largest magnitude is x_0 = -16, so d = -16 / -8 = 2 (half 0x4000) and
// q_i = floor(x_i / 2 + 8.5): q_0 = 0, q_16 = 8, q_31 = 16 clamped to 15.
TEST(Quant, Q4_0KnownBlock) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = float(i - 16);
  uint8_t b[18];
  quantize_row(QuantFormat::q4_0, x.data(), 32, b);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x40);
  EXPECT_EQ(b[2], 0x80);       // element 0 low (q 0), element 16 high (q 8)
  EXPECT_EQ(b[2 + 15], 0xF8);  // element 15: floor(8) = 8; element 31: 15
  std::vector<float> y(32);
  dequantize_row(QuantFormat::q4_0, b, 32, y.data());
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[31], 14.0f);
}

// d = 1, dmin = 0.5, sub-block j scale 8 j + 1 and offset 63 - 8 j, every nibble byte 0x5A (10
// in the low nibble for even sub-blocks, 5 in the high one for odd).
TEST(Quant, Q4_KKnownBlock) {
  uint8_t b[144] = {0x00, 0x3C, 0x00, 0x38, 129, 137, 209, 217,
                    127,  119,  47,   39,   241, 121, 241, 121};
  for (int i = 16; i < 144; ++i) b[i] = 0x5A;
  std::vector<float> y(256);
  dequantize_row(QuantFormat::q4_k, b, 256, y.data());
  for (int j = 0; j < 8; ++j) {
    const float expect = float(8 * j + 1) * (j % 2 ? 5 : 10) - 0.5f * float(63 - 8 * j);
    EXPECT_EQ(y[32 * j], expect) << "sub-block " << j;
    EXPECT_EQ(y[32 * j + 31], expect) << "sub-block " << j;
  }
  // Quantizing them again loses at most the 6-bit scales' rounding: half a step of d = 314.5 /
  // 15 / 63 on each of 15 levels, 1% of the block's largest value.
  std::vector<uint8_t> again(144);
  quantize_row(QuantFormat::q4_k, y.data(), 256, again.data());
  std::vector<float> z(256);
  dequantize_row(QuantFormat::q4_k, again.data(), 256, z.data());
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(z[i], y[i], 3.2) << i;
}

TEST(Quant, DequantizeMatchesTheLayout) {
  for (QuantFormat f : kFormats) {
    const int64_t n = 2 * quant_block_elems(f);
    std::vector<float> x = gaussian(n, 7), y(static_cast<size_t>(n));
    std::vector<uint8_t> blocks(size_t(quant_row_bytes(f, n)));
    quantize_row(f, x.data(), n, blocks.data());
    dequantize_row(f, blocks.data(), n, y.data());
    for (int64_t b = 0; b < 2; ++b) {
      std::vector<double> ref = decode_block(f, blocks.data() + b * quant_block_bytes(f));
      for (int64_t i = 0; i < quant_block_elems(f); ++i)
        ASSERT_NEAR(y[b * quant_block_elems(f) + i], ref[i], 1e-6 * (1 + std::fabs(ref[i])))
            << quant_name(f) << " element " << i;
    }
  }
}

// Round-trip error per element against the block's scale, and the rms error of each format
// on Gaussian rows (q4_K's fitted scales beat q4_0's).
TEST(Quant, RoundTripErrorBounds) {
  const int64_t n = 4096;
  std::vector<float> x = gaussian(n, 11, 0.02f);
  x[5] = 0.3f;  // an outlier in the first block
  double rms[3] = {0, 0, 0}, norm = 0;
  for (float v : x) norm += double(v) * v;
  for (int k = 0; k < 3; ++k) {
    const QuantFormat f = kFormats[k];
    std::vector<uint8_t> blocks(size_t(quant_row_bytes(f, n)));
    std::vector<float> y(static_cast<size_t>(n));
    quantize_row(f, x.data(), n, blocks.data());
    dequantize_row(f, blocks.data(), n, y.data());
    for (int64_t b = 0; b < n / 32; ++b) {
      double amax = 0, lo = 0, hi = 0;
      for (int i = 0; i < 32; ++i) {
        const double v = x[32 * b + i];
        amax = std::max(amax, std::fabs(v)), lo = std::min(lo, v), hi = std::max(hi, v);
      }
      // q8_0: half a step of amax / 127 (plus the f16 scale's rounding); q4_0: one step of
      // amax / 8 at the clamped end; q4_K: half a step over the sub-block's range, plus the
      // rounding of its 6-bit scale (half of d on each of 15 levels) and offset (half of dmin).
      const uint8_t* super = blocks.data() + (32 * b / 256) * 144;
      const double bound = f == QuantFormat::q8_0   ? 0.51 * amax / 127 + 1e-3 * amax
                           : f == QuantFormat::q4_0 ? 1.01 * amax / 8
                                                    : 0.55 * (hi - lo) / 15 + 7.5 * half_at(super) +
                                                          0.5 * half_at(super + 2) + 1e-6;
      for (int i = 0; i < 32; ++i) {
        const double err = std::fabs(double(y[32 * b + i]) - x[32 * b + i]);
        ASSERT_LE(err, bound) << quant_name(f) << " element " << 32 * b + i;
        rms[k] += err * err;
      }
    }
    rms[k] = std::sqrt(rms[k] / norm);
  }
  EXPECT_LT(rms[0], 0.01);
  EXPECT_LT(rms[1], 0.15);
  EXPECT_LT(rms[2], 0.11);
  EXPECT_LT(rms[2], rms[1]);
}

TEST(Quant, WeightsAndErrors) {
  Tensor w = Tensor::randn({3, 64});
  QuantizedWeight q = quantize_weight(w, QuantFormat::q8_0);
  EXPECT_EQ(q.blocks.shape(), (Shape{3, 68}));
  EXPECT_EQ(q.blocks.dtype(), DType::u8);
  Tensor back = dequantize_weight(q);
  EXPECT_LT(ops::max(ops::abs(ops::sub(back, w))).item(), 0.05);
  q.in_features = 32;
  EXPECT_TRUE(
      throws_with([&] { dequantize_weight(q); },
                  "[dequantize] q8_0 blocks of a [3, 32] weight must be [3, 34], got [3, 68]"));
}

// nf4 (QLoRA's NormalFloat with double quantization): the 16 levels, a row decoded by hand from
// the layout in quant.h, and the round-trip error on a Gaussian row of two absmax groups.
TEST(Quant, Nf4LevelsAndKnownRow) {
  EXPECT_EQ(quant_from_name("NF4"), QuantFormat::nf4);
  EXPECT_EQ(quant_block_elems(QuantFormat::nf4), 64);
  EXPECT_EQ(quant_row_bytes(QuantFormat::nf4, 768), 12 * 33 + 4 + 4);
  EXPECT_EQ(quant_row_bytes(QuantFormat::nf4, 64 * 300), 300 * 33 + 2 * 4 + 4);
  EXPECT_EQ(kNf4Levels[0], -1.0f);
  EXPECT_EQ(kNf4Levels[7], 0.0f);
  EXPECT_EQ(kNf4Levels[15], 1.0f);
  for (int k = 1; k < 16; ++k) EXPECT_LT(kNf4Levels[k - 1], kNf4Levels[k]);
  EXPECT_NEAR(kNf4Levels[1], -0.6962, 1e-4);
  EXPECT_NEAR(kNf4Levels[8], 0.0796, 1e-4);
  // bitsandbytes' dynamic map codes the absmax: ascending, 0 at 127, 1 at 255, no -1
  EXPECT_EQ(kDynamicMap[127], 0.0f);
  EXPECT_EQ(kDynamicMap[255], 1.0f);
  EXPECT_FLOAT_EQ(kDynamicMap[0], -0.99296874f);
  for (int k = 1; k < 256; ++k) EXPECT_LT(kDynamicMap[k - 1], kDynamicMap[k]);
  // Two blocks: codes 255 and 127 (1 and 0), scale 5, offset 3 -> absmax 8 and 3; byte j =
  // 0xF0 | j % 16.
  std::vector<uint8_t> row(size_t(quant_row_bytes(QuantFormat::nf4, 128)));
  row[0] = 255, row[1] = 127;
  for (int j = 0; j < 64; ++j) row[2 + j] = uint8_t(0xF0 | (j % 16));
  const float scale = 5.0f, offset = 3.0f;
  std::memcpy(row.data() + 66, &scale, 4);
  std::memcpy(row.data() + 70, &offset, 4);
  std::vector<float> y(128);
  dequantize_row(QuantFormat::nf4, row.data(), 128, y.data());
  for (int j = 0; j < 64; ++j) {
    const double absmax = j < 32 ? 8.0 : 3.0;
    EXPECT_EQ(y[2 * j], absmax * 1.0) << j;
    EXPECT_EQ(y[2 * j + 1], float(absmax * double(kNf4Levels[j % 16]))) << j;
  }
}

TEST(Quant, Nf4RoundTripAgainstFloat64) {
  const int64_t n = 64 * 300;
  std::vector<float> x = gaussian(n, 13, 0.02f), y(static_cast<size_t>(n));
  x[70] = 0.4f;  // an outlier in block 1
  std::vector<uint8_t> row(size_t(quant_row_bytes(QuantFormat::nf4, n)));
  quantize_row(QuantFormat::nf4, x.data(), n, row.data());
  dequantize_row(QuantFormat::nf4, row.data(), n, y.data());
  float offset, scales[2];
  std::memcpy(scales, row.data() + 300 * 33, 8);
  std::memcpy(&offset, row.data() + 300 * 33 + 8, 4);
  double err2 = 0, norm = 0, err2_q4 = 0;
  std::vector<uint8_t> q4(size_t(quant_row_bytes(QuantFormat::q4_0, n)));
  std::vector<float> y4(static_cast<size_t>(n));
  quantize_row(QuantFormat::q4_0, x.data(), n, q4.data());
  dequantize_row(QuantFormat::q4_0, q4.data(), n, y4.data());
  for (int64_t b = 0; b < 300; ++b) {
    const double stored = double(kDynamicMap[row[size_t(b)]]) * scales[b / 256] + double(offset);
    double amax = 0;
    for (int i = 0; i < 64; ++i) amax = std::max(amax, std::fabs(double(x[64 * b + i])));
    // the 8-bit absmax: within half the dynamic map's widest step (0.014 near +-1) of its scale
    ASSERT_NEAR(stored, amax, 0.0071 * scales[b / 256] + 1e-7) << "block " << b;
    for (int i = 0; i < 64; ++i) {
      const uint8_t byte = row[size_t(300 + 32 * b + i / 2)];
      const int q = i % 2 ? byte & 15 : byte >> 4;
      const double ref = double(kNf4Levels[q]) * stored;
      ASSERT_NEAR(y[64 * b + i], ref, 1e-6 * std::fabs(ref) + 1e-9) << "element " << 64 * b + i;
      // the widest gap between levels is 1 - 0.6962: half of it (the level is chosen with the
      // exact absmax, as bitsandbytes does), plus the stored absmax's rounding
      ASSERT_LE(std::fabs(ref - x[64 * b + i]), 0.152 * amax + std::fabs(stored - amax) + 1e-7);
      err2 += (ref - x[64 * b + i]) * (ref - x[64 * b + i]),
          norm += double(x[64 * b + i]) * x[64 * b + i];
      err2_q4 += std::pow(double(y4[64 * b + i]) - x[64 * b + i], 2);
    }
  }
  // within 10% of q4_0's error (blocks of 32, f16 scales) at 4.13 bits an element, not 4.5
  EXPECT_LT(std::sqrt(err2 / norm), 0.11);
  EXPECT_LT(std::sqrt(err2 / norm), 1.1 * std::sqrt(err2_q4 / norm));
}

// The interleaved layout (core/quant_x8.h) takes any GGML bytes, not only the quantizer's: every
// 6-bit scale and min of q4_K, every nibble, f16 bits that are no finite number. Packing then
// unpacking gives them back bit for bit, the layout has their byte count, and a pack of 8 rows
// in place equals the pack of a copy.
TEST(Quant, X8RoundTripsArbitraryBytes) {
  std::mt19937 rng(7);
  for (QuantFormat f : kFormats) {
    const int64_t out = 16, in = 512, bytes = out * quant_row_bytes(f, in);
    std::vector<uint8_t> w(static_cast<size_t>(bytes)), packed(w.size(), 0), back(w.size(), 0);
    for (uint8_t& b : w) b = uint8_t(rng());
    ASSERT_TRUE(quant_x8_fits(f, out)) << quant_name(f);
    quant_x8_pack(f, w.data(), out, in, packed.data());
    EXPECT_NE(packed, w) << quant_name(f);
    quant_x8_unpack(f, packed.data(), out, in, back.data());
    EXPECT_EQ(back, w) << quant_name(f);
    Tensor blocks = Tensor::empty({out, bytes / out}, DType::u8);
    std::memcpy(blocks.data<uint8_t>(), w.data(), w.size());
    const void* at = blocks.raw_data();
    const QuantizedWeight x8 = quant_to_x8_in_place({std::move(blocks), f, out, in});
    ASSERT_TRUE(quant_is_x8(x8));
    EXPECT_EQ(x8.blocks.raw_data(), at) << quant_name(f) << " not packed in place";
    EXPECT_EQ(x8.blocks.shape(), (Shape{out / 8, 8 * quant_row_bytes(f, in)}));
    EXPECT_EQ(std::memcmp(x8.blocks.data<uint8_t>(), packed.data(), packed.size()), 0);
    const QuantizedWeight ggml = quant_to_ggml(x8);
    EXPECT_EQ(std::memcmp(ggml.blocks.data<uint8_t>(), w.data(), w.size()), 0) << quant_name(f);
  }
  EXPECT_FALSE(quant_x8_fits(QuantFormat::q4_k, 12));
  EXPECT_FALSE(quant_x8_fits(QuantFormat::nf4, 8));
}
