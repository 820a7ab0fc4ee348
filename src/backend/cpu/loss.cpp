// CPU fused cross-entropy for class-index targets: log-softmax and NLL (with label smoothing and
// ignore_index) in one pass per row, and the gradient (the fast path of the one composed in
// src/ops/loss.cpp) in one more; and graph mode's linear_cross_entropy, the output layer's GEMM
// with both, tile by tile.
// M rows (samples, after moving the class dim last), C classes.
#include <immintrin.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/onednn_layout.h"
#include "core/dispatch.h"

namespace zenith::cpu {
namespace {

template <typename T>
ZENITH_SIMD_INLINE T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return simd::exp(x);
  else
    return std::exp(x);
}

// Throws for the first target that is neither a class in [0, C) nor ignore_index.
void check_targets(const int64_t* t, int64_t m, int64_t c, int64_t ignore_index) {
  for (int64_t i = 0; i < m; ++i)
    ZENITH_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < c), "[cross_entropy] target ", t[i],
                 " (sample ", i, ") is out of range for ", c, " classes");
}

// Number of targets that are not ignore_index: the divisor of the "mean" reduction.
int64_t count_valid(const int64_t* t, int64_t m, int64_t ignore_index) {
  int64_t n = 0;
  for (int64_t i = 0; i < m; ++i) n += t[i] != ignore_index;
  return n;
}

// The factor each row's gradient takes: 1 / (non-ignored targets) for "mean", else 1.
double gradient_scale(Reduction reduction, const int64_t* t, int64_t m, int64_t ignore_index) {
  return reduction == Reduction::kMean ? 1.0 / double(count_valid(t, m, ignore_index)) : 1.0;
}

// Writes the 0-d loss of the "mean" and "sum" reductions from the per-row losses `lo`.
template <typename T>
void reduce_rows(Tensor& loss, const T* lo, const int64_t* t, int64_t m, int64_t ignore_index,
                 Reduction reduction) {
  if (reduction == Reduction::kNone) return;
  double total = 0;
  for (int64_t i = 0; i < m; ++i) total += double(lo[i]);
  if (reduction == Reduction::kMean) total /= double(count_valid(t, m, ignore_index));
  loss.data<T>()[0] = T(total);
}

// cross_entropy_rows(logits [M, C], target [M]; ignore_index, label_smoothing, reduction)
//   -> loss ([M] for "none", 0 where ignored; else 0-d), log_sum [M] (log sum_c exp(x[c] - max),
//   saved for backward).
// loss = lse - (1 - eps) x[t] - eps / C sum_c x[c] with lse = max + log_sum, evaluated as
// log_sum + (1 - eps)(max - x[t]) + eps / C sum_c (max - x[c]) so that large logits lose nothing
// to rounding at the scale of max. "mean" divides the sum by the number of non-ignored targets.
std::vector<Tensor> cross_entropy_kernel(const std::vector<Tensor>& in,
                                         const CrossEntropyAttrs& attrs) {
  Tensor logits = in[0].contiguous();
  Tensor target = in[1].dtype() == DType::i64 ? in[1].contiguous() : in[1].to(DType::i64);
  const int64_t ignore_index = attrs.ignore_index;
  const double eps = attrs.label_smoothing;
  const Reduction reduction = attrs.reduction;
  const int64_t m = logits.shape()[0], c = logits.shape()[1];
  const int64_t* t = target.data<int64_t>();
  check_targets(t, m, c, ignore_index);
  Tensor rows = Tensor::empty({m}, logits.dtype(), logits.device());
  Tensor log_sums = Tensor::empty({m}, logits.dtype(), logits.device());
  Tensor loss =
      reduction == Reduction::kNone ? rows : Tensor::empty({}, logits.dtype(), logits.device());
  visit_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    T* lo = rows.data<T>();
    T* ls = log_sums.data<T>();
    const T on = T(1 - eps), off = T(eps / double(c));
    parallel_for(m, std::max<int64_t>(1, kGrain / c), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* row = x + i * c;
        const T mx = simd::row_max(row, c);
        T s = 0, below = 0;
#pragma omp simd reduction(+ : s, below)
        for (int64_t k = 0; k < c; ++k) {
          s += exp_of(row[k] - mx);
          below += mx - row[k];
        }
        const T log_sum = std::log(s);
        ls[i] = log_sum;
        lo[i] = t[i] == ignore_index ? T(0) : log_sum + on * (mx - row[t[i]]) + off * below;
      }
    });
    reduce_rows(loss, lo, t, m, ignore_index, reduction);
  });
  return {loss, log_sums};
}

