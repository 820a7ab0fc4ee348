// zenith's nf4 against an independent reference (scripts/make_nf4_fixture.py, numpy and torch):
// the 16 levels derived from the normal quantiles and the 8-bit dynamic map as bitsandbytes
// defines them, a weight's blocks decoded to what bitsandbytes' double quantization gives, and the
// quantized linear layer's output against float64 over the decoded weight. And against a float64
// reference of the same scheme written here: the bytes and the decoded weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "support/op_check.h"
#include "zenith/io.h"
#include "zenith/ops.h"
#include "zenith/quant.h"

namespace zenith::testing {
namespace {

std::map<std::string, Tensor> fixture() {
  return io::read_tensors(
      io::list_safetensors(std::string(ZENITH_FIXTURE_DIR) + "/quant/nf4_reference.safetensors"));
}

TEST(Nf4Reference, LevelsAreTheNormalQuantiles) {
  const Tensor levels = fixture().at("levels");
  ASSERT_EQ(levels.numel(), 16);
  for (int k = 0; k < 16; ++k)
    EXPECT_NEAR(kNf4Levels[k], levels.data<double>()[k], 1e-7) << "level " << k;
}

TEST(Nf4Reference, DynamicMapIsBitsandbytes) {
  const Tensor map = fixture().at("dynamic_map");
  ASSERT_EQ(map.numel(), 256);
  for (int k = 0; k < 256; ++k)
    EXPECT_EQ(kDynamicMap[k], map.data<float>()[k]) << "value " << k;  // bit for bit
}

TEST(Nf4Reference, BlocksDecodeToTheReference) {
  auto f = fixture();
  const Tensor& weight = f.at("weight");
  const QuantizedWeight q = quantize_weight(weight, QuantFormat::nf4);
  ASSERT_EQ(q.blocks.size(1), quant_row_bytes(QuantFormat::nf4, weight.size(1)));
  const Tensor got = dequantize_weight(q), want = f.at("dequantized");
  ASSERT_EQ(got.shape(), want.shape());
  // Equal up to float32 rounding of the stored absmax (an FMA on one side): a different level
  // anywhere would differ by >= 0.08 of the block's absmax.
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  int64_t off = 0;
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = std::fabs(double(g[i]) - double(w[i]));
    worst = std::max(worst, d);
    if (d > 1e-6 * std::fabs(double(w[i])) + 1e-12) ++off;
  }
  EXPECT_EQ(off, 0) << "elements off the reference; worst difference " << worst;
}

TEST(Nf4Reference, QuantizedLinearAgainstFloat64) {
  auto f = fixture();
  const QuantizedWeight q = quantize_weight(f.at("weight"), QuantFormat::nf4);
  const Tensor& x = f.at("x");
  const Tensor& y = f.at("y");
  const Tensor deq = f.at("dequantized");
  const Tensor got = ops::quantized_linear(x, q);
  ASSERT_EQ(got.shape(), y.shape());
  const int64_t n = x.size(1);
  for (int64_t r = 0; r < y.size(0); ++r) {
    for (int64_t o = 0; o < y.size(1); ++o) {
      double magnitude = 0;  // sum |x w|: the scale of float32 accumulation's error
      for (int64_t i = 0; i < n; ++i)
        magnitude +=
            std::fabs(double(x.data<float>()[r * n + i]) * double(deq.data<float>()[o * n + i]));
      const double want = y.data<double>()[r * y.size(1) + o];
      EXPECT_NEAR(got.data<float>()[r * y.size(1) + o], want, 1e-5 * magnitude)
          << "row " << r << " output " << o;
    }
  }
  // float64 activations multiply the decoded weight exactly: the reference's up to the float32
  // rounding of the stored absmax (the test above)
  const Tensor exact = ops::quantized_linear(x.to(DType::f64), q);
  EXPECT_TRUE(all_close(exact, y, 1e-6, 1e-9));
}

// bitsandbytes' quantize_4bit(nf4, compress_statistics=True) of one row, written from its
// description in float64 (float32 only where the format stores float32): the row's bytes and the
// values they stand for.
struct RowReference {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};

int nearest_index(const float* table, int size, double v) {
  int best = 0;
  for (int k = 1; k < size; ++k)
    if (std::fabs(v - double(table[k])) < std::fabs(v - double(table[best]))) best = k;
  return best;
}

RowReference reference_row(const std::vector<float>& x) {
  const size_t nb = x.size() / 64, groups = (nb + 255) / 256;
  std::vector<double> absmax(nb, 0.0);
  std::vector<int> level(x.size());
  double sum = 0;
  for (size_t b = 0; b < nb; ++b) {
    for (size_t i = 0; i < 64; ++i)
      absmax[b] = std::max(absmax[b], std::fabs(double(x[64 * b + i])));
    sum += absmax[b];
    for (size_t i = 0; i < 64; ++i)
      level[64 * b + i] =
          absmax[b] > 0 ? nearest_index(kNf4Levels, 16, x[64 * b + i] / absmax[b]) : 7;
  }
  const float offset = float(sum / double(nb));
  RowReference r;
  r.bytes.resize(nb * 33 + 4 * groups + 4);
  r.values.resize(x.size());
  for (size_t g = 0; g < groups; ++g) {
    const size_t b0 = 256 * g, b1 = std::min(nb, b0 + 256);
    std::vector<double> d;  // absmax - offset, held in float32 as bitsandbytes holds it
    double scale = 0;
    for (size_t b = b0; b < b1; ++b) {
      d.push_back(double(float(absmax[b] - double(offset))));
      scale = std::max(scale, std::fabs(d.back()));
    }
    const float scale32 = float(scale);
    std::memcpy(&r.bytes[nb * 33 + 4 * g], &scale32, 4);
    for (size_t b = b0; b < b1; ++b) {
      const int code = nearest_index(kDynamicMap, 256, scale > 0 ? d[b - b0] / scale : 0.0);
      r.bytes[b] = uint8_t(code);
      const double stored = double(kDynamicMap[code]) * scale + double(offset);
      for (size_t i = 0; i < 64; ++i)
        r.values[64 * b + i] = double(kNf4Levels[level[64 * b + i]]) * stored;
      for (size_t j = 0; j < 32; ++j)
        r.bytes[nb + 32 * b + j] = uint8_t(level[64 * b + 2 * j] << 4 | level[64 * b + 2 * j + 1]);
    }
  }
  std::memcpy(&r.bytes[nb * 33 + 4 * groups], &offset, 4);
  return r;
}

// Rows of 1, 256 and 257 blocks (two groups, the second of one block), of different spreads, a
// block of zeros, and a row whose blocks all share one absmax (every absmax - offset is 0).
TEST(Nf4Reference, DoubleQuantizationEqualsAFloat64Reference) {
  std::mt19937 rng(40);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> spread(0.2f, 3.0f);
  for (int64_t blocks : {1, 256, 257}) {
    const int64_t n = 64 * blocks;
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t b = 0; b < blocks; ++b) {
        const float s = kind == 2 ? 0.5f : 0.02f * spread(rng);
        for (int i = 0; i < 64; ++i) x[size_t(64 * b + i)] = s * normal(rng);
        if (kind == 2) x[size_t(64 * b)] = 4.0f;  // every block's absmax
      }
      if (kind == 1) std::fill(x.begin(), x.begin() + 64, 0.0f);
      const RowReference want = reference_row(x);
      std::vector<uint8_t> got(static_cast<size_t>(quant_row_bytes(QuantFormat::nf4, n)));
      ASSERT_EQ(got.size(), want.bytes.size());
      quantize_row(QuantFormat::nf4, x.data(), n, got.data());
      EXPECT_EQ(got, want.bytes) << blocks << " blocks, kind " << kind;
      std::vector<float> y(static_cast<size_t>(n));
      dequantize_row(QuantFormat::nf4, got.data(), n, y.data());
      int64_t off = 0;
      for (int64_t i = 0; i < n; ++i)
        if (std::fabs(double(y[size_t(i)]) - want.values[size_t(i)]) >
            1e-6 * std::fabs(want.values[size_t(i)]) + 1e-30)
          ++off;
      EXPECT_EQ(off, 0) << blocks << " blocks, kind " << kind;
    }
  }
}

