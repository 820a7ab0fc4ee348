// SeedCNN's convolutions on CIFAR-10 at batch 64 as graph mode runs them, op by op: the first
// conv fused with its ReLU and pooling (forward, and its weight gradient with the pooling's and
// ReLU's backward), and the second conv's forward, data gradient and weight gradient on the
// blocked layouts the graph hands them. ms per call (min and median of R calls) and GFLOP/s
// (direct-convolution FLOPs), beside the ISA and the sgemm peak; then weight gradients of larger
// 3x3 convs, zenith's AVX2 kernel (where the AVX2 fast paths are on) against oneDNN's. --json
// prints the same as JSON (scripts/perf_report.py renders it into docs/performance.md).
//
//   conv_ops [--reps R] [--threads N] [--json]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/onednn_layout.h"
#include "bench_machine.h"
#include "core/dispatch.h"
#include "zenith/zenith.h"

namespace {

using namespace zenith;

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Conv2dAttrs conv_attrs(Shape x, Shape w) {
  Conv2dAttrs a;
  a.input_shape = x;
  a.weight_shape = w;
  a.output_shape = {x[0], w[0], x[2] - w[2] + 1, x[3] - w[3] + 1};
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50, threads = 2;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) as_json = true;
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
  }
  context::set_num_threads(threads);
  const double peak =
      std::max(bench::sgemm_peak_gflops(threads), bench::sgemm_peak_gflops(threads));
  const double stream = bench::stream_triad_gbps(threads);
  nlohmann::json out = bench::machine_json(threads, peak);
  out["stream_gbps"] = stream;
  out["reps"] = reps;
  out["rows"] = nlohmann::json::array();
  if (!as_json)
    std::cout << "ISA: " << bench::isa_line() << "; sgemm peak (dnnl_sgemm 2048^3): " << std::fixed
              << std::setprecision(1) << peak << " GFLOP/s; DRAM (STREAM triad) " << stream
              << " GB/s; " << threads << " thread(s), " << reps << " calls\n";
  context::set_num_threads(threads);

  manual_seed(1);
  const Conv2dAttrs c1 = conv_attrs({64, 3, 32, 32}, {32, 3, 3, 3});
  const Conv2dAttrs c2 = conv_attrs({64, 32, 15, 15}, {64, 32, 3, 3});
  Tensor x = Tensor::randn({64, 3, 32, 32}), w1 = Tensor::randn({32, 3, 3, 3});
  Tensor w2 = Tensor::randn({64, 32, 3, 3}) * 0.1;
  std::vector<Tensor> f1 = dispatch::call<OpId::conv2d_relu_max_pool>({x, w1}, c1);
  Tensor h = f1[0];  // [64, 32, 15, 15], blocked as the graph has it
  Tensor y2 = dispatch::call<OpId::conv2d>({h, w2, Tensor()}, c2)[0];
  Tensor dy2 = y2 * 0.01;  // a blocked gradient of the second conv's output
  Tensor dh = dispatch::call<OpId::conv2d_backward_data>({dy2, w2}, c2)[0];

  auto flops = [](const Conv2dAttrs& a) {
    const Shape& y = a.output_shape;
    const Shape& w = a.weight_shape;
    return 2.0 * double(y[0] * y[1] * y[2] * y[3]) * double(w[1] * w[2] * w[3]);
  };
  struct Row {
    std::string name;
    double flop;
    std::function<void()> run;
  };
  // A weight gradient with the AVX2 fast paths as the host has them ("auto") or off (oneDNN's).
  auto wgrad = [](const Tensor& dy, const Tensor& xin, const Conv2dAttrs& a, const char* mode) {
    return [&dy, &xin, a, mode] {
      cpu::set_avx2_fast_paths(mode);
      dispatch::call<OpId::conv2d_backward_weights>({dy, xin}, a);
      cpu::set_avx2_fast_paths("auto");
    };
  };
  std::vector<Row> rows = {
      {"conv1+relu+pool fwd", flops(c1),
       [&] {
         dispatch::call<OpId::conv2d_relu_max_pool>({x, w1}, c1);
       }},
      {"conv1+relu+pool bwd", flops(c1),
       [&] {
         dispatch::call<OpId::conv2d_relu_max_pool_backward>({dh, x, w1, Tensor(), f1[1]}, c1);
       }},
      {"conv2 fwd", flops(c2),
       [&] {
         dispatch::call<OpId::conv2d>({h, w2, Tensor()}, c2);
       }},
      {"conv2 bwd data", flops(c2),
       [&] {
         dispatch::call<OpId::conv2d_backward_data>({dy2, w2}, c2);
       }},
      {"conv2 bwd weights", flops(c2), wgrad(dy2, h, c2, "auto")},
      {"  same, oneDNN's", flops(c2), wgrad(dy2, h, c2, "off")},
  };
  // Weight gradients of larger 3x3 convs (padding 1, batch 8), on blocked tensors as a network
  // hands them over: zenith's AVX2 kernel (where the fast paths are on) and oneDNN's.
  struct Big {
    std::string name;
    Conv2dAttrs a;
    Tensor x, dy;
  };
  std::vector<Big> bigs;
  for (auto [name, c, hw] : {std::tuple{"ResNet-18 CIFAR 64ch 32x32", 64, 32},
                             std::tuple{"ResNet-18 CIFAR 128ch 16x16", 128, 16},
                             std::tuple{"ResNet-18 CIFAR 256ch 8x8", 256, 8},
                             std::tuple{"ResNet-18 CIFAR 512ch 4x4", 512, 4},
                             std::tuple{"ImageNet-size 64ch 56x56", 64, 56},
                             std::tuple{"ImageNet-size 512ch 7x7", 512, 7}}) {
    Conv2dAttrs a = conv_attrs({8, c, hw, hw}, {c, c, 3, 3});
    a.pad_begin = a.pad_end = {1, 1};
    a.output_shape = {8, c, hw, hw};
    Tensor w = Tensor::randn(a.weight_shape) * 0.05;
    Tensor xb = dispatch::call<OpId::conv2d>({Tensor::randn(a.input_shape), w, Tensor()}, a)[0];
    bigs.push_back({name, a, xb, xb * 0.01});
  }
  for (const Big& b : bigs) {
    rows.push_back({b.name + " bwd weights", flops(b.a), wgrad(b.dy, b.x, b.a, "auto")});
    rows.push_back({"  same, oneDNN's", flops(b.a), wgrad(b.dy, b.x, b.a, "off")});
  }
  if (!as_json)
    std::cout << std::setw(36) << "op" << std::setw(10) << "min ms" << std::setw(10) << "med ms"
              << std::setw(10) << "GFLOP/s" << std::setw(8) << "% peak\n";
  for (const Row& r : rows) {
    r.run();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const double t0 = seconds();
      r.run();
      t.push_back(seconds() - t0);
    }
    std::sort(t.begin(), t.end());
    const double gf = r.flop / t[0] / 1e9;
    out["rows"].push_back({{"op", r.name},
                           {"min_ms", t[0] * 1e3},
                           {"median_ms", t[t.size() / 2] * 1e3},
                           {"gflops", gf},
                           {"pct_of_peak", 100.0 * gf / peak}});
    if (as_json) continue;
    std::cout << std::setw(36) << r.name << std::setw(10) << std::setprecision(3) << t[0] * 1e3
              << std::setw(10) << t[t.size() / 2] * 1e3 << std::setw(10) << std::setprecision(1)
              << gf << std::setw(8) << 100.0 * gf / peak << "\n";
  }
  if (as_json) std::cout << out.dump(2) << std::endl;
}