// cross_entropy_rows_backward(dloss, logits, target, log_sum) -> dlogits [M, C]; dloss is [M]
// for "none", else 0-d (divided by the non-ignored count for "mean").
// dx[i, c] = dloss_i (softmax(x)[i, c] - (1 - eps) [c == t_i] - eps / C), 0 for ignored rows.
std::vector<Tensor> cross_entropy_backward_kernel(const std::vector<Tensor>& in,
                                                  const CrossEntropyAttrs& attrs) {
  Tensor logits = in[1].contiguous();
  Tensor dloss = in[0].dtype() == logits.dtype() ? in[0].contiguous() : in[0].to(logits.dtype());
  Tensor target = in[2].dtype() == DType::i64 ? in[2].contiguous() : in[2].to(DType::i64);
  Tensor log_sums = in[3].contiguous();
  const int64_t ignore_index = attrs.ignore_index;
  const double eps = attrs.label_smoothing;
  const Reduction reduction = attrs.reduction;
  const int64_t m = logits.shape()[0], c = logits.shape()[1];
  Tensor dx = Tensor::empty({m, c}, logits.dtype(), logits.device());
  visit_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* g = dloss.data<T>();
    const T* ls = log_sums.data<T>();
    const int64_t* t = target.data<int64_t>();
    T* o = dx.data<T>();
    const T on = T(1 - eps), off = T(eps / double(c));
    const bool per_row = reduction == Reduction::kNone;
    const T scale = T(gradient_scale(reduction, t, m, ignore_index));
    parallel_for(m, std::max<int64_t>(1, kGrain / c), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T* orow = o + i * c;
        if (t[i] == ignore_index) {
          std::fill(orow, orow + c, T(0));
          continue;
        }
        const T* row = x + i * c;
        const T mx = simd::row_max(row, c);
        const T gi = (per_row ? g[i] : g[0]) * scale, log_sum = ls[i], goff = gi * off;
#pragma omp simd
        for (int64_t k = 0; k < c; ++k) orow[k] = gi * exp_of((row[k] - mx) - log_sum) - goff;
        orow[t[i]] -= gi * on;
      }
    });
  });
  return {dx};
}

// The fused output layer's tile: kRowBlock rows x kVocabChunk classes. Measured on stories15M's
// head (D 288, V 32000, one AVX-512 core, CPU time): the logits' transpose W_chunk x^T runs
// faster than x W_chunk^T (dnnl_sgemm 182 vs 143 GFLOP/s at 128 rows); 512 classes keep a tile
// and its exps in L2; fewer rows a block make W's chunks too short a GEMM (2048 rows, before the
// 8 x 8 transposes: 293 ms at 256 x 512, 306 at 128 x 512, 391 at 64 x 512, 308 at 256 x 1024;
// x W_chunk^T tiles 322 ms at 128 x 512). Tried and dropped (2048 rows, best of 4, same loaded
// host, 267-310 ms for this kernel): dlogits as the transposed view of a [V, M] buffer, the
// tiles' own layout (no transposes; the GEMM writing into it or a copy, vocabulary chunks outer,
// one streaming scaling pass at the end; dW then reads it plainly and dx as a transposed operand,
// both as fast as before) 268-324 ms, and 352 ms with a power-of-two row stride (cache sets);
// non-temporal stores for the transposes: no change. The time left over the GEMM (~70-90 ms) is
// spread over the exps, the max, the 262 MB written and the scaling pass.
// Later (packed oneDNN tile GEMM and 512-bit exps in, same kernel, 1 thread, medians of 5-7 on a
// shared host): dx = dlogits W made here as well, flash-attention style (dx_acc += E W_chunk per
// tile while W_chunk and the exps are in cache, rescaled as the row's max grows; W read once):
// 30.95 ms against 30.96 for this kernel + the separate matmul at 128 rows, 496.5 vs 496.9 at
// 2048 (both GEMMs already run at the sgemm peak; dW still needs dlogits): not built. AVX-512
// 16 x 16 transposes (whole-line stores): no change (15.4-15.8 vs 15.2-15.7 ms at 128 rows; the
// transposes are store-bound); tiles of 256 x 1024, 512 x 256 or 512 x 512: none faster.
constexpr int64_t kRowBlock = 256, kVocabChunk = 512;

