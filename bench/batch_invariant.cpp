// What batch invariance costs (core/batch_invariant.h): the CPU linear kernel in its default
// form (oneDNN sgemm, the GEMV for <= 4 rows) against the row-wise kernel the LLM engine turns on
// (each output element reduced in one fixed order whatever the number of rows), at the linear
// shapes of the 15M- and 110M-shaped LLaMA and row counts from a decode step to a prefill chunk.
//
//   batch_invariant [--threads N] [--reps R] [--json]
//
// Prints the host's ISA, the sgemm peak and per case the best of R runs of each kernel.
#include "core/batch_invariant.h"

#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_common.h"
#include "bench_machine.h"
#include "zenith/zenith.h"

namespace {

using namespace zenith;
using zenith::bench::Clock;

double best_seconds(const Tensor& x, const Tensor& w, int reps, bool invariant) {
  core::BatchInvariantScope scope(invariant);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    Tensor y = ops::linear(x, w);
    best = std::min(best, bench::seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = bench::default_threads(), reps = 20;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--json")
      as_json = true;
  }
  omp_set_num_threads(threads);
  const double peak = bench::sgemm_peak_gflops(threads);
  struct Case {
    const char* model;
    int64_t in, out;
  };
  const Case cases[] = {
      {"15m", 288, 768}, {"15m", 768, 288}, {"110m", 768, 2048}, {"110m", 2048, 768}};
  const int64_t rows[] = {1, 8, 64, 256};
  nlohmann::json out = bench::machine_json(threads, peak);
  out["cases"] = nlohmann::json::array();
  if (!as_json)
    std::printf("%s\nthreads %d, sgemm peak %.1f GFLOP/s\n%-6s %-11s %5s %11s %11s %7s\n",
                bench::isa_line().c_str(), threads, peak, "model", "in->out", "rows", "default us",
                "rowwise us", "ratio");
  NoGradGuard no_grad;
  for (const Case& c : cases)
    for (int64_t m : rows) {
      Tensor x = Tensor::randn({m, c.in}), w = Tensor::randn({c.out, c.in});
      best_seconds(x, w, 2, false);
      best_seconds(x, w, 2, true);
      const double d = best_seconds(x, w, reps, false), r = best_seconds(x, w, reps, true);
      out["cases"].push_back({{"model", c.model},
                              {"in", c.in},
                              {"out", c.out},
                              {"rows", m},
                              {"default_us", d * 1e6},
                              {"rowwise_us", r * 1e6},
                              {"rowwise_gflops", 2.0 * double(m * c.in * c.out) / r * 1e-9}});
      if (!as_json)
        std::printf("%-6s %5lld->%-5lld %5lld %11.1f %11.1f %7.2f\n", c.model, (long long)c.in,
                    (long long)c.out, (long long)m, d * 1e6, r * 1e6, r / d);
    }
  if (as_json) std::cout << out.dump(2) << "\n";
  return 0;
}
