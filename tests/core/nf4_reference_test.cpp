// zenith's nf4 against an independent reference (scripts/make_nf4_fixture.py, numpy and torch):
// the 16 levels derived from the normal quantiles as bitsandbytes defines them, a weight's blocks
// decoded to what the documented layout gives, and the quantized linear layer's output against
// float64 over the decoded weight.
#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace zenith::testing