// dst[r * ld_dst + c] = src[c * ld_src + r] for r, c < 8 (AVX2 unpacks and lane swaps).
inline void transpose8x8(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m256 r[8], t[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * ld_src);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + j * ld_dst, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
    _mm256_storeu_ps(dst + (j + 4) * ld_dst, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
  }
}

// tile[i * v + k] = lt[k * mb + i] for rows i in [lo, hi) and k < n.
template <typename T>
void transpose_rows(const T* lt, int64_t mb, int64_t lo, int64_t hi, int64_t n, T* tile,
                    int64_t v) {
  int64_t i0 = lo;
  if constexpr (std::is_same_v<T, float>)
    for (; i0 + 8 <= hi; i0 += 8) {
      int64_t k = 0;
      for (; k + 8 <= n; k += 8) transpose8x8(lt + k * mb + i0, mb, tile + i0 * v + k, v);
      for (; k < n; ++k)
        for (int64_t i = i0; i < i0 + 8; ++i) tile[i * v + k] = lt[k * mb + i];
    }
  for (; i0 < hi; i0 += 8) {
    const int64_t i1 = std::min(hi, i0 + 8);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = i0; i < i1; ++i) tile[i * v + k] = lt[k * mb + i];
  }
}

// The float32 tile GEMM lt[n, mb] = W_chunk [n, d] x_block^T [d, mb] as oneDNN matmuls whose
// weights, x_block^T, are reordered once per row block into the format the primitive packs them
// in, then serve every chunk (measured at M 512, N 128, K 288: 203 GFLOP/s against dnnl_sgemm's
// 186-190). One primitive for full chunks of vc classes, one for a shorter last chunk; where
// oneDNN makes none, packs nothing (below AVX-512) or not for the packed format, dnnl_sgemm.
// concurrent: run by several threads of a parallel region at once (one per vocabulary chunk),
// each with its own memory objects and scratchpad (with oneDNN's shared library scratchpad the
// threads' tiles came out wrong: the 3-thread case of the fused-ops test caught it).
class TileGemm {
 public:
  TileGemm(int64_t mb, int64_t d, int64_t vc, int64_t last, bool concurrent)
      : mb_(mb), d_(d), vc_(vc), concurrent_(concurrent) {
    namespace dn = onednn;
    const std::string key =
        dn::Key("linear_cross_entropy_tile").add(mb).add(d).add(vc).add(last).add(concurrent).str();
    e_ = dn::cached<Entry>(key, [&] {
      auto e = std::make_shared<Entry>();
      try {
        e->full =
            make(vc, memory::desc({d, mb}, dt::f32, memory::format_tag::any), &e->packed, e.get());
        // Unblocked weights (oneDNN below AVX-512 runs its sgemm on a plain copy): sgemm here.
        if (e->packed.data.format_kind != dnnl_blocked ||
            e->packed.data.format_desc.blocking.inner_nblks == 0)
          return e;
        e->pack = onednn::Primitive(dnnl::reorder(
            dnnl::reorder::primitive_desc(dn::engine(), plain_weights(), dn::engine(), e->packed)));
        e->made = true;
        if (last != vc) {
          e->last = make(last, e->packed, nullptr, e.get());
          e->has_last = true;
        }
      } catch (const dnnl::error&) {
      }
      return e;
    });
    if (e_->made)
      packed_.reset(
          static_cast<float*>(std::aligned_alloc(64, (e_->packed.get_size() + 63) / 64 * 64)));
  }
  int64_t rows() const { return mb_; }
  // x_block: [mb, d] rows of x (row stride d).
  void set_rows(const float* x_block) {
    x_ = x_block;
    if (packed_)
      e_->pack.run({{DNNL_ARG_FROM, plain_weights(), const_cast<float*>(x_block)},
                    {DNNL_ARG_TO, e_->packed, packed_.get()}});
  }
  // lt [n, mb] for W_chunk [n, d] (row stride d).
  void run(const float* w_chunk, int64_t n, float* lt) {
    onednn::Primitive* p = !packed_       ? nullptr
                           : n == vc_     ? &e_->full
                           : e_->has_last ? &e_->last
                                          : nullptr;
    if (!p) {
      gemm(false, true, n, mb_, d_, 1.f, w_chunk, d_, x_, d_, 0.f, lt, mb_);
      return;
    }
    std::vector<onednn::Arg> args = {
        {DNNL_ARG_SRC, memory::desc({n, d_}, dt::f32, memory::dims{d_, 1}),
         const_cast<float*>(w_chunk)},
        {DNNL_ARG_WEIGHTS, e_->packed, packed_.get()},
        {DNNL_ARG_DST, memory::desc({n, mb_}, dt::f32, memory::dims{mb_, 1}), lt}};
    if (concurrent_) {  // each thread its own scratchpad, 64-byte aligned as oneDNN's own
      thread_local std::unique_ptr<char, Free> scratch;
      thread_local size_t scratch_size = 0;
      if (scratch_size < e_->scratch) {
        scratch_size = (e_->scratch + 63) / 64 * 64;
        scratch.reset(static_cast<char*>(std::aligned_alloc(64, scratch_size)));
        ZENITH_CHECK(scratch != nullptr,
                     "[linear_cross_entropy] out of memory for a scratchpad of ", scratch_size,
                     " bytes");
      }
      if (e_->scratch > 0)
        args.push_back({DNNL_ARG_SCRATCHPAD,
                        memory::desc({memory::dim(e_->scratch)}, dt::u8, memory::format_tag::a),
                        scratch.get()});
      p->run_concurrent(args);
    } else {
      p->run(args);
    }
  }

