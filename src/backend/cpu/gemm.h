// Row-major GEMM for the CPU kernels: C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C.
// float32 goes through oneDNN's sgemm (OpenMP, the pool every kernel shares), float64 through
// OpenBLAS's dgemm. `lda` etc. are row strides of the matrices as stored (before op()).
#pragma once

#include <omp.h>

#include <cstdint>

#include "zenith/dtype.h"

namespace zenith::cpu {

// While alive, this thread's OpenMP regions (and so oneDNN's sgemm, which forks a team for a
// product it thinks worth it when called outside a parallel region) run on one thread.
class SingleThreadScope {
 public:
  SingleThreadScope() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreadScope() { omp_set_num_threads(saved_); }
  SingleThreadScope(const SingleThreadScope&) = delete;
  SingleThreadScope& operator=(const SingleThreadScope&) = delete;

 private:
  int saved_;
};

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc);

// The same product with A and B each float32, bfloat16 or float16 (at least one 16-bit), C
// float32, computed in float32 (gemm_lowp.cpp): the 16-bit matrix is converted in panels, never
// whole; few rows against a transposed 16-bit B (a linear layer's decode step) run a GEMV.
void gemm_lowp(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const void* a, DType a_dtype, int64_t lda, const void* b, DType b_dtype, int64_t ldb,
               float beta, float* c, int64_t ldc);
// The same product for two bfloat16 operands in bfloat16 arithmetic (gemm_bf16.cpp: oneDNN's
// matmul, float32 accumulation) where the CPU has AVX512_BF16 and ZENITH_BF16_COMPUTE is not 0;
// false (nothing done) elsewhere, or for alpha != 1 or beta other than 0 and 1.
bool gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const void* a, DType a_dtype, int64_t lda, const void* b, DType b_dtype, int64_t ldb,
               float beta, float* c, int64_t ldc);
// The same product with C bfloat16 too (two bfloat16 operands giving a bfloat16 result, amp's
// linear layers): oneDNN rounds each float32 sum as it stores it, with no float32 C and no
// conversion pass; false (nothing done) where gemm_bf16 declines.
bool gemm_bf16_rounded(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                       int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc);
// C [m, n] float32 = op(A) op(B) + bias (float32 [n], added to each row inside the kernel) for
// bfloat16 A and B in bfloat16 arithmetic; false (nothing done) where gemm_bf16 declines.
bool gemm_bf16_biased(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                      int64_t lda, const void* b, int64_t ldb, const float* bias, float* c,
                      int64_t ldc);
// The decode step's product, C[m, n] = alpha A B^T + beta C for m <= kGemvMaxRows: A float32
// [m, k] contiguous, B [n, k] float32, bfloat16 or float16 with row stride ldb (gemv.cpp:
// bandwidth-bound, rows of B spread over threads that claim them).
inline constexpr int64_t kGemvMaxRows = 4;
void gemv(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const void* b,
          DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc);
// n values of dtype t (float32, bfloat16 or float16) as float32.
void to_float(const void* src, DType t, float* dst, int64_t n);

// Which float32 GEMM runs: "onednn" (default) or "openblas"; ZENITH_SGEMM overrides at startup.
void set_sgemm_backend(const char* name);
const char* sgemm_backend();

}  // namespace zenith::cpu
