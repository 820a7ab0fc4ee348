// ops::layer_norm and ops::rms_norm (src/ops/layer_norm.cpp).
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
