// The backward of the CPU FlashAttention-2 (attention.cpp): per key block, the probabilities
// recomputed from the saved logsumexp, then dV, dP, dS, dK and dQ by block GEMMs. Shapes as in
// attention.cpp's legend.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/attention_blocks.h"
#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu::flash {
namespace {

// Per-task scratch: the group's rows packed (Qs = Q scale, dO, lse, Di = rowsum(dO O)), one
// block of probabilities and of their gradient, and one key block's dK, dV.
template <typename T>
struct BackwardScratch {
  std::vector<T> qs, dout, lse, di, p, dp, dk, dv;
  BackwardScratch(const Geometry& g)
      : qs(size_t(g.rows * g.d)),
        dout(size_t(g.rows * g.dv)),
        lse(size_t(g.rows)),
        di(size_t(g.rows)),
        p(size_t(kRowBlock * kKeyBlock)),
        dp(size_t(kRowBlock * kKeyBlock)),
        dk(size_t(kKeyBlock * g.d)),
        dv(size_t(kKeyBlock * g.dv)) {}
};

struct BackwardArgs {
  Operand dout, q, k, v, out;
  const void* lse;
  void* dq;    // [B, Hq, T, D] contiguous, or per-chunk partials [chunks][B Hkv rows D]
  Operand dk;  // [B, Hkv, S, D]: contiguous, or k's layout (below)
  Operand dv;  // [B, Hkv, S, Dv]: contiguous, or v's layout
};

// The gradients from keys [k0, k1) of (b, kv): dK and dV of those keys, and their share of dQ
// added to dq_rows [rows, D] (zeroed by the caller).
template <typename T>
void backward_keys(const Geometry& g, const BackwardArgs& x, int64_t b, int64_t kv, int64_t k0,
                   int64_t k1, T* dq_rows, BackwardScratch<T>& w) {
  const int64_t d = g.d, dv = g.dv, rows = g.rows;
  const T scale = T(g.scale);
  const T* lse = static_cast<const T*>(x.lse);
  for (int64_t r = 0; r < rows; ++r) {  // pack the group's rows
    const int64_t h = g.head(kv, r), t = r % g.t;
    const T* qr = x.q.row<T>(b, h, t);
    const T* dor = x.dout.row<T>(b, h, t);
    const T* orow = x.out.row<T>(b, h, t);
    T* qs = w.qs.data() + r * d;
    T* dst = w.dout.data() + r * dv;
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) qs[e] = qr[e] * scale;
    T di = 0;
#pragma omp simd reduction(+ : di)
    for (int64_t e = 0; e < dv; ++e) {
      dst[e] = dor[e];
      di += dor[e] * orow[e];
    }
    w.di[size_t(r)] = di;
    w.lse[size_t(r)] = lse[(b * g.hq + h) * g.t + t];
  }
  const T* kbase = x.k.row<T>(b, kv, 0);
  const T* vbase = x.v.row<T>(b, kv, 0);
  for (int64_t j0 = k0; j0 < k1; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, k1 - j0);
    const T* kb = kbase + j0 * x.k.s2;
    const T* vb = vbase + j0 * x.v.s2;
    std::fill(w.dk.begin(), w.dk.begin() + nk * d, T(0));
    std::fill(w.dv.begin(), w.dv.begin() + nk * dv, T(0));
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const int64_t nq = std::min(kRowBlock, rows - r0);
      if (g.key_end(r0, r0 + nq) <= j0) continue;  // causal: no row here sees these keys
      T* p = w.p.data();
      T* dp = w.dp.data();
      block_gemm(false, true, nq, nk, d, T(1), w.qs.data() + r0 * d, d, kb, x.k.s2, T(0), p,
                 kKeyBlock);
      mask_block(g, b, kv, r0, nq, j0, nk, p, kKeyBlock);
      const bool diagonal = !g.causal_free(r0, r0 + nq, j0 + nk);
      probs_block(g, r0, nq, j0, nk, diagonal, p, w.lse.data());
      // dV += P^T dO; dP = dO V^T
      block_gemm(true, false, nk, dv, nq, T(1), p, kKeyBlock, w.dout.data() + r0 * dv, dv, T(1),
                 w.dv.data(), dv);
      block_gemm(false, true, nq, nk, dv, T(1), w.dout.data() + r0 * dv, dv, vb, x.v.s2, T(0), dp,
                 kKeyBlock);
      ds_block(nq, nk, dp, p, w.di.data() + r0);  // dS = P (dP - Di), into dp
      // dQ += dS K scale; dK += dS^T Q scale (Qs holds Q scale)
      block_gemm(false, false, nq, d, nk, scale, dp, kKeyBlock, kb, x.k.s2, T(1), dq_rows + r0 * d,
                 d);
      block_gemm(true, false, nk, d, nq, T(1), dp, kKeyBlock, w.qs.data() + r0 * d, d, T(1),
                 w.dk.data(), d);
    }
    for (int64_t j = 0; j < nk; ++j) {
      std::copy_n(w.dk.data() + j * d, d, x.dk.row<T>(b, kv, j0 + j));
      std::copy_n(w.dv.data() + j * dv, dv, x.dv.row<T>(b, kv, j0 + j));
    }
  }
}

