// matmul and linear with bfloat16/float16 operands (src/ops/matmul.cpp, the CPU's gemm_lowp):
// float32 compute equal to the float32 product of the widened values, on shapes that take the
// panel path (several panels, transposed operands) and the GEMV path (decode steps), the
// gradient of a frozen 16-bit weight's input, dtypes of results and gradients, and the memory
// bound: no float32 copy of the 16-bit matrix.
#include "support/op_check.h"
#include "support/peak_rss.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

const DType kLow[] = {DType::bf16, DType::f16};

// A random 16-bit matrix and its exact float32 value.
std::pair<Tensor, Tensor> low_and_wide(const Shape& shape, DType dtype) {
  Tensor low = random_input(shape, DType::f32).to(dtype);
  return {low, low.to(DType::f32)};
}

}  // namespace

TEST(MatmulLowPrecision, LinearWithA16BitWeightEqualsFloat32) {
  struct Case {
    int64_t rows, in, out;
  };
  // 1 and 3 rows: the GEMV path (2 x 1100 x 1000: its threaded form); 300 x 1000: several
  // panels; odd sizes for the tails.
  for (Case c : {Case{1, 288, 96}, Case{3, 37, 29}, Case{2, 1100, 1000}, Case{300, 288, 1000},
                 Case{17, 45, 130}}) {
    for (DType dtype : kLow) {
      SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.in) + "x" +
                   std::to_string(c.out) + " " + dtype_name(dtype));
      Tensor x = random_input({c.rows, c.in}, DType::f32);
      auto [w, wf] = low_and_wide({c.out, c.in}, dtype);
      auto [b, bf] = low_and_wide({c.out}, dtype);
      Tensor y = ops::linear(x, w, b);
      EXPECT_EQ(y.dtype(), DType::f32);
      EXPECT_TRUE(all_close(y, ops::linear(x, wf, bf), 1e-5, 1e-5));
      EXPECT_TRUE(all_close(ops::linear(x, w), ops::linear(x, wf), 1e-5, 1e-5));
    }
  }
}

TEST(MatmulLowPrecision, MatmulEitherOperandAndTransposedViews) {
  for (DType dtype : kLow) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor a = random_input({2, 70, 40}, DType::f32);
    auto [b, bw] = low_and_wide({40, 90}, dtype);
    EXPECT_TRUE(all_close(ops::matmul(a, b), ops::matmul(a, bw), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(ops::matmul(a, b.t().contiguous().t()), ops::matmul(a, bw), 1e-5, 1e-5));
    auto [l, lw] = low_and_wide({3, 50, 40}, dtype);  // 16-bit left operand, transposed too
    Tensor r = random_input({40, 20}, DType::f32);
    EXPECT_TRUE(all_close(ops::matmul(l, r), ops::matmul(lw, r), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(ops::matmul(l.transpose(1, 2).contiguous().transpose(1, 2), r),
                          ops::matmul(lw, r), 1e-5, 1e-5));
    // A 16-bit right operand [k, n] with k far above n (dy W of a vocab head): blocks of rows.
    Tensor wide = random_input({5, 7000}, DType::f32);
    auto [tall, tall_w] = low_and_wide({7000, 40}, dtype);
    EXPECT_TRUE(all_close(ops::matmul(wide, tall), ops::matmul(wide, tall_w), 1e-4, 1e-4));
    EXPECT_TRUE(all_close(ops::matmul(wide.t().contiguous().t(), tall), ops::matmul(wide, tall_w),
                          1e-4, 1e-4));
    // Two 16-bit operands: float32 compute, the result rounded to their dtype.
    Tensor both = ops::matmul(l, b);
    EXPECT_EQ(both.dtype(), dtype);
    EXPECT_TRUE(
        all_close(both.to(DType::f32), ops::matmul(lw, bw).to(dtype).to(DType::f32), 1e-2, 1e-2));
  }
}

// A frozen 16-bit base (LoRA): the input's gradient dx = dy W reads the 16-bit weight; a weight
// that trains gets its gradient in its own dtype.
TEST(MatmulLowPrecision, GradientsThroughA16BitWeight) {
  for (DType dtype : kLow) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = random_input({2, 9, 48}, DType::f32).requires_grad_();
    auto [w, wf] = low_and_wide({33, 48}, dtype);
    Tensor xr = x.detach().requires_grad_();
    Tensor g = random_input({2, 9, 33}, DType::f32);
    ops::linear(x, w).backward(g);
    ops::linear(xr, wf).backward(g);
    EXPECT_TRUE(all_close(x.grad(), xr.grad(), 1e-5, 1e-5));
    w.requires_grad_();
    Tensor wr = wf.detach().requires_grad_();
    ops::linear(x, w).backward(g);
    ops::linear(x, wr).backward(g);
    EXPECT_EQ(w.grad().dtype(), dtype);
    EXPECT_TRUE(all_close(w.grad().to(DType::f32), wr.grad().to(dtype).to(DType::f32), 0, 0));
  }
}

