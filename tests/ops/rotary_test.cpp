// ops::rotary_embedding, rope_inv_freq and rope_cos_sin (src/ops/rotary.cpp): Hugging Face's
// half convention against plain loops, float64 finite differences (first and second order),
// the fused CPU kernels against the decomposition on strided, broadcast inputs, and the rotary
// frequencies against scripts/llama_reference.py.
#include <cmath>

#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// x cos + rotate_half(x) sin by loops; cos/sin [B or 1, T, D].
Tensor naive_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), d = x.size(3), half = d / 2;
  auto xv = x.contiguous().to_double_vector();
  auto cv = cos.expand({b, t, d}).contiguous().to_double_vector();
  auto sv = sin.expand({b, t, d}).contiguous().to_double_vector();
  std::vector<double> out(xv.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t ti = 0; ti < t; ++ti)
        for (int64_t j = 0; j < d; ++j) {
          const int64_t row = ((bi * h + hi) * t + ti) * d, tab = (bi * t + ti) * d;
          const double rot = j < half ? -xv[size_t(row + j + half)] : xv[size_t(row + j - half)];
          out[size_t(row + j)] =
              xv[size_t(row + j)] * cv[size_t(tab + j)] + rot * sv[size_t(tab + j)];
        }
  return Tensor::from_vector(out, x.shape());
}

std::pair<Tensor, Tensor> tables(int64_t b, int64_t t, int64_t d, DType dtype) {
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < b * t; ++i) pos.push_back((i * 7) % 23);
  return ops::rope_cos_sin(ops::rope_inv_freq(d, {.theta = 500.0}),
                           Tensor::from_vector(pos, {b, t}), dtype);
}

}  // namespace

TEST(Rotary, MatchesPlainLoops) {
  auto [cos, sin] = tables(2, 5, 8, DType::f64);
  Tensor x = random_input({2, 3, 5, 8}, DType::f64, true);
  EXPECT_TRUE(
      all_close(ops::rotary_embedding(x, cos, sin), naive_rotary(x, cos, sin), 1e-14, 1e-14));
  // Tables shared by the batch ([1, T, D]) and without a batch dim ([T, D]).
  Tensor c1 = cos.narrow(0, 1, 1), s1 = sin.narrow(0, 1, 1);
  Tensor ref = naive_rotary(x, c1, s1);
  EXPECT_TRUE(all_close(ops::rotary_embedding(x, c1, s1), ref, 1e-14, 1e-14));
  EXPECT_TRUE(all_close(ops::rotary_embedding(x, c1.squeeze(0), s1.squeeze(0)), ref, 1e-14, 1e-14));
}

TEST(Rotary, Float32MatchesFloat64AndGradients) {
  auto [cos, sin] = tables(2, 4, 6, DType::f64);
  OpFn f = [cos, sin](const std::vector<Tensor>& x) {
    return ops::rotary_embedding(x[0], cos, sin);
  };
  std::vector<Tensor> in = {random_input({2, 3, 4, 6}, DType::f64, true).requires_grad_()};
  EXPECT_TRUE(forward_matches_f64(f, in));
  EXPECT_TRUE(gradcheck(f, in));
  EXPECT_TRUE(gradgradcheck(f, in));
  EXPECT_TRUE(backward_matches_f64(f, in));
}

// cos and sin get gradients too when they require them (e.g. learned tables).
TEST(Rotary, GradientsOfTheTables) {
  OpFn f = [](const std::vector<Tensor>& x) { return ops::rotary_embedding(x[0], x[1], x[2]); };
  std::vector<Tensor> in = {random_input({2, 2, 3, 4}, DType::f64).requires_grad_(),
                            random_input({1, 3, 4}, DType::f64).requires_grad_(),
                            random_input({1, 3, 4}, DType::f64).requires_grad_()};
  EXPECT_TRUE(gradcheck(f, in));
  EXPECT_TRUE(gradgradcheck(f, in));
}

// dx needs only the tables: x is kept only when a table is trained.
TEST(Rotary, KeepsTheInputOnlyForTheTablesGradients) {
  for (bool train_tables : {false, true}) {
    SCOPED_TRACE(train_tables);
    auto [cos, sin] = tables(2, 3, 4, DType::f32);
    cos = cos.detach().requires_grad_(train_tables);
    Tensor leaf = Tensor::randn({2, 2, 3, 4}).requires_grad_();
    Tensor x = ops::add(leaf, 1.0);
    Tensor y = ops::rotary_embedding(x, cos, sin);
    EXPECT_EQ(kept_for_backward(x), train_tables);
    Tensor dy = Tensor::randn({2, 2, 3, 4});
    y.backward(dy);
    Tensor x1 = ops::add(leaf.detach(), 1.0).requires_grad_();
    ops::rotary_embedding(x1, cos.detach(), sin).backward(dy);
    EXPECT_TRUE(all_close(leaf.grad(), x1.grad()));
  }
}

