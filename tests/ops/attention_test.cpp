// ops::scaled_dot_product_attention (src/ops/attention.cpp): float64 reference and finite
// differences, a plain-loop reference with HF's repeat_kv semantics, the fused CPU kernels
// against the composed form, KV-cache decode steps, fully masked rows, and the long-sequence
// memory bound (no [T, S] matrix).
#include <cmath>
#include <limits>
#include <sstream>

#include "core/dispatch.h"
#include "ops/op_utils.h"
#include "support/op_check.h"
#include "support/peak_rss.h"
#include "zenith/cpu_features.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct Config {
  int64_t batch, hq, hkv, t, s, d, dv;
  bool causal, padding, mask;
};

std::string describe(const Config& c) {
  std::ostringstream os;
  os << "B" << c.batch << " Hq" << c.hq << " Hkv" << c.hkv << " T" << c.t << " S" << c.s << " D"
     << c.d << " Dv" << c.dv << (c.causal ? " causal" : "") << (c.padding ? " padding" : "")
     << (c.mask ? " mask" : "");
  return os.str();
}

// key_padding_mask [B, S]: batch b pads its first b keys and its last one (when S > 2).
Tensor padding_for(const Config& c) {
  std::vector<int64_t> m(size_t(c.batch * c.s), 1);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t j = 0; j < std::min(b, c.s - 1); ++j) m[size_t(b * c.s + j)] = 0;
    if (c.s > 2) m[size_t(b * c.s + c.s - 1)] = 0;
  }
  return Tensor::from_vector(m, {c.batch, c.s});
}

ops::AttentionOptions options_for(const Config& c, DType dtype) {
  ops::AttentionOptions o{.causal = c.causal};
  if (c.padding) o.key_padding_mask = padding_for(c);
  if (c.mask) {
    manual_seed(7);
    o.attn_mask = Tensor::uniform({c.batch, 1, c.t, c.s}, -1.0, 1.0, dtype);
  }
  return o;
}

std::vector<Tensor> inputs_for(const Config& c, DType dtype) {
  return {random_input({c.batch, c.hq, c.t, c.d}, dtype),
          random_input({c.batch, c.hkv, c.s, c.d}, dtype),
          random_input({c.batch, c.hkv, c.s, c.dv}, dtype)};
}

// Plain loops in double: softmax(q k^T scale + masks) v, query head h reading kv head
// h / (Hq / Hkv), rows with no visible key 0.
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Config& c,
                       const ops::AttentionOptions& o) {
  const double scale = o.scale.value_or(1.0 / std::sqrt(double(c.d)));
  auto qv = q.to_double_vector(), kv = k.to_double_vector(), vv = v.to_double_vector();
  std::vector<double> mv = o.attn_mask.defined()
                               ? o.attn_mask.expand({c.batch, c.hq, c.t, c.s}).to_double_vector()
                               : std::vector<double>();
  std::vector<int64_t> pad = o.key_padding_mask.defined()
                                 ? o.key_padding_mask.to(DType::i64).to_int_vector()
                                 : std::vector<int64_t>();
  std::vector<double> out(size_t(c.batch * c.hq * c.t * c.dv), 0.0);
  const int64_t g = c.hq / c.hkv;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.t; ++i) {
        std::vector<double> sc(size_t(c.s), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c.s; ++j) {
          if (o.causal && j > i + c.s - c.t) continue;
          if (!pad.empty() && pad[size_t(b * c.s + j)] == 0) continue;
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot += qv[size_t(((b * c.hq + h) * c.t + i) * c.d + e)] *
                   kv[size_t(((b * c.hkv + h / g) * c.s + j) * c.d + e)];
          sc[size_t(j)] = dot * scale;
          if (!mv.empty()) sc[size_t(j)] += mv[size_t(((b * c.hq + h) * c.t + i) * c.s + j)];
          mx = std::max(mx, sc[size_t(j)]);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;
        double l = 0;
        for (auto& x : sc) l += (x = std::exp(x - mx));
        for (int64_t j = 0; j < c.s; ++j)
          for (int64_t e = 0; e < c.dv; ++e)
            out[size_t(((b * c.hq + h) * c.t + i) * c.dv + e)] +=
                sc[size_t(j)] / l * vv[size_t(((b * c.hkv + h / g) * c.s + j) * c.dv + e)];
      }
  return Tensor::from_vector(out, {c.batch, c.hq, c.t, c.dv});
}