// The forward and the input gradient of a 4096 x 4096 bfloat16 weight (32 MiB; a float32 copy
// is 64 MiB) stay far below one float32 copy; converting the weight first exceeds it.
TEST(MatmulLowPrecision, NoFloat32CopyOfTheWeight) {
  const int64_t n = 4096;
  Tensor w = random_input({n, n}, DType::f32).to(DType::bf16);
  Tensor x = random_input({64, n}, DType::f32).requires_grad_();
  auto step = [&](const Tensor& weight) {
    return [&x, weight] { ops::linear(x, weight).backward(Tensor::ones({64, n})); };
  };
  step(w)();  // first use: pools and buffers
  const int64_t fp32_copy = n * n * 4;
  const int64_t lowp = peak_rss_growth(step(w));
  ASSERT_GE(lowp, 0) << "cannot reset the peak RSS through /proc/self/clear_refs";
  EXPECT_LT(lowp, fp32_copy / 4) << "the bfloat16 linear grew the peak RSS by " << lowp;
  const int64_t widened = peak_rss_growth([&] { step(w.to(DType::f32))(); });
  EXPECT_GT(widened, fp32_copy) << "a float32 copy grew the peak RSS by only " << widened;
}

// Two 16-bit operands of one dtype with a float32 bias: a float32 result, the float32 sums of
// the widened values plus the bias, not rounded to 16 bits (amp's linear layers); without the
// bias the result has the operands' dtype. 300 rows take bfloat16 arithmetic where the CPU has
// it, 3 rows the float32 path.
TEST(MatmulLowPrecision, Float32BiasGivesAFloat32Result) {
  for (int64_t rows : {300, 3})
    for (DType dtype : kLow) {
      SCOPED_TRACE(std::to_string(rows) + " rows " + dtype_name(dtype));
      auto [x, xf] = low_and_wide({rows, 288}, dtype);
      auto [w, wf] = low_and_wide({130, 288}, dtype);
      Tensor bias = random_input({130}, DType::f32);
      Tensor y = ops::linear(x, w, bias);
      EXPECT_EQ(y.dtype(), DType::f32);
      EXPECT_TRUE(all_close(y, ops::linear(xf, wf, bias), 1e-5, 1e-5));
      EXPECT_EQ(ops::linear(x, w).dtype(), dtype);
    }
}

TEST(MatmulLowPrecision, Errors) {
  EXPECT_TRUE(throws_with(
      [] {
        ops::matmul(Tensor::zeros({2, 3}, DType::f64), Tensor::zeros({3, 2}, DType::bf16));
      },
      "[matmul] a is float64 but b is bfloat16"));
  EXPECT_TRUE(throws_with(
      [] {
        ops::linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}, DType::bf16),
                    Tensor::zeros({4}, DType::f16));
      },
      "[linear] bias is float16 but input is float32 and weight bfloat16"));
}