 private:
  using memory = dnnl::memory;
  using dt = memory::data_type;
  struct Entry {
    bool made = false, has_last = false;
    size_t scratch = 0;  // bytes of the concurrent primitives' scratchpad
    memory::desc packed;
    onednn::Primitive pack, full, last;
  };
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  // x_block^T as stored: element (k, j) at x_block[j d + k].
  memory::desc plain_weights() const {
    return memory::desc({d_, mb_}, dt::f32, memory::dims{1, d_});
  }
  onednn::Primitive make(int64_t n, const memory::desc& weights, memory::desc* chosen,
                         Entry* e) const {
    dnnl::matmul::desc md(memory::desc({n, d_}, dt::f32, memory::dims{d_, 1}), weights,
                          memory::desc({n, mb_}, dt::f32, memory::dims{mb_, 1}));
    dnnl::primitive_attr attr;
    if (concurrent_) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(md, attr, onednn::engine());
    e->scratch = std::max(e->scratch, pd.scratchpad_desc().get_size());
    if (chosen) *chosen = pd.weights_desc();
    return onednn::Primitive(dnnl::matmul(pd));
  }
  int64_t mb_, d_, vc_;
  bool concurrent_;
  const float* x_ = nullptr;
  std::shared_ptr<Entry> e_;
  std::unique_ptr<float, Free> packed_;
};

