// The output layer and its loss as graph mode runs them for stories15M (D 288, V 32000): the fused
// linear_cross_entropy (logits GEMM, loss and dlogits) and the two gradient matmuls that read
// dlogits (dx = dlogits W, dW = dlogits^T x), ms per call, median and min over R calls, at 128
// rows (seq 64 x batch 2) and 2048 (seq 256 x batch 8); and linear_cross_entropy_grads, all three
// in one op without dlogits (graph mode's head where the gradient's matmuls alone read dlogits),
// beside the three's sum: on one thread (the default) the
// process's CPU time (load from other processes inflates it less than wall time), with more
// threads wall time. --json prints the same as JSON (scripts/perf_report.py renders it into
// docs/performance.md).
//
//   lm_head [--reps R] [--threads N] [--json]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "bench_machine.h"
#include "core/dispatch.h"
#include "zenith/zenith.h"

namespace {

using namespace zenith;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7, threads = 1;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) as_json = true;
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
  }
  context::set_num_threads(threads);
  auto now = [threads] {
    return threads == 1
               ? bench::process_cpu_seconds()
               : std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
                     .count();
  };
  const int64_t d = 288, v = 32000;
  // The ISA and the sgemm peak beside the table (best of two: the first call runs low).
  const double peak = std::max(bench::sgemm_peak_gflops(threads, 2048, /*cpu_time=*/threads == 1),
                               bench::sgemm_peak_gflops(threads, 2048, /*cpu_time=*/threads == 1));
  nlohmann::json out = bench::machine_json(threads, peak);
  out["reps"] = reps;
  out["time"] = threads == 1 ? "cpu" : "wall";
  out["rows"] = nlohmann::json::array();
  if (!as_json)
    std::cout << "ISA: " << bench::isa_line() << "; sgemm peak (dnnl_sgemm 2048^3): " << std::fixed
              << std::setprecision(1) << peak << " GFLOP/s\n"
              << (threads == 1 ? "CPU" : "wall") << " ms per call, " << threads
              << " thread(s), median (min) of " << reps << "\n"
              << std::setw(6) << "rows" << std::setw(24) << "linear_cross_entropy" << std::setw(20)
              << "GFLOP/s (its GEMM)" << std::setw(18) << "dx matmul" << std::setw(18)
              << "dW matmul" << std::setw(8) << "sum" << std::setw(22) << "linear_ce_grads"
              << std::setw(10) << "GFLOP/s"
              << "\n";
  for (int64_t m : {128, 2048}) {
    manual_seed(1);
    Tensor x = Tensor::randn({m, d}), w = ops::mul(Tensor::randn({v, d}), 0.05);
    Tensor t = Tensor::randint(0, v, {m});
    Tensor dloss = Tensor::scalar(1.0);
    std::vector<double> head, dx, dw, grads;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now();
      Tensor dlogits = dispatch::call<OpId::linear_cross_entropy>({x, w, t, dloss}, {})[1];
      const double t1 = now();
      dispatch::call1<OpId::matmul>({dlogits, w});
      const double t2 = now();
      dispatch::call1<OpId::matmul>({dlogits.transpose(0, 1), x});
      const double t3 = now();
      head.push_back((t1 - t0) * 1e3);
      dx.push_back((t2 - t1) * 1e3);
      dw.push_back((t3 - t2) * 1e3);
      const double t4 = now();
      dispatch::call<OpId::linear_cross_entropy_grads>({x, w, t, dloss}, {});
      grads.push_back((now() - t4) * 1e3);
    }
    auto cell = [](const std::vector<double>& ms) {
      std::ostringstream s;
      s << std::fixed << std::setprecision(2) << median(ms) << " ("
        << *std::min_element(ms.begin(), ms.end()) << ")";
      return s.str();
    };
    const double gflop = 2.0 * double(m) * double(v) * double(d) / 1e9;
    auto stat = [](const std::vector<double>& ms) {
      return nlohmann::json{{"median_ms", median(ms)},
                            {"min_ms", *std::min_element(ms.begin(), ms.end())}};
    };
    out["rows"].push_back({{"rows", m},
                           {"linear_cross_entropy", stat(head)},
                           {"linear_cross_entropy_gflops", gflop / (median(head) / 1e3)},
                           {"dx_matmul", stat(dx)},
                           {"dw_matmul", stat(dw)},
                           {"sum_median_ms", median(head) + median(dx) + median(dw)},
                           {"linear_cross_entropy_grads", stat(grads)},
                           {"grads_gflops", 3 * gflop / (median(grads) / 1e3)}});
    if (as_json) continue;
    std::cout << std::setw(6) << m << std::setw(24) << cell(head) << std::setw(20) << std::fixed
              << std::setprecision(1) << gflop / (median(head) / 1e3) << std::setw(18) << cell(dx)
              << std::setw(18) << cell(dw) << std::setw(8) << std::setprecision(1)
              << median(head) + median(dx) + median(dw) << std::setw(22) << cell(grads)
              << std::setw(10) << std::setprecision(1) << 3 * gflop / (median(grads) / 1e3) << "\n";
  }
  if (as_json) std::cout << out.dump(2) << std::endl;
}