// Bytes per weight of the frozen base: 4 bits, one 8-bit code per 64 (0.125 bits where a float32
// absmax would take 0.5), and a row's f32 group scales and offset.
TEST(Nf4Reference, BitsPerWeight) {
  auto bits = [](int64_t n) {
    return 8.0 * double(quant_row_bytes(QuantFormat::nf4, n)) / double(n);
  };
  EXPECT_DOUBLE_EQ(bits(768),
                   4.0 + 0.125 + 64.0 / 768);  // 4.208 (110M shape: q, k, v, o, gate, up)
  EXPECT_DOUBLE_EQ(bits(2048), 4.0 + 0.125 + 64.0 / 2048);    // 4.156 (its down_proj)
  EXPECT_DOUBLE_EQ(bits(4096), 4.0 + 0.125 + 64.0 / 4096);    // 4.141 (LLaMA-7B)
  EXPECT_DOUBLE_EQ(bits(16448), 4.0 + 0.125 + 96.0 / 16448);  // two groups
  EXPECT_LT(bits(11008), 4.14);
  const double q4_0 = 8.0 * double(quant_row_bytes(QuantFormat::q4_0, 4096)) / 4096;
  EXPECT_DOUBLE_EQ(q4_0, 4.5);
}

}  // namespace
}  // namespace zenith::testing
