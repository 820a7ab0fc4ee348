// The decode GEMV (src/backend/cpu/gemv.cpp) against a float64 reference on float32, bfloat16
// and float16 weights, 1-4 rows, tails, row strides, alpha/beta, one and two threads, on every
// row kernel this CPU runs (AVX2 forced as well as AVX-512); and the claiming loop under it
// (claim_pool.cpp): every item once, from several callers at a time and nested.
#include <atomic>
#include <thread>

#include "backend/cpu/claim_pool.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemv_kernels.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// Sets the pool's threads for a scope.
class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : saved_(context::get_num_threads()) { context::set_num_threads(n); }
  ~ThreadsScope() { context::set_num_threads(saved_); }

 private:
  int saved_;
};

struct Case {
  int64_t m, n, k, ldb;
  float alpha, beta;
};

// C = alpha A B^T + beta C0 in float64 from the weights' float32 values.
std::vector<double> reference(const Case& c, const std::vector<float>& a,
                              const std::vector<float>& b, const std::vector<float>& c0) {
  std::vector<double> out(size_t(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t e = 0; e < c.k; ++e)
        s += double(a[size_t(i * c.k + e)]) * b[size_t(j * c.ldb + e)];
      out[size_t(i * c.n + j)] = c.alpha * s + c.beta * double(c0[size_t(i * c.n + j)]);
    }
  return out;
}

}  // namespace

TEST(Gemv, EqualsFloat64ReferenceForEveryWeightDtype) {
  // Small (one thread), tails in k (below one vector, between one and two, above two) and in
  // n, a row stride above k, and sizes over the threaded threshold (128 KiB of weights) with a
  // partial last block.
  const Case cases[] = {
      {1, 1, 1, 1, 1.f, 0.f},          {1, 96, 288, 288, 1.f, 0.f},    {3, 29, 37, 37, 0.5f, 0.f},
      {4, 13, 45, 64, 1.f, 1.f},       {2, 7, 15, 15, 1.f, 0.f},       {1, 5, 17, 20, 1.f, 0.f},
      {3, 3, 31, 31, 1.f, 0.f},        {4, 9, 33, 40, 1.f, 0.5f},      {1, 11, 63, 63, 1.f, 0.f},
      {2, 1001, 1100, 1100, 1.f, 0.f}, {1, 4099, 288, 300, 2.f, 0.5f}, {4, 770, 768, 768, 1.f, 1.f},
      {1, 2053, 768, 768, 1.f, 0.f}};
  std::vector<cpu::GemvIsa> isas = {cpu::GemvIsa::avx2};
  if (cpu::gemv_isa_supported(cpu::GemvIsa::avx512)) isas.push_back(cpu::GemvIsa::avx512);
  for (cpu::GemvIsa isa : isas)
    for (int threads : {1, 2}) {
      ThreadsScope scope(threads);
      for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
        for (const Case& c : cases) {
          SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                       " ldb " + std::to_string(c.ldb) + " " + dtype_name(dtype) + ", " +
                       std::to_string(threads) + " threads, " +
                       (isa == cpu::GemvIsa::avx2 ? "avx2" : "avx512"));
          Tensor a = random_input({c.m, c.k}, DType::f32);
          Tensor b = random_input({c.n, c.ldb}, DType::f32).to(dtype);  // stored dtype
          Tensor c0 = random_input({c.m, c.n}, DType::f32);
          const std::vector<float> av = a.to_float_vector(), c0v = c0.to_float_vector();
          const std::vector<float> bv = b.to_float_vector();  // the stored values, exactly
          std::vector<float> out = c0v;
          cpu::gemv_on(isa, c.m, c.n, c.k, c.alpha, av.data(), b.raw_data(), dtype, c.ldb, c.beta,
                       out.data(), c.n);
          const std::vector<double> want = reference(c, av, bv, c0v);
          double worst = 0;
          for (size_t i = 0; i < want.size(); ++i)
            worst = std::max(worst, std::abs(double(out[i]) - want[i]) / (1.0 + std::abs(want[i])));
          EXPECT_LT(worst, 1e-5);
        }
      }
    }
}

TEST(Gemv, LinearDecodeStepTakesItAndMatchesTheGemm) {
  // ops::linear with 1-4 float32 rows runs the GEMV; 5 rows the sgemm. Both equal float64.
  for (int64_t rows : {1, 4, 5}) {
    Tensor x = random_input({rows, 300}, DType::f32), w = random_input({700, 300}, DType::f32);
    Tensor b = random_input({700}, DType::f32);
    Tensor want = ops::linear(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64));
    EXPECT_TRUE(all_close(ops::linear(x, w, b).to(DType::f64), want, 1e-5, 1e-5)) << rows;
    // A strided input row and a transposed weight view take the general path.
    Tensor xs = random_input({rows, 600}, DType::f32).slice(1, 0, 600, 2);
    Tensor want_s = ops::linear(xs.to(DType::f64), w.to(DType::f64));
    EXPECT_TRUE(all_close(ops::linear(xs, w).to(DType::f64), want_s, 1e-5, 1e-5));
    Tensor wt = w.t().contiguous().t();
    EXPECT_TRUE(all_close(ops::linear(x, wt, b).to(DType::f64), want, 1e-5, 1e-5));
  }
}

