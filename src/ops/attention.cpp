// Scaled dot-product attention (PyTorch's F.scaled_dot_product_attention with Hugging Face's
// grouped-query heads, a bottom-right causal mask and a key padding mask). The op `attention`
// returns the output and each query row's logsumexp; its gradient `attention_backward` is
// defined here by a decomposition into ops that materialises the [T, S] scores (the reference,
// as is detail::attention_composed for the forward); the CPU registers fused tiled kernels for
// both (src/backend/cpu/attention.cpp). The forward op has no decomposition: with one, dispatch
// would run it instead of the kernel whenever an input requires grad.
// B batch, Hq query heads, Hkv key/value heads (G = Hq / Hkv queries per kv head), T queries,
// S keys, D head dim (Dv of the values).
#include <cmath>
#include <limits>

#include "ops/op_utils.h"
#include "zenith/cpu_features.h"

namespace zenith::ops {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// k or v [B, Hkv, S, D] as [B, Hq, S, D]: kv head j serves query heads j G .. j G + G - 1.
Tensor repeat_kv(const Tensor& t, int64_t groups) {
  if (groups == 1) return t;
  const Shape& s = t.shape();
  return t.unsqueeze(2)
      .expand({s[0], s[1], groups, s[2], s[3]})
      .reshape({s[0], s[1] * groups, s[2], s[3]});
}

// A gradient [B, Hq, S, D] summed over each kv head's query heads: [B, Hkv, S, D].
Tensor sum_groups(const Tensor& g, int64_t groups) {
  if (groups == 1) return g;
  const Shape& s = g.shape();
  return sum(g.reshape({s[0], s[1] / groups, groups, s[2], s[3]}), {2});
}

// Bool [T, S]: true where the causal mask hides key j from query i (j > i + S - T).
Tensor causal_blocked(int64_t t, int64_t s, Device device) {
  Tensor blocked = Tensor::empty({t, s}, DType::b8);
  bool* p = blocked.data<bool>();
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < s; ++j) p[i * s + j] = j > i + s - t;
  return blocked.to(device);
}

// Scores [B, Hq, T, S] = q k^T scale + attn_mask, -inf where a mask hides the key.
Tensor masked_scores(const Tensor& q, const Tensor& k_rep, const Tensor& key_padding_mask,
                     const Tensor& attn_mask, const AttentionAttrs& a) {
  const int64_t batch = q.size(0), t = q.size(2), s = k_rep.size(2);
  Tensor scores = mul(matmul(q, k_rep.transpose(-1, -2)), a.scale);
  if (attn_mask.defined()) scores = add(scores, attn_mask);
  if (a.causal) scores = masked_fill(scores, causal_blocked(t, s, q.device()), -kInf);
  if (key_padding_mask.defined()) {
    Tensor pad = eq(key_padding_mask, detail::scalar_like(0.0, key_padding_mask));
    scores = masked_fill(scores, pad.reshape({batch, 1, 1, s}), -kInf);
  }
  return scores;
}

// softmax over the last dim with rows of only -inf giving 0 (not NaN), and the rows'
// logsumexp [.., T] (+inf for such rows, so that exp(score - lse) is 0 there too).
std::pair<Tensor, Tensor> safe_softmax(const Tensor& scores) {
  Tensor m = max(scores, -1, true).detach();  // softmax does not depend on the shift
  Tensor shift = where(eq(m, detail::scalar_like(-kInf, m)), detail::scalar_like(0.0, m), m);
  Tensor e = exp(sub(scores, shift));
  Tensor l = sum(e, {-1}, true);
  Tensor empty = eq(l, detail::scalar_like(0.0, l));
  Tensor p = div(e, where(empty, detail::scalar_like(1.0, l), l));
  Tensor lse = where(empty, detail::scalar_like(kInf, l), add(shift, log(l.detach())));
  return {p, lse.squeeze(-1)};
}

// attention_backward(dout, q, k, v, out, lse, key_padding_mask?, attn_mask?) -> {dq, dk, dv}:
// P recomputed from q and k (out and lse unused, so this form is differentiable again),
// dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)), dQ = dS K scale, dK = dS^T Q scale,
// dK and dV summed over each kv head's query heads.
std::vector<Tensor> attention_backward_composed(const std::vector<Tensor>& in,
                                                const AttentionAttrs& a) {
  const Tensor &dout = in[0], &q = in[1], &k = in[2], &v = in[3];
  const int64_t groups = q.size(1) / k.size(1);
  Tensor k_rep = repeat_kv(k, groups), v_rep = repeat_kv(v, groups);
  Tensor p = safe_softmax(masked_scores(q, k_rep, in[6], in[7], a)).first;
  Tensor dv = sum_groups(matmul(p.transpose(-1, -2), dout), groups);
  Tensor dp = matmul(dout, v_rep.transpose(-1, -2));
  Tensor ds = mul(p, sub(dp, sum(mul(dp, p), {-1}, true)));
  Tensor dq = mul(matmul(ds, k_rep), a.scale);
  Tensor dk = sum_groups(mul(matmul(ds.transpose(-1, -2), q), a.scale), groups);
  return {dq, dk, dv};
}

ZENITH_REGISTER_DECOMPOSITION(attention_backward, attention_backward_composed);

constexpr const char* kOp = "scaled_dot_product_attention";