// attention_backward(dout, q, k, v, out, lse, key_padding_mask?, attn_mask?) -> {dq, dk, dv}.
// Tasks are (b, kv head, key chunk): each owns its keys' dK and dV; dQ is written by the only
// chunk of its (b, kv), or summed from per-chunk partials when keys are split to feed every
// thread (few heads, long sequences).
std::vector<Tensor> attention_backward_kernel(const std::vector<Tensor>& in,
                                              const AttentionAttrs& a) {
  if (in[1].dtype() == DType::bf16) return attention_backward_bf16(in, a);
  Tensor q = gemm_ready(in[1]), k = gemm_ready(in[2]), v = gemm_ready(in[3]);
  Geometry g(q, k, v, a);
  Tensor dout = gemm_ready(in[0]);
  Tensor out = gemm_ready(in[4]), lse = in[5].contiguous();
  Tensor pad = in[6].defined() ? in[6].contiguous() : Tensor();
  Tensor mask = float_mask(in[7], g);
  if (pad.defined()) g.pad = pad.data<bool>();
  if (mask.defined()) g.mask = operand(mask);
  Tensor dq = Tensor::empty({g.batch, g.hq, g.t, g.d}, q.dtype(), q.device());
  Tensor dk = like_keys(k), dv = like_keys(v);
  const int64_t heads = g.batch * g.hkv;
  const int64_t key_blocks = (g.s + kKeyBlock - 1) / kKeyBlock;
  const bool parallel = q.dtype() == DType::f32;
  const int64_t chunks = parallel ? std::clamp<int64_t>((omp_get_max_threads() + heads - 1) / heads,
                                                        1, std::max<int64_t>(key_blocks, 1))
                                  : 1;
  // dQ partials [chunks][B, Hkv, rows, D] when keys are split, else dq's rows directly.
  Tensor partial = chunks > 1 ? Tensor::zeros({chunks, heads, g.rows, g.d}, q.dtype()) : Tensor();
  BackwardArgs args{operand(dout),  operand(q), operand(k),  operand(v), operand(out),
                    lse.raw_data(), nullptr,    operand(dk), operand(dv)};
  visit_float(q.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    T* pdq = dq.data<T>();
    T* ppart = chunks > 1 ? partial.data<T>() : nullptr;
    for_tasks<T>(
        heads * chunks, 2 * g.work(), [&] { return BackwardScratch<T>(g); },
        [&](int64_t task, BackwardScratch<T>& w) {
          const int64_t c = task % chunks, head = task / chunks;
          const int64_t b = head / g.hkv, kv = head % g.hkv;
          const int64_t k0 = key_blocks * c / chunks * kKeyBlock;
          const int64_t k1 = std::min(g.s, key_blocks * (c + 1) / chunks * kKeyBlock);
          // The rows of (b, kv) are heads kv G .. kv G + G - 1 of batch b: contiguous in dq.
          T* acc = ppart ? ppart + (c * heads + head) * g.rows * g.d : pdq + head * g.rows * g.d;
          if (!ppart) std::fill(acc, acc + g.rows * g.d, T(0));
          backward_keys<T>(g, args, b, kv, k0, k1, acc, w);
        });
    if (ppart) {
      const int64_t n = heads * g.rows * g.d;
      parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          T s = 0;
          for (int64_t c = 0; c < chunks; ++c) s += ppart[c * n + i];
          pdq[i] = s;
        }
      });
    }
  });
  return {dq, dk, dv};
}
ZENITH_REGISTER_KERNEL(attention_backward, CPU, attention_backward_kernel);

}  // namespace

// The gradient of keys or values t [B, H, S, D]: laid out as t is where t views a [B, S, H, D]
// buffer (the projection's output split into heads, as LLaMA's v), so that autograd's transpose
// back and reshape into [B, S, H D] need no copy (PyTorch's rule: a gradient takes its input's
// strides); otherwise contiguous.
Tensor like_keys(const Tensor& t) {
  const Shape& st = t.strides();
  const int64_t b = t.size(0), h = t.size(1), s = t.size(2), d = t.size(3);
  if (h > 1 && s > 1 && st[3] == 1 && st[1] == d && st[2] == h * d && st[0] == s * h * d)
    return Tensor::empty({b, s, h, d}, t.dtype(), t.device()).transpose(1, 2);
  return Tensor::empty({b, h, s, d}, t.dtype(), t.device());
}

}  // namespace zenith::cpu::flash