// One row block's statistics per (row, vocabulary chunk): [rows, chunks].
template <typename T>
struct ChunkStats {
  std::vector<T> max, sum, below;  // the chunk's max, sum exp(l - max), sum (max - l)
  std::vector<T> target;           // [rows]: the target's logit
  ChunkStats(int64_t rows, int64_t chunks)
      : max(size_t(rows * chunks)),
        sum(size_t(rows * chunks)),
        below(size_t(rows * chunks)),
        target(size_t(rows)) {}
};

// Over n columns of w rows (column stride ld): each row's max m, its logits l turned into
// exp(l - m) in place, s = sum exp(l - m) and b = sum (m - l); the rows vectorise, kGroup at a
// time with m, s and b in registers (not loaded and stored per column), float32's exps through
// exp_nonpositive: 50 -> 33 us a 512 x 256 tile in 512-bit vectors, 89 -> 61 in 256-bit; the
// same bits. Rows: kGroup as a compile-time constant for whole groups, else the last few.
constexpr int64_t kGroup = 64;

template <typename T, typename Rows>
ZENITH_SIMD_INLINE void exp_group(T* lt, int64_t ld, Rows w, int64_t n, T* m, T* s, T* b) {
  T mx[kGroup], sum[kGroup], below[kGroup];
#pragma omp simd
  for (int64_t i = 0; i < w; ++i) {
    mx[i] = lt[i];
    sum[i] = T(0);
    below[i] = T(0);
  }
  for (int64_t k = 1; k < n; ++k) {
    const T* col = lt + k * ld;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) mx[i] = std::max(mx[i], col[i]);
  }
  for (int64_t k = 0; k < n; ++k) {
    T* col = lt + k * ld;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) {
      const T l = col[i];
      below[i] += mx[i] - l;
      T e;
      if constexpr (std::is_same_v<T, float>)
        e = simd::exp_nonpositive(l - mx[i]);
      else
        e = std::exp(l - mx[i]);
      col[i] = e;
      sum[i] += e;
    }
  }
  std::copy(mx, mx + int64_t(w), m);
  std::copy(sum, sum + int64_t(w), s);
  std::copy(below, below + int64_t(w), b);
}

template <typename T>
ZENITH_SIMD_INLINE void exp_columns_body(T* lt, int64_t ld, int64_t w, int64_t n, T* m, T* s,
                                         T* b) {
  int64_t i0 = 0;
  for (; i0 + kGroup <= w; i0 += kGroup)
    exp_group(lt + i0, ld, std::integral_constant<int64_t, kGroup>(), n, m + i0, s + i0, b + i0);
  if (i0 < w) exp_group(lt + i0, ld, w - i0, n, m + i0, s + i0, b + i0);
}

template <typename T>
void exp_columns(T* lt, int64_t ld, int64_t w, int64_t n, T* m, T* s, T* b) {
  exp_columns_body(lt, ld, w, n, m, s, b);
}

// The same in 512-bit vectors (the build targets x86-64-v3): the exps take half the time.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512"))) void
exp_columns_avx512(float* lt, int64_t ld, int64_t w, int64_t n, float* m, float* s, float* b) {
  exp_columns_body(lt, ld, w, n, m, s, b);
}