OpFn attention_fn(const ops::AttentionOptions& o) {
  return [o](const std::vector<Tensor>& x) {
    return ops::scaled_dot_product_attention(x[0], x[1], x[2], o);
  };
}

// Small configurations for finite differences.
const std::vector<Config> kSmall = {
    {1, 1, 1, 3, 3, 2, 2, false, false, false},  //
    {2, 4, 2, 3, 5, 3, 4, true, true, false},    // GQA, T < S (a chunk after a cache)
    {1, 2, 1, 4, 4, 3, 3, true, false, true},    // multi-query, causal + additive mask
    {2, 2, 2, 1, 6, 4, 2, true, true, false},    // one decode step
    {1, 3, 3, 5, 2, 2, 3, false, true, true},    // T > S
};

// Larger ones that cross the kernels' block sizes, odd sizes, causal T > S (empty rows).
const std::vector<Config> kLarge = {
    {2, 6, 6, 130, 130, 48, 48, true, false, false}, {1, 4, 2, 67, 201, 64, 64, true, true, false},
    {2, 4, 1, 1, 300, 64, 64, true, true, false},    {1, 2, 2, 150, 97, 40, 24, true, false, true},
    {1, 3, 1, 77, 77, 33, 33, false, true, true},    {3, 2, 2, 5, 260, 16, 16, false, false, false},
};

}  // namespace

TEST(Attention, MatchesPlainLoops) {
  for (const Config& c : kSmall) {
    SCOPED_TRACE(describe(c));
    auto in = inputs_for(c, DType::f64);
    auto o = options_for(c, DType::f64);
    Tensor y = ops::scaled_dot_product_attention(in[0], in[1], in[2], o);
    EXPECT_TRUE(all_close(y, naive_attention(in[0], in[1], in[2], c, o), 1e-12, 1e-12));
  }
}