// key_padding_mask [B, S], bool or integer, as bool (true = attend).
Tensor padding_mask(const Tensor& m, int64_t batch, int64_t s) {
  if (!m.defined()) return m;
  ZENITH_CHECK(m.dtype() == DType::b8 || !is_floating(m.dtype()), "[", kOp,
               "] key_padding_mask must be bool or integer, got ", dtype_name(m.dtype()));
  ZENITH_CHECK(m.dim() == 2 && m.size(0) == batch && m.size(1) == s, "[", kOp,
               "] expected key_padding_mask [", batch, ", ", s, "], got ", shape_str(m.shape()));
  return detail::plain(m).to(DType::b8);
}

// attn_mask broadcastable to [B, Hq, T, S], in the compute dtype.
Tensor additive_mask(const Tensor& m, const Shape& scores, DType dtype) {
  if (!m.defined()) return m;
  ZENITH_CHECK(is_floating(m.dtype()), "[", kOp, "] attn_mask must be floating (additive), got ",
               dtype_name(m.dtype()));
  ZENITH_CHECK(!(autograd::grad_enabled() && m.requires_grad()), "[", kOp,
               "] attn_mask gets no gradient; detach it");
  bool fits = m.dim() <= 4;
  for (int64_t i = 1; fits && i <= m.dim(); ++i) {
    int64_t ms = m.shape()[size_t(m.dim() - i)], ss = scores[size_t(4 - i)];
    fits = ms == ss || ms == 1;
  }
  ZENITH_CHECK(fits, "[", kOp, "] attn_mask ", shape_str(m.shape()),
               " does not broadcast to the scores [B, Hq, T, S] = ", shape_str(scores));
  Tensor p = detail::plain(m);
  return p.dtype() == dtype ? p : p.to(dtype);
}

bool low_precision(DType t) { return t == DType::bf16 || t == DType::f16; }

}  // namespace

namespace detail {

// attention(q, k, v, key_padding_mask?, attn_mask?) -> {out, lse}, composed of ops.
std::vector<Tensor> attention_composed(const std::vector<Tensor>& in, const AttentionAttrs& a) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const int64_t groups = q.size(1) / k.size(1);
  auto [p, lse] = safe_softmax(masked_scores(q, repeat_kv(k, groups), in[3], in[4], a));
  return {matmul(p, repeat_kv(v, groups)), lse};
}

}  // namespace detail

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const AttentionOptions& o) {
  ZENITH_CHECK(q_in.defined() && k_in.defined() && v_in.defined(), "[", kOp, "] undefined input");
  ZENITH_CHECK(q_in.dim() == 4 && k_in.dim() == 4 && v_in.dim() == 4, "[", kOp,
               "] expected q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], got q ",
               shape_str(q_in.shape()), ", k ", shape_str(k_in.shape()), ", v ",
               shape_str(v_in.shape()));
  ZENITH_CHECK(q_in.dtype() == k_in.dtype() && q_in.dtype() == v_in.dtype(), "[", kOp,
               "] q, k and v must share a dtype, got ", dtype_name(q_in.dtype()), ", ",
               dtype_name(k_in.dtype()), " and ", dtype_name(v_in.dtype()));
  // bfloat16 where the CPU has bfloat16 arithmetic: the kernel's products in bfloat16 (float32
  // accumulation, the softmax in float32). Otherwise float32 compute, the result in the inputs'
  // dtype.
  const bool bf16 = q_in.dtype() == DType::bf16 && bf16_arithmetic();
  if (low_precision(q_in.dtype()) && !bf16) {
    return scaled_dot_product_attention(q_in.to(DType::f32), k_in.to(DType::f32),
                                        v_in.to(DType::f32), o)
        .to(q_in.dtype());
  }
  if (!bf16) detail::check_float(q_in, kOp);
  Tensor q = detail::plain(q_in), k = detail::plain(k_in), v = detail::plain(v_in);
  const int64_t batch = q.size(0), hq = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), s = k.size(2);
  ZENITH_CHECK(k.size(0) == batch && v.size(0) == batch && v.size(1) == hkv && v.size(2) == s &&
                   k.size(3) == d,
               "[", kOp, "] shapes do not match: q ", shape_str(q.shape()), ", k ",
               shape_str(k.shape()), ", v ", shape_str(v.shape()),
               " (expected q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv])");
  ZENITH_CHECK(hkv > 0 && hq % hkv == 0, "[", kOp, "] ", hq, " query heads are not a multiple of ",
               hkv, " key/value heads");
  const AttentionAttrs attrs{.causal = o.causal,
                             .scale = o.scale.value_or(1.0 / std::sqrt(double(d)))};
  Tensor pad = padding_mask(o.key_padding_mask, batch, s);
  Tensor mask = additive_mask(o.attn_mask, {batch, hq, t, s}, bf16 ? DType::f32 : q.dtype());
  auto outs = dispatch::call<OpId::attention>({q, k, v, pad, mask}, attrs);
  if (autograd::needs_grad({q, k, v})) {
    autograd::SavedOutput out(outs[0]);
    Tensor lse = outs[1];
    bool gq = q.requires_grad(), gk = k.requires_grad(), gv = v.requires_grad();
    autograd::record(kOp, {q, k, v}, {outs[0]}, [=](const std::vector<Tensor>& g) {
      auto d = dispatch::call<OpId::attention_backward>({g[0], q, k, v, out.get(), lse, pad, mask},
                                                        attrs);
      return std::vector<Tensor>{gq ? d[0] : Tensor(), gk ? d[1] : Tensor(), gv ? d[2] : Tensor()};
    });
  }
  return outs[0];
}

}  // namespace zenith::ops
