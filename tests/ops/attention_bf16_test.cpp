// ops::scaled_dot_product_attention on bfloat16 inputs where the CPU has bfloat16 arithmetic
// (src/backend/cpu/attention_bf16.cpp: QK^T, PV and the backward's products in bf16, float32
// accumulation, softmax in float32) against float64 attention of the same bfloat16 values, and
// the float32 path that ZENITH_BF16_COMPUTE=0 (or a CPU without AVX512_BF16) takes.
//
// The tolerances. Products of two bfloat16 values are exact in float32, so besides float32 sums
// (~1e-7) the error comes from roundings to bfloat16 (relative 2^-9 each):
// - forward: P rounded as the operand of PV moves out by at most 2^-9 sum_j p_j |v_j| <=
//   2^-9 max|v|, and out itself is rounded (2^-9 |out| <= 2^-9 max|v|): |out - ref| <= 2^-8 max|v|.
// - backward: dO (the gradient widened from bf16), O (in Di = rowsum(dO O)), P and dS are
//   rounded once each and the gradient once more, 2^-9 relative each (4 x 2^-9 = 2^-7 of the
//   terms' magnitude); dS = P (dP - Di) cancels, which that bound cannot see elementwise, so the
//   gradients are held to 2^-6 of their largest magnitude (measured 2.6e-3 to 4.2e-3 here).
#include <cmath>
#include <cstdlib>

#include "support/op_check.h"
#include "zenith/cpu_features.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct Shape4 {
  int64_t batch, hq, hkv, t, s, d;
  bool causal, padding;
};

const std::vector<Shape4> kShapes = {
    {2, 4, 2, 130, 130, 64, true, false},  // crosses the 64-row and 128-key blocks, GQA
    {1, 2, 1, 67, 201, 32, true, true},    // T < S (a chunk after a cache), padding
    {1, 3, 3, 40, 40, 48, false, false},   // not causal
};

ops::AttentionOptions options(const Shape4& c) {
  ops::AttentionOptions o{.causal = c.causal};
  if (c.padding) {
    std::vector<int64_t> m(size_t(c.batch * c.s), 1);
    m[0] = m[size_t(c.s - 1)] = 0;
    o.key_padding_mask = Tensor::from_vector(m, {c.batch, c.s});
  }
  return o;
}

// q, k, v as bfloat16 values (stored float64, so the reference sees exactly what bf16 holds).
std::vector<Tensor> bf16_values(const Shape4& c) {
  manual_seed(11);
  std::vector<Tensor> in = {random_input({c.batch, c.hq, c.t, c.d}, DType::f64, false, -2, 2),
                            random_input({c.batch, c.hkv, c.s, c.d}, DType::f64, false, -2, 2),
                            random_input({c.batch, c.hkv, c.s, c.d}, DType::f64)};
  for (auto& t : in) t = t.to(DType::bf16).to(DType::f64);
  return in;
}

OpFn attention_as_f64(const ops::AttentionOptions& o) {
  return [o](const std::vector<Tensor>& x) {
    return ops::scaled_dot_product_attention(x[0], x[1], x[2], o).to(DType::f64);
  };
}

double largest(const Tensor& t) { return ops::max(ops::abs(t.to(DType::f64))).item(); }
double largest_difference(const Tensor& a, const Tensor& b) {
  return largest(ops::sub(a.to(DType::f64), b.to(DType::f64)));
}

std::vector<Tensor> cast(const std::vector<Tensor>& in, DType t) {
  std::vector<Tensor> out;
  for (const Tensor& x : in) out.push_back(x.to(t));
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return ops::sum(ops::eq(a.to(DType::f64), b.to(DType::f64)).to(DType::f64)).item() ==
         double(a.numel());
}

}  // namespace

TEST(AttentionBf16, ForwardWithinBf16RoundingOfFloat64) {
  for (const Shape4& c : kShapes) {
    SCOPED_TRACE(std::to_string(c.t) + "x" + std::to_string(c.s) + " d" + std::to_string(c.d));
    const auto in = bf16_values(c);
    const auto o = options(c);
    const Tensor ref = ops::scaled_dot_product_attention(in[0], in[1], in[2], o);
    const auto b = cast(in, DType::bf16);
    const Tensor y = ops::scaled_dot_product_attention(b[0], b[1], b[2], o);
    EXPECT_EQ(y.dtype(), DType::bf16);
    const double err = largest_difference(y, ref), bound = std::ldexp(largest(in[2]), -8);
    std::printf("forward: |out - ref| %.2e, bound 2^-8 max|v| %.2e\n", err, bound);
    EXPECT_LE(err, bound + 1e-6);
    // Which path ran: bfloat16 products round P, so they differ from float32 arithmetic on the
    // same values (rounded to bf16 at the end) where the CPU has them, and equal it elsewhere.
    const auto f = cast(in, DType::f32);
    const Tensor y32 = ops::scaled_dot_product_attention(f[0], f[1], f[2], o).to(DType::bf16);
    EXPECT_EQ(bitwise_equal(y, y32), !bf16_arithmetic());
  }
}

TEST(AttentionBf16, GradientsWithinBf16RoundingOfFloat64) {
  for (const Shape4& c : kShapes) {
    SCOPED_TRACE(std::to_string(c.t) + "x" + std::to_string(c.s) + " d" + std::to_string(c.d));
    auto ref_in = bf16_values(c);
    for (auto& t : ref_in) t.requires_grad_();
    const OpFn f = attention_as_f64(options(c));
    const Tensor w = output_weights(f, ref_in);
    const auto ref = autograd_grads(f, ref_in, w);
    auto in = cast_inputs(ref_in, DType::bf16);
    const auto got = autograd_grads(f, in, w);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(got[i].dtype(), DType::bf16) << "gradient " << i;
      const double err = largest_difference(got[i], ref[i]) / largest(ref[i]);
      std::printf("gradient %zu: max |g - ref| / max |ref| %.2e\n", i, err);
      EXPECT_LE(err, std::ldexp(1.0, -6)) << "gradient " << i;
    }
  }
}

// ZENITH_BF16_COMPUTE=0 (what an AVX2-only CPU gets): bfloat16 inputs compute in float32, the
// result rounded to bfloat16. bf16_arithmetic() is read once per process: a fresh child.
bool float32_path_when_off() {
  setenv("ZENITH_BF16_COMPUTE", "0", 1);
  const Shape4 c = kShapes[0];
  const auto in = bf16_values(c);
  const auto b = cast(in, DType::bf16), f = cast(in, DType::f32);
  const Tensor y = ops::scaled_dot_product_attention(b[0], b[1], b[2], options(c));
  const Tensor y32 = ops::scaled_dot_product_attention(f[0], f[1], f[2], options(c));
  return !bf16_arithmetic() && y.dtype() == DType::bf16 && bitwise_equal(y, y32.to(DType::bf16));
}

TEST(AttentionBf16, OffTheFloat32PathRuns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(float32_path_when_off() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}