TEST(Attention, Float32MatchesFloat64AndGradients) {
  for (const Config& c : kSmall) {
    SCOPED_TRACE(describe(c));
    auto in = inputs_for(c, DType::f64);
    OpFn f = attention_fn(options_for(c, DType::f64));
    EXPECT_TRUE(forward_matches_f64(f, in));
    for (auto& t : in) t.requires_grad_();
    EXPECT_TRUE(gradcheck(f, in, 1e-6, 1e-4, 1e-6));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

TEST(Attention, SecondDerivativesThroughTheComposedGradient) {
  Config c{1, 2, 1, 3, 4, 2, 2, true, false, false};
  auto in = inputs_for(c, DType::f64);
  for (auto& t : in) t.requires_grad_();
  EXPECT_TRUE(gradgradcheck(attention_fn(options_for(c, DType::f64)), in));
}

// The fused kernels against the op's composed form (forward) and its decomposition (gradient),
// on shapes that cross block boundaries.
TEST(Attention, FusedKernelsEqualComposed) {
  ASSERT_TRUE(dispatch::has_kernel(OpId::attention, DeviceType::CPU));
  ASSERT_TRUE(dispatch::has_kernel(OpId::attention_backward, DeviceType::CPU));
  for (DType dtype : {DType::f32, DType::f64}) {
    const double tol = dtype == DType::f64 ? 1e-10 : 2e-5;
    for (const Config& c : kLarge) {
      SCOPED_TRACE(describe(c) + " " + dtype_name(dtype));
      auto in = inputs_for(c, dtype);
      auto o = options_for(c, dtype);
      OpFn f = attention_fn(o);
      Tensor pad = o.key_padding_mask.defined() ? o.key_padding_mask.to(DType::b8) : Tensor();
      AttentionAttrs attrs{.causal = c.causal, .scale = 1.0 / std::sqrt(double(c.d))};
      {
        NoGradGuard no_grad;
        auto fused =
            dispatch::call<OpId::attention>({in[0], in[1], in[2], pad, o.attn_mask}, attrs);
        auto composed =
            ops::detail::attention_composed({in[0], in[1], in[2], pad, o.attn_mask}, attrs);
        EXPECT_TRUE(all_close(fused[0], composed[0], tol, tol)) << "output";
        EXPECT_TRUE(all_close(fused[1], composed[1], tol, tol)) << "logsumexp";
      }
      for (auto& t : in) t.requires_grad_();
      Tensor w = output_weights(f, in).to(dtype);
      auto fast = autograd_grads(f, in, w);
      std::vector<Tensor> slow;
      for (auto& t : in) t.zero_grad();  // the fused pass's gradients are not accumulated
      {
        dispatch::ForceDecomposition force(OpId::attention_backward);
        slow = autograd_grads(f, in, w);
      }
      for (size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(all_close(fast[i], slow[i], tol, tol)) << "gradient " << i;
    }
  }
}

// A KV-cache decode step (T new queries after S - T cached keys, causal) equals the matching
// rows of causal attention over the whole sequence.
TEST(Attention, DecodeStepsEqualRowsOfTheFullCausalAttention) {
  const int64_t s = 37, d = 16;
  Tensor q = random_input({2, 4, s, d}, DType::f32), k = random_input({2, 2, s, d}, DType::f32);
  Tensor v = random_input({2, 2, s, d}, DType::f32);
  Tensor full = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
  for (int64_t t : {1, 3}) {
    for (int64_t past : {int64_t(0), int64_t(10), s - t}) {
      SCOPED_TRACE("T " + std::to_string(t) + " after " + std::to_string(past));
      Tensor step =
          ops::scaled_dot_product_attention(q.narrow(2, past, t), k.narrow(2, 0, past + t),
                                            v.narrow(2, 0, past + t), {.causal = true});
      EXPECT_TRUE(all_close(step, full.narrow(2, past, t), 1e-5, 1e-6));
    }
  }
}

// Rows that see no key (causal with T > S, or every key padded) output 0 and get 0 gradients.
TEST(Attention, FullyMaskedRowsAreZero) {
  Tensor q = random_input({2, 2, 4, 3}, DType::f64).requires_grad_();
  Tensor k = random_input({2, 2, 2, 3}, DType::f64).requires_grad_();
  Tensor v = random_input({2, 2, 2, 3}, DType::f64).requires_grad_();
  ops::AttentionOptions o{.causal = true};
  o.key_padding_mask = Tensor::from_vector(std::vector<int64_t>{1, 1, 0, 0}, {2, 2});
  Tensor y = ops::scaled_dot_product_attention(q, k, v, o);
  // Causal with T = 4 > S = 2: query rows 0 and 1 see nothing; batch 1 pads every key.
  EXPECT_TRUE(all_close(y.narrow(2, 0, 2), Tensor::zeros({2, 2, 2, 3}, DType::f64)));
  EXPECT_TRUE(all_close(y.select(0, 1), Tensor::zeros({2, 4, 3}, DType::f64)));
  EXPECT_GT(ops::max(ops::abs(y.select(0, 0).narrow(1, 2, 2))).item(), 0.0);
  ops::sum(y).backward();
  EXPECT_TRUE(all_close(q.grad().select(0, 1), Tensor::zeros({2, 4, 3}, DType::f64)));
  EXPECT_TRUE(
      all_close(q.grad().select(0, 0).narrow(1, 0, 2), Tensor::zeros({2, 2, 3}, DType::f64)));
  for (const Tensor& g : {q.grad(), k.grad(), v.grad()})
    EXPECT_TRUE(std::isfinite(ops::sum(ops::abs(g)).item()));
}

// q, k, v as HF makes them (projections [B, T, H, D] viewed as [B, H, T, D]) and a gradient
// that arrives strided give what contiguous inputs give.
TEST(Attention, StridedInputs) {
  Config c{2, 4, 2, 9, 9, 8, 8, true, false, false};
  Tensor q = random_input({2, 9, 4, 8}, DType::f32).transpose(1, 2);
  Tensor k = random_input({2, 9, 2, 8}, DType::f32).transpose(1, 2);
  Tensor v = random_input({2, 9, 2, 8}, DType::f32).transpose(1, 2);
  Tensor a = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
  Tensor b = ops::scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(),
                                               {.causal = true});
  EXPECT_TRUE(all_close(a, b, 1e-6, 1e-7));
  EXPECT_TRUE(
      all_close(a, naive_attention(q, k, v, c, {.causal = true}).to(DType::f32), 1e-5, 1e-6));
}

// The backward's dk and dv take k's and v's layout where those view [B, S, H, D] buffers (a
// projection split into heads), so autograd's transpose back and reshape need no copy; from
// contiguous inputs they are contiguous. Values equal either way, across key blocks and with
// the keys split over more threads than heads.
TEST(Attention, KeyAndValueGradientsTakeTheirInputsLayout) {
  const int before = context::get_num_threads();
  for (int64_t s : {9, 150}) {
    for (int threads : {1, 5}) {
      SCOPED_TRACE("S " + std::to_string(s) + ", " + std::to_string(threads) + " threads");
      context::set_num_threads(threads);
      Tensor q = random_input({2, s, 4, 8}, DType::f32).transpose(1, 2);
      Tensor k = random_input({2, s, 2, 8}, DType::f32).transpose(1, 2);
      Tensor v = random_input({2, s, 2, 8}, DType::f32).transpose(1, 2);
      Tensor dout = random_input({2, 4, s, 8}, DType::f32);
      const AttentionAttrs attrs{.causal = true, .scale = 0.25};
      auto grads = [&](const Tensor& kk, const Tensor& vv) {
        auto fwd = dispatch::call<OpId::attention>({q, kk, vv, Tensor(), Tensor()}, attrs);
        return dispatch::call<OpId::attention_backward>(
            {dout, q, kk, vv, fwd[0], fwd[1], Tensor(), Tensor()}, attrs);
      };
      auto strided = grads(k, v);
      auto plain = grads(k.contiguous(), v.contiguous());
      EXPECT_EQ(strided[1].strides(), k.strides());
      EXPECT_EQ(strided[2].strides(), v.strides());
      EXPECT_TRUE(strided[2].transpose(1, 2).is_contiguous());
      EXPECT_TRUE(plain[1].is_contiguous());
      EXPECT_TRUE(plain[2].is_contiguous());
      for (size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(all_close(strided[i], plain[i], 0, 0)) << "gradient " << i;
    }
  }
  context::set_num_threads(before);
}

// bfloat16 where the CPU has bfloat16 arithmetic: attention_bf16_test.cpp.
TEST(Attention, LowPrecisionInputsComputeInFloat32) {
  Tensor q = random_input({1, 2, 5, 8}, DType::f32), k = random_input({1, 2, 5, 8}, DType::f32);
  Tensor v = random_input({1, 2, 5, 8}, DType::f32);
  for (DType dtype : {DType::bf16, DType::f16}) {
    if (dtype == DType::bf16 && bf16_arithmetic()) continue;
    SCOPED_TRACE(dtype_name(dtype));
    Tensor y =
        ops::scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), {.causal = true});
    EXPECT_EQ(y.dtype(), dtype);
    Tensor ref =
        ops::scaled_dot_product_attention(q.to(dtype).to(DType::f32), k.to(dtype).to(DType::f32),
                                          v.to(dtype).to(DType::f32), {.causal = true});
    EXPECT_TRUE(all_close(y.to(DType::f32), ref.to(dtype).to(DType::f32), 0, 0));
  }
}

TEST(Attention, Errors) {
  Tensor q = Tensor::zeros({1, 4, 3, 8}), k = Tensor::zeros({1, 3, 5, 8});
  Tensor v = Tensor::zeros({1, 3, 5, 8});
  EXPECT_TRUE(throws_with([&] { ops::scaled_dot_product_attention(q, k, v); },
                          "[scaled_dot_product_attention] 4 query heads are not a multiple of 3 "
                          "key/value heads"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::scaled_dot_product_attention(q, Tensor::zeros({1, 2, 5, 6}),
                                          Tensor::zeros({1, 2, 5, 8}));
      },
      "[scaled_dot_product_attention] shapes do not match: q [1, 4, 3, 8], k [1, 2, 5, 6]"));
  EXPECT_TRUE(throws_with([&] { ops::scaled_dot_product_attention(q.select(0, 0), k, v); },
                          "[scaled_dot_product_attention] expected q [B, Hq, T, D]"));
  Tensor k2 = Tensor::zeros({1, 2, 5, 8}), v2 = Tensor::zeros({1, 2, 5, 8});
  ops::AttentionOptions bad_pad;
  bad_pad.key_padding_mask = Tensor::ones({1, 4});
  EXPECT_TRUE(throws_with([&] { ops::scaled_dot_product_attention(q, k2, v2, bad_pad); },
                          "[scaled_dot_product_attention] key_padding_mask must be bool or "
                          "integer, got float32"));
  bad_pad.key_padding_mask = Tensor::ones({1, 4}, DType::i64);
  EXPECT_TRUE(throws_with([&] { ops::scaled_dot_product_attention(q, k2, v2, bad_pad); },
                          "[scaled_dot_product_attention] expected key_padding_mask [1, 5], got "
                          "[1, 4]"));
  ops::AttentionOptions bad_mask{.attn_mask = Tensor::zeros({1, 2, 3, 5})};
  EXPECT_TRUE(throws_with([&] { ops::scaled_dot_product_attention(q, k2, v2, bad_mask); },
                          "[scaled_dot_product_attention] attn_mask [1, 2, 3, 5] does not "
                          "broadcast to the scores [B, Hq, T, S] = [1, 4, 3, 5]"));
  EXPECT_TRUE(throws_with(
      [&] { ops::scaled_dot_product_attention(q, k2.to(DType::f64), v2); },
      "[scaled_dot_product_attention] q, k and v must share a dtype, got float32, float64"));
}

