// Float64Gradients (train/float64_gradients.h): data-parallel LoRA fine-tuning sums an adapter's
// weight gradient dy^T x over the rows in float64, all-reduces the ranks' float64 sums and rounds
// once, so that N ranks of batch B give one process's float32 gradient of batch N*B whichever way
// the rows are split. This checks that property on given dy and x, apart from the forward: the
// CLI test (FinetuneNproc) compares whole runs, whose float32 activations can differ in rounding
// between a GEMM of 8 sequences' rows and one of 4 (oneDNN's sgemm treats a row by where it falls
// in the product's last block of rows).
#include "train/float64_gradients.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "support/tensor_bits.h"
#include "zenith/zenith.h"

namespace zenith::testing {
namespace {

using Parts = std::vector<std::pair<int64_t, int64_t>>;

// The float32 gradient of an [out, in] weight when each part of the rows is one rank's: each
// rank's own Float64Gradients takes its rows, and the ranks' float64 gradients are added in
// float64 (as Ranks::sum_gradients all-reduces them) and rounded once.
Tensor ranks_gradient(const Tensor& dy, const Tensor& x, const Parts& parts) {
  Tensor total;
  for (auto [begin, end] : parts) {
    Tensor w = Tensor::zeros({dy.size(1), x.size(1)});
    w.requires_grad_();
    finetune::Float64Gradients sums({w});
    EXPECT_TRUE(sums.take(w, dy.slice(0, begin, end), x.slice(0, begin, end)));
    EXPECT_FALSE(w.grad().defined()) << "the sum stays in the sink until finish()";
    sums.finish();
    Tensor g = w.grad();
    EXPECT_EQ(g.dtype(), DType::f64);
    total = total.defined() ? ops::add(total, g) : g;
  }
  return total.to(DType::f32);
}

TEST(Float64Gradients, RowsSplitAcrossRanksRoundToTheSameFloat32) {
  manual_seed(5);
  // A LoRA A matrix's gradient at rank 8 for a 288-wide layer, 96 rows (micro-batches of
  // sequences); some rows masked out (zero gradient), as padding is.
  const int64_t rows = 96, out = 8, in = 288;
  Tensor dy = Tensor::randn({rows, out}), x = Tensor::randn({rows, in});
  dy.slice(0, 90, 96).fill_(0.0);
  const Tensor one = ranks_gradient(dy, x, {{0, rows}});
  // The float64 reference, each element summed over the rows in reverse order, rounded once.
  const std::vector<double> pd = dy.to_double_vector(), px = x.to_double_vector();
  const std::vector<double> got = one.to_double_vector();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t t = rows - 1; t >= 0; --t) s += pd[size_t(t * out + o)] * px[size_t(t * in + i)];
      ASSERT_EQ(got[size_t(o * in + i)], double(float(s))) << "element (" << o << ", " << i << ")";
    }
  for (const Parts& parts :
       {Parts{{0, 48}, {48, 96}}, Parts{{0, 40}, {40, 96}}, Parts{{0, 1}, {1, 96}},
        Parts{{0, 32}, {32, 64}, {64, 96}}, Parts{{0, 90}, {90, 96}}})
    EXPECT_TRUE(same_bits(ranks_gradient(dy, x, parts), one)) << parts.size() << " ranks";
}

TEST(Float64Gradients, TakesOnlyTheFloat32MatricesItWasGiven) {
  Tensor w = Tensor::zeros({4, 6}), other = Tensor::zeros({4, 6}), bias = Tensor::zeros({4});
  finetune::Float64Gradients sums({w, bias});
  Tensor dy = Tensor::randn({3, 4}), x = Tensor::randn({3, 6});
  EXPECT_FALSE(sums.take(other, dy, x)) << "not among its parameters";
  EXPECT_FALSE(sums.take(bias, dy, x)) << "a vector is not a linear layer's weight";
  EXPECT_FALSE(sums.take(w, dy.to(DType::f64), x.to(DType::f64))) << "float32 rows only";
  EXPECT_TRUE(sums.take(w, dy, x));
}

}  // namespace
}  // namespace zenith::testing
