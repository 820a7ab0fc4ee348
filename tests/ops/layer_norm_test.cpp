// ops::layer_norm and ops::rms_norm (src/ops/layer_norm.cpp).
#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

TEST(LayerNorm, ForwardAndGradients) {
  struct Case {
    Shape x, norm;
    bool affine, noncontiguous;
  };
  for (auto c : std::vector<Case>{{{4, 6}, {6}, true, false},
                                  {{2, 3, 5}, {5}, false, true},
                                  {{2, 3, 4}, {3, 4}, true, true},
                                  {{40, 8}, {8}, true, false}}) {
    SCOPED_TRACE(shape_str(c.x));
    std::vector<Tensor> in = {random_input(c.x, DType::f64, c.noncontiguous),
                              c.affine ? random_input(c.norm) : Tensor(),
                              c.affine ? random_input(c.norm) : Tensor()};
    Shape norm = c.norm;
    OpFn f = [norm](const std::vector<Tensor>& x) {
      return ops::layer_norm(x[0], norm, x[1], x[2], 1e-5);
    };
    EXPECT_TRUE(forward_matches_f64(f, in));
    for (auto& t : in)
      if (t.defined()) t.requires_grad_();
    EXPECT_TRUE(gradcheck(f, in, 1e-6, 1e-4, 1e-5));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

TEST(RmsNorm, ForwardAndGradients) {
  struct Case {
    Shape x, norm;
    bool affine, noncontiguous;
  };
  for (auto c : std::vector<Case>{{{4, 6}, {6}, true, false},
                                  {{2, 3, 5}, {5}, false, true},
                                  {{40, 8}, {8}, true, false}}) {
    SCOPED_TRACE(shape_str(c.x));
    std::vector<Tensor> in = {random_input(c.x, DType::f64, c.noncontiguous),
                              c.affine ? random_input(c.norm) : Tensor()};
    Shape norm = c.norm;
    OpFn f = [norm](const std::vector<Tensor>& x) { return ops::rms_norm(x[0], norm, x[1], 1e-6); };
    EXPECT_TRUE(forward_matches_f64(f, in));
    for (auto& t : in)
      if (t.defined()) t.requires_grad_();
    EXPECT_TRUE(gradcheck(f, in, 1e-6, 1e-4, 1e-5));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

TEST(LayerNorm, Errors) {
  Tensor x = Tensor::zeros({2, 3, 4});
  EXPECT_TRUE(throws_with([&] { ops::layer_norm(x, {3}); },
                          "[layer_norm] normalized_shape [3] does not match the trailing dims of "
                          "input [2, 3, 4]"));
  EXPECT_TRUE(throws_with([&] { ops::layer_norm(x, {4}, Tensor::ones({5})); },
                          "[layer_norm] expected weight [4], got [5]"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::rms_norm(x, {2, 3, 4, 5});
      },
      "[rms_norm] normalized_shape [2, 3, 4, 5] does not fit input"));
}

TEST(LayerNorm, SecondDerivatives) {
  Tensor x = random_input({3, 4}, DType::f64).requires_grad_();
  Tensor w = random_input({4}, DType::f64, false, 0.5, 1.5).requires_grad_();
  Tensor b = random_input({4}, DType::f64).requires_grad_();
  EXPECT_TRUE(
      gradgradcheck([](auto& in) { return ops::layer_norm(in[0], {4}, in[1], in[2]); }, {x, w, b}));
  EXPECT_TRUE(gradgradcheck([](auto& in) { return ops::rms_norm(in[0], {4}, in[1]); }, {x, w}));
}

// Hugging Face's LlamaRMSNorm for 16-bit inputs and weights: normalise in float32, cast back to
// x's dtype, multiply by the weight; the result in the dtype of weight * x.
TEST(RmsNorm, SixteenBitInputsAndWeightsComputeInFloat32) {
  const double eps = 1e-5;
  Tensor xf = random_input({6, 40}, DType::f32, false, -3, 3);
  Tensor wf = random_input({40}, DType::f32, false, 0.5, 1.5);
  // The reference in float64 from the 16-bit values, rounded where HF rounds.
  auto reference = [&](DType xt, DType wt, bool weight) {
    Tensor x = xf.to(xt).to(DType::f64);
    Tensor h = ops::mul(x, ops::rsqrt(ops::add(ops::mean(ops::square(x), {1}, true), eps)));
    h = h.to(xt).to(DType::f64);
    if (!weight) return h.to(xt);
    DType out = promote_types(xt, wt);
    return ops::mul(h, wf.to(wt).to(DType::f64)).to(out);
  };
  struct Case {
    DType x, w;
    bool weight;
  };
  for (Case c : {Case{DType::bf16, DType::bf16, true}, Case{DType::f16, DType::f16, true},
                 Case{DType::f32, DType::bf16, true}, Case{DType::bf16, DType::f32, true},
                 Case{DType::bf16, DType::bf16, false}}) {
    SCOPED_TRACE(std::string(dtype_name(c.x)) + " x, " + dtype_name(c.w) + " weight");
    Tensor y = ops::rms_norm(xf.to(c.x), {40}, c.weight ? wf.to(c.w) : Tensor(), eps);
    Tensor ref = reference(c.x, c.w, c.weight);
    EXPECT_EQ(y.dtype(), ref.dtype());
    // Within one 16-bit rounding of the reference (float32 vs float64 sums may round apart).
    const double tol = c.x == DType::f32 && c.w == DType::bf16 ? 1e-6 : 8e-3;
    EXPECT_TRUE(all_close(y.to(DType::f64), ref.to(DType::f64), tol, tol));
  }
}

// Gradients of 16-bit x and weight: the float32 gradients of the widened values, rounded once
// to each input's dtype; the fused kernel equals the decomposition.
TEST(RmsNorm, SixteenBitGradients) {
  Tensor x = random_input({5, 24}, DType::f32).to(DType::bf16).requires_grad_();
  Tensor w = random_input({24}, DType::f32, false, 0.5, 1.5).to(DType::bf16).requires_grad_();
  Tensor xr = x.detach().to(DType::f32).requires_grad_();
  Tensor wr = w.detach().to(DType::f32).requires_grad_();
  Tensor g = random_input({5, 24}, DType::f32).to(DType::bf16);
  auto fast = autograd::grad({ops::rms_norm(x, {24}, w)}, {x, w}, {g});
  auto ref = autograd::grad({ops::rms_norm(xr, {24}, wr)}, {xr, wr}, {g.to(DType::f32)});
  EXPECT_EQ(fast[0].dtype(), DType::bf16);
  EXPECT_EQ(fast[1].dtype(), DType::bf16);
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(all_close(fast[i].to(DType::f32), ref[i], 8e-3, 8e-3)) << "gradient " << i;
  std::vector<Tensor> composed;
  {
    dispatch::ForceDecomposition force(OpId::rms_norm_backward);
    composed = autograd::grad({ops::rms_norm(x, {24}, w)}, {x, w}, {g});
  }
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(all_close(fast[i].to(DType::f32), composed[i].to(DType::f32), 8e-3, 8e-3))
        << "gradient " << i;
}