// T = S = 4096, D = 64: forward and backward stay far below one [T, S] float32 matrix (64 MiB)
// of extra memory; the composed gradient, which materialises scores, exceeds it (the measure
// works).
TEST(Attention, LongSequencesMaterialiseNoScoreMatrix) {
  const int64_t n = 4096, d = 64;
  const int64_t matrix = n * n * 4;
  Tensor q = random_input({1, 1, n, d}, DType::f32).requires_grad_();
  Tensor k = random_input({1, 1, n, d}, DType::f32).requires_grad_();
  Tensor v = random_input({1, 1, n, d}, DType::f32).requires_grad_();
  auto step = [&] {
    Tensor y = ops::scaled_dot_product_attention(q, k, v, {.causal = true});
    ops::sum(y).backward();
  };
  step();  // first use: thread pools, buffers of the gemm library
  const int64_t fused = peak_rss_growth(step);
  ASSERT_GE(fused, 0) << "cannot reset the peak RSS through /proc/self/clear_refs";
  EXPECT_LT(fused, matrix / 4) << "fused attention grew the peak RSS by " << fused << " bytes";
  dispatch::ForceDecomposition force(OpId::attention_backward);
  const int64_t composed = peak_rss_growth(step);
  EXPECT_GT(composed, matrix) << "composed attention grew the peak RSS by " << composed << " bytes";
}

