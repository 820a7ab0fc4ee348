// GEMM with 16-bit float operands (bfloat16/float16 weights of LLaMA checkpoints) computed in
// float32: the 16-bit matrix is converted panel by panel (about 1 MiB of float32 at a time, one
// panel per thread, each multiplied by a single-threaded sgemm), never copied whole; products
// with few rows against a transposed 16-bit matrix (a linear layer's decode step) read the
// 16-bit weights directly in a GEMV, bandwidth-bound at 2 bytes per weight.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/gemm.h"
#include "zenith/error.h"

namespace zenith::cpu {
namespace {

constexpr int64_t kPanelFloats = int64_t(1) << 18;  // 1 MiB of float32 per panel
constexpr int64_t kGemvRows = 4;                    // rows of A the GEMV path takes

bool is_low(DType t) { return t == DType::bf16 || t == DType::f16; }

// 8 16-bit floats at p as float32.
inline __m256 load8(const uint16_t* p, bool bf16) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}
inline float load1(uint16_t v, bool bf16) { return bf16 ? bf16_to_float(v) : half_to_float(v); }

}  // namespace

void to_float(const void* src, DType t, float* dst, int64_t n) {
  if (t == DType::f32) {
    std::copy(static_cast<const float*>(src), static_cast<const float*>(src) + n, dst);
    return;
  }
  ZENITH_CHECK(is_low(t), "[gemm] cannot read ", dtype_name(t), " as float32");
  const uint16_t* p = static_cast<const uint16_t*>(src);
  const bool bf16 = t == DType::bf16;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8(p + i, bf16));
  for (; i < n; ++i) dst[i] = load1(p[i], bf16);
}

namespace {

// Element offset as a byte pointer.
const void* at(const void* base, DType t, int64_t elements) {
  return static_cast<const char*>(base) + elements * int64_t(itemsize(t));
}

// rows x cols of a matrix stored with row stride ld, as contiguous float32 [rows, cols].
void convert_block(const void* src, DType t, int64_t ld, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) to_float(at(src, t, r * ld), t, dst + r * cols, cols);
}

// Columns [j, j + C) of C[M, n] = alpha A B^T + beta C: M C independent FMA chains (one chain
// alone is latency-bound); M and C compile-time so the accumulators stay in registers.
template <int M, int C>
void gemv_block(int64_t j, int64_t k, float alpha, const float* a, const uint16_t* b, int64_t ldb,
                bool bf16, float beta, float* c, int64_t ldc) {
  __m256 acc[C][M];
  for (int q = 0; q < C; ++q)
    for (int i = 0; i < M; ++i) acc[q][i] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= k; e += 8) {
    __m256 wv[C];
    for (int q = 0; q < C; ++q) wv[q] = load8(b + (j + q) * ldb + e, bf16);
    for (int i = 0; i < M; ++i) {
      const __m256 av = _mm256_loadu_ps(a + i * k + e);
      for (int q = 0; q < C; ++q) acc[q][i] = _mm256_fmadd_ps(av, wv[q], acc[q][i]);
    }
  }
  for (int q = 0; q < C; ++q) {
    const uint16_t* w = b + (j + q) * ldb;
    for (int i = 0; i < M; ++i) {
      __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[q][i]), _mm256_extractf128_ps(acc[q][i], 1));
      s = _mm_hadd_ps(s, s);
      s = _mm_hadd_ps(s, s);
      float sum = _mm_cvtss_f32(s);
      for (int64_t t = e; t < k; ++t) sum += a[i * k + t] * load1(w[t], bf16);
      float* out = c + i * ldc + j + q;
      *out = alpha * sum + (beta == 0.f ? 0.f : beta * *out);
    }
  }
}

template <int M>
void gemv_columns(int64_t j0, int64_t j1, int64_t k, float alpha, const float* a, const uint16_t* b,
                  int64_t ldb, bool bf16, float beta, float* c, int64_t ldc) {
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) gemv_block<M, 4>(j, k, alpha, a, b, ldb, bf16, beta, c, ldc);
  for (; j < j1; ++j) gemv_block<M, 1>(j, k, alpha, a, b, ldb, bf16, beta, c, ldc);
}

// C[m, n] = alpha A B^T + beta C for m <= kGemvRows: A float32 [m, k] contiguous, B 16-bit
// [n, k] with row stride ldb. Output columns in parallel; each weight is read once.
void gemv_lowp(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const uint16_t* b,
               int64_t ldb, bool bf16, float beta, float* c, int64_t ldc) {
  auto columns = [&](int64_t j0, int64_t j1) {
    switch (m) {
      case 1:
        return gemv_columns<1>(j0, j1, k, alpha, a, b, ldb, bf16, beta, c, ldc);
      case 2:
        return gemv_columns<2>(j0, j1, k, alpha, a, b, ldb, bf16, beta, c, ldc);
      case 3:
        return gemv_columns<3>(j0, j1, k, alpha, a, b, ldb, bf16, beta, c, ldc);
      default:
        return gemv_columns<4>(j0, j1, k, alpha, a, b, ldb, bf16, beta, c, ldc);
    }
  };
  // Below about a million weights (2 MiB) one thread streams them in tens of microseconds;
  // waking a team costs more, and on a loaded machine can cost a whole scheduler slice.
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads == 1 || n * k < (int64_t(1) << 20)) {
    columns(0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    columns(n * t / nt, n * (t + 1) / nt);
  }
}

