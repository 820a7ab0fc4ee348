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
#include "backend/cpu/lowp_load.h"
#include "zenith/error.h"

namespace zenith::cpu {
namespace {

constexpr int64_t kPanelFloats = int64_t(1) << 18;  // 1 MiB of float32 per panel

bool is_low(DType t) { return t == DType::bf16 || t == DType::f16; }

template <typename L>
void to_float_typed(const uint16_t* p, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, L::load8(p + i));
  for (; i < n; ++i) dst[i] = L::load1(p[i]);
}

}  // namespace

void to_float(const void* src, DType t, float* dst, int64_t n) {
  if (t == DType::f32) {
    std::copy(static_cast<const float*>(src), static_cast<const float*>(src) + n, dst);
    return;
  }
  ZENITH_CHECK(is_low(t), "[gemm] cannot read ", dtype_name(t), " as float32");
  const uint16_t* p = static_cast<const uint16_t*>(src);
  if (t == DType::bf16)
    to_float_typed<LoadBF16>(p, dst, n);
  else
    to_float_typed<LoadF16>(p, dst, n);
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
  // Two bfloat16 operands (amp O1/O2): bfloat16 arithmetic where the CPU has it.
  if (m > kGemvMaxRows && gemm_bf16(ta, tb, m, n, k, alpha, a, at_, lda, b, bt, ldb, beta, c, ldc))
    return;
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
    if (tb && m <= kGemvMaxRows) {  // decode steps: a GEMV over the 16-bit rows of B
      std::vector<float> a_rows;
      if (ta || lda != k) {
        a_rows.resize(size_t(m * k));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t e = 0; e < k; ++e)
            a_rows[size_t(i * k + e)] = ta ? af[e * lda + i] : af[i * lda + e];
        af = a_rows.data();
      }
      gemv(m, n, k, alpha, af, b, bt, ldb, beta, c, ldc);
      return;
    }
    if (!tb && n < k) {
      // B [k, n] with a long k (the input gradient dy W of a wide layer, e.g. the vocab head):
      // column panels would be narrow products that each re-read all of A, so B goes by
      // blocks of whole rows instead, each accumulated by a (multithreaded) sgemm. The blocks
      // are 8 panels (8 MiB): sgemm's cost per call makes short ones slow (a vocab head's
      // [131, 32000] x [32000, 288]: 1 MiB blocks took 15x the float32 product, 8 MiB ~4x).
      const int64_t kc = std::max<int64_t>(64, 8 * kPanelFloats / n);
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
