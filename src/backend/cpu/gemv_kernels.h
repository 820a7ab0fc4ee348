// The decode GEMV's row kernels (gemv.cpp), one per instruction set and chosen at run time:
// AVX-512 (16 lanes, masked tails) where the CPU has it, AVX2 + F16C otherwise. Each takes
// one row of B at a time from start to end: one sequential stream, which the hardware
// prefetchers follow (several rows interleaved ran 2-3x slower on the 110M shape's weights).
#pragma once

#include <cstdint>

#include "zenith/dtype.h"

namespace zenith::cpu {

enum class GemvIsa : uint8_t { avx2, avx512 };

GemvIsa gemv_isa();  // the fastest this CPU runs
bool gemv_isa_supported(GemvIsa isa);

// The product of gemm.h's gemv(), on the given path (tests force each one).
void gemv_on(GemvIsa isa, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             const void* b, DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc);

// C[i, j] = alpha A[i, :] . B[j, :] + beta C[i, j] for the m (1-4) rows of A and rows
// [j0, j1) of B.
struct GemvArgs {
  int64_t m, k;
  float alpha;
  const float* a;
  const void* b;
  DType b_dtype;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};
void gemv_rows_avx2(const GemvArgs& p, int64_t j0, int64_t j1);
void gemv_rows_avx512(const GemvArgs& p, int64_t j0, int64_t j1);

}  // namespace zenith::cpu
