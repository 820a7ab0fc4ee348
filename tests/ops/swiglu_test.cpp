// ops::swiglu (src/ops/swiglu.cpp): silu(gate) * up against the composed ops, float64 finite
// differences (first and second order), the fused CPU kernels against the decomposition on
// strided inputs, and errors.
#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

TEST(Swiglu, EqualsSiluTimesUp) {
  Tensor g = random_input({4, 7}, DType::f64, false, -6, 6), u = random_input({4, 7});
  EXPECT_TRUE(all_close(ops::swiglu(g, u), ops::mul(ops::silu(g), u), 1e-15, 1e-15));
  Tensor gf = g.to(DType::f32), uf = u.to(DType::f32);
  EXPECT_TRUE(all_close(ops::swiglu(gf, uf), ops::mul(ops::silu(gf), uf), 1e-6, 1e-7));
}

TEST(Swiglu, Float32MatchesFloat64AndGradients) {
  OpFn f = [](const std::vector<Tensor>& x) { return ops::swiglu(x[0], x[1]); };
  std::vector<Tensor> in = {random_input({3, 2, 5}, DType::f64, true, -4, 4).requires_grad_(),
                            random_input({3, 2, 5}).requires_grad_()};
  EXPECT_TRUE(forward_matches_f64(f, in));
  EXPECT_TRUE(gradcheck(f, in));
  EXPECT_TRUE(gradgradcheck(f, in));
  EXPECT_TRUE(backward_matches_f64(f, in));
}

// The float32 kernels' contiguous runs (512-bit vectors on AVX-512 hosts, 256-bit otherwise)
// at every length across two vectors' tails and a long run, against the float64 kernels.
TEST(Swiglu, ContiguousKernelsMatchFloat64AtEveryLength) {
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 70; ++n) lengths.push_back(n);
  lengths.push_back(3 * 1024 + 5);
  for (int64_t n : lengths) {
    SCOPED_TRACE(n);
    Tensor g = random_input({n}, DType::f64, false, -12, 12), u = random_input({n}, DType::f64);
    Tensor dy = random_input({n}, DType::f64);
    Tensor gf = g.to(DType::f32), uf = u.to(DType::f32), dyf = dy.to(DType::f32);
    // The references from the float32 inputs, so only the kernels' arithmetic differs.
    Tensor g64 = gf.to(DType::f64), u64 = uf.to(DType::f64), dy64 = dyf.to(DType::f64);
    Tensor y = dispatch::call<OpId::swiglu>({gf, uf})[0];
    Tensor y64 = dispatch::call<OpId::swiglu>({g64, u64})[0];
    EXPECT_TRUE(all_close(y.to(DType::f64), y64, 1e-6, 1e-6));
    auto grads = dispatch::call<OpId::swiglu_backward>({dyf, gf, uf});
    auto grads64 = dispatch::call<OpId::swiglu_backward>({dy64, g64, u64});
    EXPECT_TRUE(all_close(grads[0].to(DType::f64), grads64[0], 1e-6, 1e-6));
    EXPECT_TRUE(all_close(grads[1].to(DType::f64), grads64[1], 1e-6, 1e-6));
  }
}

// gate and up as the two halves of one fused projection's output, and a broadcast gradient.
TEST(Swiglu, FusedKernelsEqualDecompositionOnStridedInputs) {
  ASSERT_TRUE(dispatch::has_kernel(OpId::swiglu_backward, DeviceType::CPU));
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor both = random_input({6, 2 * 37}, dtype, false, -5, 5);
    Tensor g = both.narrow(1, 0, 37).requires_grad_(), u = both.narrow(1, 37, 37);
    u.requires_grad_();
    Tensor y = ops::swiglu(g, u);
    EXPECT_TRUE(all_close(y, ops::mul(ops::silu(g), u), 1e-6, 1e-7));
    for (const Tensor& w :
         {random_input({6, 37}, dtype), random_input({1, 37}, dtype).expand({6, 37})}) {
      auto fast = autograd::grad({ops::swiglu(g, u)}, {g, u}, {w});
      std::vector<Tensor> slow;
      {
        dispatch::ForceDecomposition force(OpId::swiglu_backward);
        slow = autograd::grad({ops::swiglu(g, u)}, {g, u}, {w});
      }
      EXPECT_TRUE(all_close(fast[0], slow[0], 1e-6, 1e-7));
      EXPECT_TRUE(all_close(fast[1], slow[1], 1e-6, 1e-7));
    }
  }
}

TEST(Swiglu, LowPrecisionComputesInFloat32) {
  Tensor g = random_input({2, 8}, DType::f32).to(DType::bf16);
  Tensor u = random_input({2, 8}, DType::f32).to(DType::bf16);
  Tensor y = ops::swiglu(g, u);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(
      y.to(DType::f32),
      ops::swiglu(g.to(DType::f32), u.to(DType::f32)).to(DType::bf16).to(DType::f32), 0, 0));
}

TEST(Swiglu, Errors) {
  EXPECT_TRUE(throws_with(
      [] {
        ops::swiglu(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}));
      },
      "[swiglu] gate [2, 3] and up [3, 2] differ in shape"));
  EXPECT_TRUE(throws_with([] { ops::swiglu(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)); },
                          "[swiglu] gate is float32 but up is float64"));
}