TEST(Gemv, RejectsMoreRowsAndIntegerWeights) {
  std::vector<float> a(5 * 8), b(8 * 8), c(5 * 8);
  EXPECT_TRUE(throws_with(
      [&] { cpu::gemv(5, 8, 8, 1.f, a.data(), b.data(), DType::f32, 8, 0.f, c.data(), 8); },
      "[gemm] the GEMV takes 1 to 4 rows, got 5"));
  EXPECT_TRUE(throws_with(
      [&] { cpu::gemv(1, 8, 8, 1.f, a.data(), b.data(), DType::i32, 8, 0.f, c.data(), 8); },
      "[gemm] the GEMV reads float32, bfloat16 or float16 weights, got int32"));
}

TEST(ClaimPool, EveryItemOnceFromSeveralCallersAndNested) {
  ThreadsScope scope(2);
  auto check = [](int64_t count) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
    cpu::parallel_claim(count, [&](int64_t i) {
      hits[size_t(i)].fetch_add(1);
      // A nested call runs on the thread that makes it.
      int inner = 0;
      cpu::parallel_claim(3, [&](int64_t) { ++inner; });
      EXPECT_EQ(inner, 3);
    });
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << i;
  };
  for (int rep = 0; rep < 200; ++rep) check(1 + rep % 37);
  // Four callers at once share the helpers; each call still covers its own items exactly once.
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 100; ++rep) check(64);
    });
  for (auto& t : callers) t.join();
}

// The pause after a lag: none for the wait an unfinished item or two costs, 20x the lag for a
// hiccup, 50 ms at most for a helper descheduled for a time slice.
TEST(ClaimPool, ThePauseAfterALagScalesWithTheLag) {
  using std::chrono::microseconds, std::chrono::milliseconds, std::chrono::nanoseconds;
  const nanoseconds item = microseconds(2);
  EXPECT_EQ(cpu::alone_after_lag(microseconds(0), item), nanoseconds(0));
  EXPECT_EQ(cpu::alone_after_lag(microseconds(58), item), nanoseconds(0));  // 4 items + 50 us
  EXPECT_EQ(cpu::alone_after_lag(microseconds(100), item), milliseconds(2));
  EXPECT_EQ(cpu::alone_after_lag(microseconds(1000), item), milliseconds(20));
  EXPECT_EQ(cpu::alone_after_lag(milliseconds(4), item), milliseconds(50));
  // Slow items (a large block each) raise the bar: 100 us is then no lag.
  EXPECT_EQ(cpu::alone_after_lag(microseconds(100), microseconds(20)), nanoseconds(0));
}

TEST(ClaimPool, ALaggingHelperLeavesTheNextCallsToTheCaller) {
  ThreadsScope scope(2);
  const auto caller = std::this_thread::get_id();
  // An item that a helper runs takes 5 ms (as if it had been descheduled): the caller, done with
  // its own 1 us items, waits for it, then runs its next calls alone.
  auto spin = [] {  // about a microsecond
    for (volatile int i = 0; i < 500; i = i + 1) {
    }
  };
  // On a loaded host a woken helper may wait a time slice for a core: the caller's first item
  // gives it up to 5 ms to join before the caller runs the rest (CI once saw no helper join, or
  // none help again, when the caller's 256 items were over in a quarter of a millisecond).
  auto wait_for_helper = [](const std::atomic<int>& on_helper) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
    while (on_helper.load() == 0 && std::chrono::steady_clock::now() < until) {
    }
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past an earlier test's lag
  bool lagged = false;
  for (int attempt = 0; attempt < 50 && !lagged; ++attempt) {
    std::atomic<int> on_helper{0};
    std::atomic<bool> first{true};
    cpu::parallel_claim(256, [&](int64_t) {
      if (std::this_thread::get_id() == caller) {
        if (first.exchange(false)) wait_for_helper(on_helper);
        return spin();
      }
      on_helper.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    lagged = on_helper.load() > 0;
  }
  const auto lag_end = std::chrono::steady_clock::now();
  ASSERT_TRUE(lagged) << "no helper joined in 50 calls";
  // (A lag now leaves the caller alone.)
  std::atomic<int> elsewhere{0}, runs{0};
  cpu::parallel_claim(64, [&](int64_t) {
    runs.fetch_add(1);
    if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
  });
  EXPECT_EQ(runs.load(), 64);
  // (Unless this thread was itself descheduled past the 50 ms.)
  if (std::chrono::steady_clock::now() - lag_end < std::chrono::milliseconds(40))
    EXPECT_EQ(elsewhere.load(), 0);
  // After the pause the helpers take items again.
  bool helped = false;
  for (int attempt = 0; attempt < 20 && !helped; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    std::atomic<int> on_helper{0};
    std::atomic<bool> first{true};
    cpu::parallel_claim(256, [&](int64_t) {
      if (std::this_thread::get_id() != caller)
        on_helper.fetch_add(1);
      else if (first.exchange(false))
        wait_for_helper(on_helper);
      spin();
    });
    helped = on_helper.load() > 0;
  }
  EXPECT_TRUE(helped);
}
