// GEMM wrappers: oneDNN sgemm or OpenBLAS sgemm for float32, OpenBLAS dgemm for float64.
#include "backend/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "zenith/error.h"

namespace zenith::cpu {
namespace {

// oneDNN's sgemm is several times faster than Debian's OpenBLAS on the SeedCNN/ResNet Dense
// shapes (OnednnBench.Sgemm in tests/backend/onednn_bench_test.cpp), and shares the OpenMP pool.
bool g_use_openblas = [] {
  const char* env = std::getenv("ZENITH_SGEMM");
  return env && std::strcmp(env, "openblas") == 0;
}();

// Products below this many multiply-adds run on one thread: a Dense layer's gemm takes less than
// waking the pool, and on a busy machine a descheduled second thread stalls the call for a whole
// time slice.
constexpr int64_t kSmallGemm = int64_t(1) << 22;

// A product of few rows against a transposed B (a linear layer's x W^T at a few hundred rows)
// splits across threads better as column blocks, one single-threaded sgemm per thread, than as
// oneDNN's sgemm divides it (on 2 cores at stories15M's shapes; the same or slower without the
// transpose, from 512 rows up, and for the [32000, 288] output layer).
constexpr int64_t kSplitRows = 256;
constexpr int64_t kSplitColumns = 64;  // the fewest columns a thread takes

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
  if (tb && !ta && m <= kSplitRows && m * n * k >= kSmallGemm && !omp_in_parallel()) {
    const int threads = int(std::min<int64_t>(omp_get_max_threads(), n / kSplitColumns));
    if (threads > 1) {
      std::vector<dnnl_status_t> status(size_t(threads), dnnl_success);
#pragma omp parallel num_threads(threads)
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        // Column blocks on 16-column boundaries (whole vectors); the last takes the rest.
        const int64_t n0 = n * t / nt / 16 * 16, n1 = t + 1 == nt ? n : n * (t + 1) / nt / 16 * 16;
        if (n1 > n0)
          status[size_t(t)] = dnnl_sgemm('N', 'T', m, n1 - n0, k, alpha, a, lda, b + n0 * ldb, ldb,
                                         beta, c + n0, ldc);
      }
      for (dnnl_status_t st : status)
        ZENITH_CHECK(st == dnnl_success, "[gemm] dnnl_sgemm failed with status ", int(st));
      return;
    }
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