// The float32 kernels (512-bit on AVX-512 hosts) against the op's composed float64 forms at
// every causal length up to 70 and a few past a key block: in a block the causal mask cuts, each
// row's exps run over its visible keys rounded up to whole vectors (the masked scores past them
// must give exactly 0), and a row whose max stays skips its rescale; with a padding mask, and
// T < S (a chunk after a cache).
TEST(Attention, CausalRowsOfEveryLengthMatchFloat64) {
  std::vector<int64_t> lengths;
  for (int64_t s = 1; s <= 70; ++s) lengths.push_back(s);
  for (int64_t s : {127, 129, 200}) lengths.push_back(s);
  for (int64_t s : lengths) {
    for (int variant = 0; variant < 3; ++variant) {
      const int64_t t = variant == 2 ? std::max<int64_t>(1, s / 3) : s;
      SCOPED_TRACE("S " + std::to_string(s) + " T " + std::to_string(t) + " variant " +
                   std::to_string(variant));
      Tensor q = random_input({2, 2, t, 8}, DType::f64), k = random_input({2, 1, s, 8}, DType::f64);
      Tensor v = random_input({2, 1, s, 8}, DType::f64);
      Tensor dout = random_input({2, 2, t, 8}, DType::f64);
      Tensor pad;
      if (variant == 1) {
        std::vector<int64_t> m(size_t(2 * s), 1);
        m[0] = 0;  // batch 0 pads its first key: its row 0 sees nothing
        if (s > 3) m[size_t(s + s / 2)] = 0;
        pad = Tensor::from_vector(m, {2, s}).to(DType::b8);
      }
      const AttentionAttrs attrs{.causal = true, .scale = 0.35};
      const DType f32 = DType::f32;
      auto f =
          dispatch::call<OpId::attention>({q.to(f32), k.to(f32), v.to(f32), pad, Tensor()}, attrs);
      auto b = dispatch::call<OpId::attention_backward>(
          {dout.to(f32), q.to(f32), k.to(f32), v.to(f32), f[0], f[1], pad, Tensor()}, attrs);
      const std::vector<Tensor> single = {f[0], b[0], b[1], b[2]};
      // The reference: the op's composed forms (materialised scores, ops' own softmax) in
      // float64, not the kernels.
      auto rf = ops::detail::attention_composed({q, k, v, pad, Tensor()}, attrs);
      dispatch::ForceDecomposition force(OpId::attention_backward);
      auto rb = dispatch::call<OpId::attention_backward>(
          {dout, q, k, v, rf[0], rf[1], pad, Tensor()}, attrs);
      const std::vector<Tensor> ref = {rf[0], rb[0], rb[1], rb[2]};
      for (size_t i = 0; i < 4; ++i)
        EXPECT_TRUE(all_close(single[i].to(DType::f64), ref[i], 1e-5, 1e-5)) << "result " << i;
    }
  }
}