// The logits of rows [r0, r0 + mb) and classes [c0, c0 + n) (chunk c, whose weight rows wc are)
// as exp(l - the row's max
// over the chunk) into lt [n, mb], the logits' transpose, whose rows run over the block's rows
// (the max and exp vectorise across them), their statistics into st; then, where out is not
// null, written to out (row stride v) in 8 x 8 blocks (8 cache lines in flight, not mb).
// mb <= kRowBlock.
template <typename T>
void exp_tile(const T* x, const T* wc, const int64_t* t, int64_t r0, int64_t mb, int64_t d,
              int64_t c, int64_t c0, int64_t n, int64_t chunks, T* lt, ChunkStats<T>& st, T* out,
              int64_t v, TileGemm* tile_gemm) {
  bool made = false;
  if constexpr (std::is_same_v<T, float>)
    if (tile_gemm) {
      tile_gemm->run(wc, n, lt);
      made = true;
    }
  if (!made) gemm(false, true, n, mb, d, T(1), wc, d, x + r0 * d, d, T(0), lt, mb);
  // Threads (where the caller does not split the chunks) take ranges of the block's rows
  // (columns of lt), 8 at a time.
  parallel_for((mb + 7) / 8, std::max<int64_t>(1, kGrain / (8 * n)), [&](int64_t b8, int64_t e8) {
    const int64_t lo = b8 * 8, hi = std::min(mb, e8 * 8), w8 = hi - lo;
    T m[kRowBlock], s[kRowBlock], b[kRowBlock];
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t ti = t[r0 + i];
      if (ti >= c0 && ti < c0 + n) st.target[size_t(i)] = lt[(ti - c0) * mb + i];
    }
    if constexpr (std::is_same_v<T, float>) {
      if (onednn_has_avx512())
        exp_columns_avx512(lt + lo, mb, w8, n, m, s, b);
      else
        exp_columns(lt + lo, mb, w8, n, m, s, b);
    } else {
      exp_columns(lt + lo, mb, w8, n, m, s, b);
    }
    for (int64_t i = 0; i < w8; ++i) {
      const size_t at = size_t((lo + i) * chunks + c);
      st.max[at] = m[i];
      st.sum[at] = s[i];
      st.below[at] = b[i];
    }
    if (out) transpose_rows(lt, mb, lo, hi, n, out + r0 * v + c0, v);
  });
}

// One row's loss from its chunks' statistics, and the factor f_c = g exp(max_c - max - log_sum)
// that turns chunk c's exps exp(l - max_c) into g softmax.
template <typename T>
T row_loss_and_factors(const ChunkStats<T>& st, int64_t i, int64_t chunks, int64_t vc, int64_t v,
                       T on, T off, T gi, T* f, int64_t f_stride) {
  const T* cm = st.max.data() + i * chunks;
  const T* cs = st.sum.data() + i * chunks;
  const T* cb = st.below.data() + i * chunks;
  const T mx = *std::max_element(cm, cm + chunks);
  T s = 0, below = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    s += cs[c] * exp_of(cm[c] - mx);
    below += T(std::min(vc, v - c * vc)) * (mx - cm[c]) + cb[c];
  }
  const T log_sum = std::log(s);
  for (int64_t c = 0; c < chunks; ++c) f[c * f_stride] = gi * exp_of((cm[c] - mx) - log_sum);
  return log_sum + on * (mx - st.target[size_t(i)]) + off * below;
}

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
// written nor read again; E is 32 MB. bench/lm_head, 2048 rows, ms (1 thread CPU / 2 threads
// wall): linear_cross_entropy + its two matmuls 640-674 / 341-351; this, with one scaling pass
// over E and two GEMMs over all of it per block, 623-680 / 338-351; chunk by chunk 615-637 /
// 327-329.
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
    // a tile is too small a GEMM to split (bench/lm_head, 2 threads, wall ms: each tile split
    // over both, 18.1 at 128 rows and 249 at 2048, as on 1 thread; chunks per thread, 9.2 and
    // 141). float32 through oneDNN only (dnnl_sgemm and oneDNN's matmuls run inside a parallel
    // region; OpenBLAS and the float64 reference stay serial).
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

ZENITH_REGISTER_KERNEL(cross_entropy_rows, CPU, cross_entropy_kernel);
ZENITH_REGISTER_KERNEL(cross_entropy_rows_backward, CPU, cross_entropy_backward_kernel);
ZENITH_REGISTER_KERNEL(linear_cross_entropy, CPU, linear_cross_entropy_kernel);
ZENITH_REGISTER_KERNEL(linear_cross_entropy_grads, CPU, linear_cross_entropy_grads_kernel);

}  // namespace
}  // namespace zenith::cpu
