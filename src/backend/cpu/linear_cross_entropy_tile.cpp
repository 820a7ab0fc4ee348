// The tiles of the CPU linear_cross_entropy: the oneDNN tile GEMM, the tile's exps and
// statistics, and its transposed copy into dlogits.
#include "backend/cpu/linear_cross_entropy_tile.h"

#include <immintrin.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/math_simd.h"

namespace zenith::cpu {
namespace {

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

// Over n columns of w rows (column stride ld): each row's max m, its logits l turned into
// exp(l - m) in place, s = sum exp(l - m) and b = sum (m - l); the rows vectorise, kGroup at a
// time with m, s and b in registers (not loaded and stored per column), float32's exps through
// exp_nonpositive (the same bits as simd::exp there, without its overflow tests). Rows: kGroup as a
// compile-time constant for whole groups, else the last few.
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
}  // namespace

TileGemm::TileGemm(int64_t mb, int64_t d, int64_t vc, int64_t last, bool concurrent)
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

void TileGemm::set_rows(const float* x_block) {
  x_ = x_block;
  if (packed_)
    e_->pack.run({{DNNL_ARG_FROM, plain_weights(), const_cast<float*>(x_block)},
                  {DNNL_ARG_TO, e_->packed, packed_.get()}});
}

void TileGemm::run(const float* w_chunk, int64_t n, float* lt) {
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
      ZENITH_CHECK(scratch != nullptr, "[linear_cross_entropy] out of memory for a scratchpad of ",
                   scratch_size, " bytes");
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

dnnl::memory::desc TileGemm::plain_weights() const {
  return memory::desc({d_, mb_}, dt::f32, memory::dims{1, d_});
}

onednn::Primitive TileGemm::make(int64_t n, const memory::desc& weights, memory::desc* chosen,
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
template void exp_tile(const float*, const float*, const int64_t*, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, float*, ChunkStats<float>&, float*,
                       int64_t, TileGemm*);
template void exp_tile(const double*, const double*, const int64_t*, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, double*, ChunkStats<double>&, double*,
                       int64_t, TileGemm*);

}  // namespace zenith::cpu