// q as HF makes it ([B, T, H, D] viewed as [B, H, T, D]), tables broadcast over the batch, and a
// strided incoming gradient: the fused kernels equal the plain loops and the decomposition.
TEST(Rotary, FusedKernelsEqualDecompositionOnStridedInputs) {
  ASSERT_TRUE(dispatch::has_kernel(OpId::rotary_embedding_backward, DeviceType::CPU));
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto [cos, sin] = tables(1, 7, 10, dtype);
    Tensor x = random_input({3, 7, 5, 10}, dtype).transpose(1, 2).requires_grad_();
    Tensor y = ops::rotary_embedding(x, cos, sin);
    EXPECT_TRUE(all_close(y.to(DType::f64), naive_rotary(x.detach(), cos, sin), 1e-6, 1e-6));
    Tensor w = random_input({3, 7, 5, 10}, dtype).transpose(1, 2);
    Tensor fast = autograd::grad({y}, {x}, {w})[0];
    Tensor slow;
    {
      dispatch::ForceDecomposition force(OpId::rotary_embedding_backward);
      slow = autograd::grad({ops::rotary_embedding(x, cos, sin)}, {x}, {w})[0];
    }
    EXPECT_TRUE(all_close(fast, slow, 1e-6, 1e-7));
  }
}

TEST(Rotary, LowPrecisionComputesInFloat32) {
  auto [cos, sin] = tables(1, 4, 8, DType::f32);
  Tensor x = random_input({1, 2, 4, 8}, DType::f32).to(DType::bf16);
  Tensor y = ops::rotary_embedding(x, cos, sin);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(
      y.to(DType::f32),
      ops::rotary_embedding(x.to(DType::f32), cos, sin).to(DType::bf16).to(DType::f32), 0, 0));
}

// inv_freq for rope_theta 500000, head_dim 16, from scripts/llama_reference.py's rope_inv_freq:
//   /usr/bin/python3 -c "import sys; sys.path.insert(0, 'scripts'); from llama_reference import *;
//   print(rope_inv_freq(Config({... 'hidden_size': 64, 'num_attention_heads': 4,
//   'rope_theta': 500000.0, 'rope_scaling': SCALING})).tolist())"
TEST(Rotary, InverseFrequenciesMatchTheReference) {
  struct Case {
    ops::RopeOptions options;
    std::vector<double> expected;
  };
  std::vector<Case> cases(3);
  cases[0].expected = {1.0,
                       0.19392274474868576,
                       0.03760603093086393,
                       0.0072926647372171085,
                       0.001414213562373095,
                       0.0002742481756762073,
                       5.318295896944989e-05,
                       1.031338537721246e-05};
  cases[1].options.scaling = "linear";
  cases[1].options.factor = 4.0;
  cases[1].expected = {0.25,
                       0.04848068618717144,
                       0.009401507732715983,
                       0.0018231661843042771,
                       0.00035355339059327376,
                       6.856204391905182e-05,
                       1.3295739742362472e-05,
                       2.578346344303115e-06};
  // original_max_position_embeddings 64: the three bands (kept, interpolated, divided).
  cases[2].options.scaling = "llama3";
  cases[2].options.factor = 8.0;
  cases[2].options.low_freq_factor = 1.0;
  cases[2].options.high_freq_factor = 4.0;
  cases[2].options.original_max_position_embeddings = 64;
  cases[2].expected = {1.0,
                       0.0794030091792082,
                       0.004700753866357992,
                       0.0009115830921521386,
                       0.00017677669529663688,
                       3.428102195952591e-05,
                       6.647869871181236e-06,
                       1.2891731721515574e-06};
  for (Case& c : cases) c.options.theta = 500000.0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.options.scaling);
    Tensor inv = ops::rope_inv_freq(16, c.options);
    EXPECT_TRUE(all_close(inv, Tensor::from_vector(c.expected, {8}), 1e-13, 0));
  }
}

TEST(Rotary, CosSinTablesInHfLayout) {
  Tensor inv = ops::rope_inv_freq(4, {.theta = 100.0});  // [1, 0.1]
  Tensor pos = Tensor::from_vector(std::vector<int64_t>{0, 3, 7, 2}, {2, 2});
  auto [cos, sin] = ops::rope_cos_sin(inv, pos);
  ASSERT_EQ(cos.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(cos.dtype(), DType::f32);
  std::vector<double> c, s;
  for (int64_t p : {0, 3, 7, 2})
    for (double f : {1.0, 0.1, 1.0, 0.1}) {
      c.push_back(std::cos(p * f));
      s.push_back(std::sin(p * f));
    }
  EXPECT_TRUE(all_close(cos.to(DType::f64), Tensor::from_vector(c, {2, 2, 4}), 1e-7, 1e-7));
  EXPECT_TRUE(all_close(sin.to(DType::f64), Tensor::from_vector(s, {2, 2, 4}), 1e-7, 1e-7));
}

TEST(Rotary, Errors) {
  Tensor x = Tensor::zeros({1, 2, 3, 5}), t = Tensor::zeros({1, 3, 5});
  EXPECT_TRUE(throws_with([&] { ops::rotary_embedding(x, t, t); },
                          "[rotary_embedding] head dim 5 must be even"));
  Tensor x4 = Tensor::zeros({1, 2, 3, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        ops::rotary_embedding(x4, Tensor::zeros({1, 2, 4}), t);
      },
      "[rotary_embedding] cos [1, 2, 4] does not fit x [1, 2, 3, 4]"));
  EXPECT_TRUE(throws_with([&] { ops::rope_inv_freq(8, {.scaling = "yarn"}); },
                          "[rope_inv_freq] rope_scaling type 'yarn' not supported (supported: "
                          "default, linear, llama3)"));
  EXPECT_TRUE(throws_with([&] { ops::rope_inv_freq(7); }, "[rope_inv_freq] head_dim must be even"));
}
