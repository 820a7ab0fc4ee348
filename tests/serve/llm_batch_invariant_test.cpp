// The row-wise linear kernel (core::batch_invariant on): equal to a float64 product, and each
// row bit-identical whatever the number of rows computed with it (one row, a few, enough rows to
// run on several threads), for float32, bfloat16 and float16 weights, with and without bias.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/batch_invariant.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith {
namespace {

struct RowwiseCase {
  DType weight;
  bool bias;
  int64_t k;
};

class RowwiseLinear : public ::testing::TestWithParam<RowwiseCase> {};

TEST_P(RowwiseLinear, MatchesReferenceAndIsBatchInvariant) {
  const RowwiseCase c = GetParam();
  NoGradGuard no_grad;
  core::BatchInvariantScope on;
  const int64_t n = 301, m = 70;  // 70 x 301 x k >= 2^18 multiply-adds: several threads
  const Tensor x = Tensor::randn({m, c.k});
  const Tensor w = Tensor::randn({n, c.k}).to(c.weight);
  const Tensor b = c.bias ? Tensor::randn({n}) : Tensor();
  const Tensor y = ops::linear(x, w, b);
  ASSERT_EQ(y.dtype(), DType::f32);
  const Tensor ref =
      ops::linear(x.to(DType::f64), w.to(DType::f64), c.bias ? b.to(DType::f64) : Tensor());
  EXPECT_LE(ops::max(ops::abs(ops::sub(y.to(DType::f64), ref))).item(), 1e-4 * std::sqrt(c.k));
  const float* all = y.data<float>();
  for (int64_t rows : {1, 3, 5}) {
    for (int64_t start : {int64_t(0), m - rows}) {
      const Tensor part = ops::linear(x.slice(0, start, start + rows).contiguous(), w, b);
      EXPECT_EQ(std::memcmp(part.data<float>(), all + start * n, size_t(rows * n) * 4), 0)
          << rows << " rows from " << start;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RowwiseLinear,
                         ::testing::Values(RowwiseCase{DType::f32, false, 64},
                                           RowwiseCase{DType::f32, true, 67},
                                           RowwiseCase{DType::bf16, true, 96},
                                           RowwiseCase{DType::f16, false, 45}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.weight)) +
                                  (info.param.bias ? "_bias" : "") + "_k" +
                                  std::to_string(info.param.k);
                         });

}  // namespace
}  // namespace zenith
