// CPU linear_cross_entropy (graph mode's fused output layer): the output layer's GEMM, the
// log-softmax and NLL and their gradient, tile by tile (linear_cross_entropy_tile.cpp), so the
// [M, V] logits are never written whole. M rows, D features, V classes.
#include <omp.h>

#include <cmath>
#include <string_view>

#include "backend/cpu/cross_entropy_rows.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/linear_cross_entropy_tile.h"
#include "backend/cpu/loops.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

// linear_cross_entropy(x [M, D], weight [V, D], target [M], dloss) -> {loss, dlogits [M, V]}, and
// linear_cross_entropy_grads (the same inputs) -> {loss, dx [M, D], dweight [V, D]}.
// Rows go in blocks; each block's logits are made chunk by chunk (a GEMM tile that stays in
// cache) and each tile's row max taken and exp(l - max) written at once: one exp per logit
// (cross_entropy_rows and its backward make one each, over logits in memory). When a block has
// all its chunks, the chunks' maxima and sums give each row's log-sum-exp and loss, and one
// multiply per logit turns the exps into dloss_i (softmax - (1 - eps) onehot - eps / V), 0 for
// ignored rows. "mean" divides by the rows not ignored, as cross_entropy_rows does.
// linear_cross_entropy writes them where dlogits would have been. The grads form never makes
// dlogits: the block's exps stay in one scratch E [V, rows] (the tiles where the GEMM wrote
// them, no transpose); then chunk by chunk (threads take whole chunks) the chunk's E_c is
// scaled in place and, while in cache, gives its share of both gradients: dweight's rows of the
// chunk (+)= E_c x_block and dx_block (+)= E_c^T weight_c (each thread its own dx_block, summed
// after). At M 2048 (seq 256 x batch 8, stories15M's head) the 262 MB of dlogits are neither
// written nor read again; E is 32 MB. Chunk by chunk was the fastest order tried (bench/lm_head,
// docs/performance.md).
template <bool kGrads>
std::vector<Tensor> linear_cross_entropy_impl(const std::vector<Tensor>& in,
                                              const CrossEntropyAttrs& attrs, const char* op) {
  ZENITH_CHECK(in.size() == 4, "[", op, "] expected 4 inputs, got ", in.size());
  Tensor x = in[0].contiguous(), w = in[1].contiguous();
  // A 16-bit weight (a frozen bfloat16 output layer) with float32 x: its chunks are converted
  // to float32 as they are used; it takes no gradient.
  const bool lowp_w = w.dtype() != x.dtype();
  ZENITH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) &&
                   (!lowp_w || (x.dtype() == DType::f32 &&
                                (w.dtype() == DType::bf16 || w.dtype() == DType::f16))),
               "[", op, "] x ", shape_str(x.shape()), " ", dtype_name(x.dtype()), " and weight ",
               shape_str(w.shape()), " ", dtype_name(w.dtype()),
               " must be [M, D] and [V, D] of one dtype (or float32 x with a 16-bit weight)");
  const bool weight_grad = kGrads && attrs.weight_grad;
  ZENITH_CHECK(!lowp_w || !weight_grad, "[", op, "] a ", dtype_name(w.dtype()),
               " weight takes no gradient here (weight_grad must be false)");
  Tensor target = in[2].dtype() == DType::i64 ? in[2].contiguous() : in[2].to(DType::i64);
  Tensor dloss = in[3].dtype() == x.dtype() ? in[3].contiguous() : in[3].to(x.dtype());
  const int64_t ignore_index = attrs.ignore_index;
  const double eps = attrs.label_smoothing;
  const Reduction reduction = attrs.reduction;
  const int64_t m = x.size(0), d = x.size(1), v = w.size(0);
  ZENITH_CHECK(target.numel() == m, "[", op, "] target of shape ", shape_str(target.shape()),
               " for ", m, " rows");
  ZENITH_CHECK(v > 0, "[", op, "] weight ", shape_str(w.shape()), " has no classes");
  const int64_t* t = target.data<int64_t>();
  check_targets(t, m, v, ignore_index);
  Tensor rows = Tensor::empty({m}, x.dtype(), x.device());
  Tensor loss = reduction == Reduction::kNone ? rows : Tensor::empty({}, x.dtype(), x.device());
  Tensor dlogits, dx, dw, e;
  if constexpr (kGrads) {
    dx = Tensor::empty({m, d}, x.dtype(), x.device());
    if (weight_grad)
      dw = m == 0 ? Tensor::zeros({v, d}, x.dtype(), x.device())
                  : Tensor::empty({v, d}, x.dtype(), x.device());
    e = Tensor::empty({v, std::min(m, kRowBlock)}, x.dtype(), x.device());
  } else {
    dlogits = Tensor::empty({m, v}, x.dtype(), x.device());
  }
  visit_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* g = dloss.data<T>();
    T* lo = rows.data<T>();
    const T on = T(1 - eps), off = T(eps / double(v));
    const bool per_row = reduction == Reduction::kNone;
    const T scale = T(gradient_scale(reduction, t, m, ignore_index));
    const int64_t vc = std::min(v, kVocabChunk), chunks = (v + vc - 1) / vc;
    const int64_t mb_max = std::min(m, kRowBlock);
    ChunkStats<T> st(mb_max, chunks);
    // With threads, each takes whole vocabulary chunks (own scratch, one-thread GEMM and exps):
    // a tile is too small a GEMM to split over threads (bench/lm_head). float32 through oneDNN only
    // (dnnl_sgemm and oneDNN's matmuls run inside a parallel region; OpenBLAS and the float64
    // reference stay serial).
    const bool onednn_gemm = std::string_view(sgemm_backend()) == "onednn";
    const int threads = std::is_same_v<T, float> && onednn_gemm && chunks > 1 && !omp_in_parallel()
                            ? int(std::min<int64_t>(omp_get_max_threads(), chunks))
                            : 1;
    // The tiles' scratch: the grads form's E (each chunk's tile in place), else one tile per
    // thread.
    std::vector<T> lt(kGrads ? 0 : size_t(threads * vc * mb_max));
    // The grads form: per (chunk, row) factor, and per row the eps / V and onehot terms.
    std::vector<T> factor(kGrads ? size_t(chunks * mb_max) : 0), goff(kGrads ? size_t(mb_max) : 0),
        gon(goff.size());
    // The grads form with threads: each thread but the first its own dx_block, summed after.
    std::vector<T> dx_parts(kGrads && threads > 1 ? size_t((threads - 1) * mb_max * d) : 0);
    // A 16-bit weight: each thread's chunk of it in T, converted where a tile or its gradients
    // need it (V x D float32 never exists whole).
    std::vector<T> w_rows(lowp_w ? size_t(threads * vc * d) : 0);
    auto weight_rows = [&](int64_t c0, int64_t n) -> const T* {
      if constexpr (std::is_same_v<T, float>)
        if (lowp_w) {
          const int th = threads > 1 ? omp_get_thread_num() : 0;
          float* rows = w_rows.data() + th * vc * d;
          to_float(static_cast<const char*>(w.raw_data()) + c0 * d * int64_t(itemsize(w.dtype())),
                   w.dtype(), rows, n * d);
          return rows;
        }
      return w.data<T>() + c0 * d;
    };
    std::unique_ptr<TileGemm> tile_gemm;  // made again only for a shorter last row block
    for (int64_t r0 = 0; r0 < m; r0 += mb_max) {
      const int64_t mb = std::min(mb_max, m - r0);
      if constexpr (std::is_same_v<T, float>)
        if (onednn_gemm) {  // else ZENITH_SGEMM's choice
          if (!tile_gemm || tile_gemm->rows() != mb)
            tile_gemm = std::make_unique<TileGemm>(mb, d, vc, v - (chunks - 1) * vc, threads > 1);
          tile_gemm->set_rows(x.data<T>() + r0 * d);
        }
      auto tile = [&](int64_t c, T* scratch) {
        if constexpr (kGrads) scratch = e.data<T>() + c * vc * mb;
        const int64_t c0 = c * vc, n = std::min(vc, v - c0);
        exp_tile(x.data<T>(), weight_rows(c0, n), t, r0, mb, d, c, c0, n, chunks, scratch, st,
                 kGrads ? nullptr : dlogits.data<T>(), v, tile_gemm.get());
      };
      if (threads > 1) {
#pragma omp parallel num_threads(threads)
        {
          T* scratch = kGrads ? nullptr : lt.data() + omp_get_thread_num() * vc * mb_max;
#pragma omp for schedule(dynamic, 1)
          for (int64_t c = 0; c < chunks; ++c) tile(c, scratch);
        }
      } else {
        for (int64_t c = 0; c < chunks; ++c) tile(c, lt.data());
      }
      if constexpr (kGrads) {
        for (int64_t i = 0; i < mb; ++i) {
          const int64_t ti = t[r0 + i];
          if (ti == ignore_index) {
            lo[r0 + i] = T(0);
            goff[size_t(i)] = gon[size_t(i)] = T(0);
            for (int64_t c = 0; c < chunks; ++c) factor[size_t(c * mb + i)] = T(0);
            continue;
          }
          const T gi = (per_row ? g[r0 + i] : g[0]) * scale;
          lo[r0 + i] =
              row_loss_and_factors(st, i, chunks, vc, v, on, off, gi, factor.data() + i, mb);
          goff[size_t(i)] = gi * off;
          gon[size_t(i)] = gi * on;
        }
        // Chunk by chunk (threads take whole chunks, as the tiles): the chunk's E [n, mb] into
        // dlogits^T in place, then its share of both gradients while it is in cache: dweight's
        // rows of the chunk (+)= E_c x_block, and the thread's dx_block (+)= E_c^T weight_c.
        T* ep = e.data<T>();
        const T* xb = x.data<T>() + r0 * d;
        T* dxb = dx.data<T>() + r0 * d;
        auto gradients = [&](int64_t c, T* dx_part, bool first) {
          const int64_t c0 = c * vc, n = std::min(vc, v - c0);
          T* ec = ep + c0 * mb;
          const T *fc = factor.data() + c * mb, *go = goff.data();
          for (int64_t k = 0; k < n; ++k) {
            T* row = ec + k * mb;
#pragma omp simd
            for (int64_t i = 0; i < mb; ++i) row[i] = fc[i] * row[i] - go[i];
          }
          for (int64_t i = 0; i < mb; ++i) {
            const int64_t ti = t[r0 + i];
            if (ti != ignore_index && ti >= c0 && ti < c0 + n)
              ec[(ti - c0) * mb + i] -= gon[size_t(i)];
          }
          if (weight_grad)
            gemm(false, false, n, d, mb, T(1), ec, mb, xb, d, T(r0 == 0 ? 0 : 1),
                 dw.data<T>() + c0 * d, d);
          gemm(true, false, mb, d, n, T(1), ec, mb, weight_rows(c0, n), d, T(first ? 0 : 1),
               dx_part, d);
        };
        if (threads > 1) {
          std::vector<char> used(size_t(threads), 0);
#pragma omp parallel num_threads(threads)
          {
            const int th = omp_get_thread_num();
            T* part = th == 0 ? dxb : dx_parts.data() + (th - 1) * mb_max * d;
#pragma omp for schedule(dynamic, 1)
            for (int64_t c = 0; c < chunks; ++c) {
              gradients(c, part, !used[size_t(th)]);
              used[size_t(th)] = 1;
            }
          }
          if (!used[0]) std::fill(dxb, dxb + mb * d, T(0));
          for (int th = 1; th < threads; ++th) {
            if (!used[size_t(th)]) continue;
            const T* part = dx_parts.data() + (th - 1) * mb_max * d;
            parallel_for(mb * d, kGrain, [&](int64_t b, int64_t en) {
#pragma omp simd
              for (int64_t k = b; k < en; ++k) dxb[k] += part[k];
            });
          }
        } else {
          for (int64_t c = 0; c < chunks; ++c) gradients(c, dxb, c == 0);
        }
        continue;
      }
      T* out = dlogits.data<T>();
      parallel_for(mb, std::max<int64_t>(1, kGrain / v), [&](int64_t b, int64_t en) {
        std::vector<T> f(static_cast<size_t>(chunks));
        for (int64_t i = b; i < en; ++i) {
          const int64_t ti = t[r0 + i];
          T* row = out + (r0 + i) * v;
          if (ti == ignore_index) {
            lo[r0 + i] = T(0);
            std::fill(row, row + v, T(0));
            continue;
          }
          const T gi = (per_row ? g[r0 + i] : g[0]) * scale, goff = gi * off;
          lo[r0 + i] = row_loss_and_factors(st, i, chunks, vc, v, on, off, gi, f.data(), 1);
          for (int64_t c = 0; c < chunks; ++c) {
            T* chunk = row + c * vc;
            const int64_t n = std::min(vc, v - c * vc);
            const T fc = f[size_t(c)];
#pragma omp simd
            for (int64_t k = 0; k < n; ++k) chunk[k] = fc * chunk[k] - goff;
          }
          row[ti] -= gi * on;
        }
      });
    }
    reduce_rows(loss, lo, t, m, ignore_index, reduction);
  });
  if constexpr (kGrads)
    return {loss, dx, dw};
  else
    return {loss, dlogits};
}

std::vector<Tensor> linear_cross_entropy_kernel(const std::vector<Tensor>& in,
                                                const CrossEntropyAttrs& attrs) {
  return linear_cross_entropy_impl<false>(in, attrs, "linear_cross_entropy");
}

std::vector<Tensor> linear_cross_entropy_grads_kernel(const std::vector<Tensor>& in,
                                                      const CrossEntropyAttrs& attrs) {
  return linear_cross_entropy_impl<true>(in, attrs, "linear_cross_entropy_grads");
}

ZENITH_REGISTER_KERNEL(linear_cross_entropy, CPU, linear_cross_entropy_kernel);
ZENITH_REGISTER_KERNEL(linear_cross_entropy_grads, CPU, linear_cross_entropy_grads_kernel);

}  // namespace
}  // namespace zenith::cpu