// Runs f(panel) for panels [0, count) across the pool, each with its own float32 buffer of
// `floats` elements; the sgemm inside runs on its calling thread.
template <typename F>
void for_panels(int64_t count, int64_t floats, F&& f) {
  const int threads = omp_in_parallel() ? 1 : int(std::min<int64_t>(omp_get_max_threads(), count));
  if (threads <= 1) {
    std::vector<float> buf(static_cast<size_t>(floats));
    for (int64_t p = 0; p < count; ++p) f(p, buf.data());
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> buf(static_cast<size_t>(floats));
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < count; ++p) f(p, buf.data());
  }
}

// The width of panels along a dim of `size` whose panels hold `depth` elements per unit of
// width: about kPanelFloats, a multiple of 16, at least one panel per thread when possible.
int64_t panel_width(int64_t size, int64_t depth) {
  const int64_t threads = omp_get_max_threads();
  int64_t w = std::max<int64_t>(16, kPanelFloats / std::max<int64_t>(depth, 1) / 16 * 16);
  w = std::min(w, std::max<int64_t>(16, (size + threads - 1) / threads));
  return std::min(w, size);
}

}  // namespace

void gemm_lowp(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
               DType at_, int64_t lda, const void* b, DType bt, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  ZENITH_CHECK((at_ == DType::f32 || is_low(at_)) && (bt == DType::f32 || is_low(bt)), "[gemm] ",
               dtype_name(at_), " x ", dtype_name(bt), " is not a float32 / 16-bit product");
  if (m == 0 || n == 0) return;
  if (!is_low(at_) && !is_low(bt)) {
    gemm(ta, tb, m, n, k, alpha, static_cast<const float*>(a), lda, static_cast<const float*>(b),
         ldb, beta, c, ldc);
    return;
  }
  if (k == 0) {
    gemm(ta, tb, m, n, k, alpha, static_cast<const float*>(nullptr), lda,
         static_cast<const float*>(nullptr), ldb, beta, c, ldc);
    return;
  }
  if (!ta) lda = std::max(lda, k);
  if (tb) ldb = std::max(ldb, k);
  // A 16-bit A is converted whole when B is 16-bit too (both low: rare, A the activations);
  // otherwise A float32 is used in place.
  std::vector<float> a_float;
  const float* af = static_cast<const float*>(a);
  if (is_low(at_) && is_low(bt)) {
    a_float.resize(size_t(m * k));
    if (ta) {  // A stored [k, m]: convert then use transposed
      convert_block(a, at_, lda, k, m, a_float.data());
      lda = m;
    } else {
      convert_block(a, at_, lda, m, k, a_float.data());
      lda = k;
    }
    af = a_float.data();
  }
  if (is_low(bt)) {
    if (tb && m <= kGemvRows) {  // decode steps: a GEMV over the 16-bit rows of B
      std::vector<float> a_rows;
      if (ta || lda != k) {
        a_rows.resize(size_t(m * k));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t e = 0; e < k; ++e)
            a_rows[size_t(i * k + e)] = ta ? af[e * lda + i] : af[i * lda + e];
        af = a_rows.data();
      }
      gemv_lowp(m, n, k, alpha, af, static_cast<const uint16_t*>(b), ldb, bt == DType::bf16, beta,
                c, ldc);
      return;
    }
    if (!tb && n < k) {
      // B [k, n] with a long k (the input gradient dy W of a wide layer, e.g. the vocab head):
      // column panels would be narrow products that each re-read all of A, so B goes by
      // blocks of whole rows instead, each accumulated by a (multithreaded) sgemm.
      const int64_t kc = std::max<int64_t>(64, kPanelFloats / n);
      std::vector<float> buf(static_cast<size_t>(std::min(kc, k) * n));
      for (int64_t k0 = 0; k0 < k; k0 += kc) {
        const int64_t kb = std::min(kc, k - k0);
        convert_block(at(b, bt, k0 * ldb), bt, ldb, kb, n, buf.data());
        const float* ak = ta ? af + k0 * lda : af + k0;  // A's columns k0.. of op(A) [m, k]
        gemm(ta, false, m, n, kb, alpha, ak, lda, buf.data(), n, k0 == 0 ? beta : 1.f, c, ldc);
      }
      return;
    }
    // Panels of columns of op(B): tb: rows j0.. of B [n, k]; else columns j0.. of B [k, n].
    const int64_t width = panel_width(n, k);
    const int64_t panels = (n + width - 1) / width;
    for_panels(panels, width * k, [&](int64_t p, float* buf) {
      const int64_t j0 = p * width, nb = std::min(width, n - j0);
      if (tb)
        convert_block(at(b, bt, j0 * ldb), bt, ldb, nb, k, buf);
      else
        convert_block(at(b, bt, j0), bt, ldb, k, nb, buf);
      gemm(ta, tb, m, nb, k, alpha, af, lda, buf, tb ? k : nb, beta, c + j0, ldc);
    });
    return;
  }
  // A 16-bit, B float32: panels of rows of op(A): ta: columns i0.. of A [k, m]; else rows.
  const int64_t width = panel_width(m, k);
  const int64_t panels = (m + width - 1) / width;
  const float* bf = static_cast<const float*>(b);
  for_panels(panels, width * k, [&](int64_t p, float* buf) {
    const int64_t i0 = p * width, mb = std::min(width, m - i0);
    if (ta)
      convert_block(at(a, at_, i0), at_, lda, k, mb, buf);
    else
      convert_block(at(a, at_, i0 * lda), at_, lda, mb, k, buf);
    gemm(ta, tb, mb, n, k, alpha, buf, ta ? mb : k, bf, ldb, beta, c + i0 * ldc, ldc);
  });
}

}  // namespace zenith::cpu
