// GEMM wrappers: oneDNN sgemm or OpenBLAS sgemm for float32, OpenBLAS dgemm for float64.
#include "backend/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <cstring>
#include <optional>

#include "zenith/error.h"

namespace zenith::cpu {
namespace {

// Measured on 2 EPYC cores (tests/backend/onednn_bench_test.cpp, OnednnBench.Sgemm): oneDNN's
// sgemm is 2-7x faster than Debian's OpenBLAS on the SeedCNN/ResNet Dense shapes and 4x on a
// 256x1024x1024 product, and shares the OpenMP pool.
bool g_use_openblas = [] {
  const char* env = std::getenv("ZENITH_SGEMM");
  return env && std::strcmp(env, "openblas") == 0;
}();

// Products below this many multiply-adds run on one thread: a Dense layer's gemm takes ~20 us,
// less than waking the pool, and on a busy machine a descheduled second thread stalls the call
// for a whole time slice (12 ms measured).
constexpr int64_t kSmallGemm = int64_t(1) << 22;

class SingleThreadScope {
 public:
  SingleThreadScope() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreadScope() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// BLAS wants leading dimensions >= the stored row length even for a single row.
int64_t fix_ld(int64_t ld, int64_t cols) { return ld < cols ? cols : ld; }

}  // namespace

void set_sgemm_backend(const char* name) {
  ZENITH_CHECK(std::strcmp(name, "onednn") == 0 || std::strcmp(name, "openblas") == 0,
               "[gemm] unknown sgemm backend '", name, "' (known: onednn, openblas)");
  g_use_openblas = std::strcmp(name, "openblas") == 0;
}

const char* sgemm_backend() { return g_use_openblas ? "openblas" : "onednn"; }

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  lda = fix_ld(lda, ta ? m : k);
  ldb = fix_ld(ldb, tb ? k : n);
  ldc = fix_ld(ldc, n);
  if (k == 0) {  // C = beta * C; BLAS may not touch C at all
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  if (g_use_openblas) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta,
                c, blasint(ldc));
    return;
  }
  std::optional<SingleThreadScope> single;
  if (m * n * k < kSmallGemm) single.emplace();
  dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  ZENITH_CHECK(st == dnnl_success, "[gemm] dnnl_sgemm failed with status ", int(st));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  lda = fix_ld(lda, ta ? m : k);
  ldb = fix_ld(ldb, tb ? k : n);
  ldc = fix_ld(ldc, n);
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0 ? 0.0 : beta * c[i * ldc + j];
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              blasint(m), blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c,
              blasint(ldc));
}

}  // namespace zenith::cpu
