// What a benchmark reports about the machine and its workloads: the CPU's vector ISA (from
// /proc/cpuinfo and oneDNN's choice), the sgemm peak (dnnl_sgemm, M = N = K = n, best of several
// runs), and the analytic FLOPs of a zoo model's training step.
#pragma once

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/onednn_layout.h"

namespace zenith::bench {

// "avx512" when the CPU has AVX-512F, else "avx2"; with the bf16 extensions it has.
inline std::string cpu_isa() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      flags = " " + line + " ";
      break;
    }
  auto has = [&](const char* flag) {
    return flags.find(std::string(" ") + flag + " ") != std::string::npos;
  };
  std::string isa = has("avx512f") ? "avx512" : has("avx2") ? "avx2" : "sse";
  if (has("avx512_bf16")) isa += "+avx512_bf16";
  if (has("amx_bf16")) isa += "+amx_bf16";
  return isa;
}

// The threads a bench uses unless --threads says: ZENITH_NUM_THREADS, else every core.
inline int default_threads() {
  const char* env = std::getenv("ZENITH_NUM_THREADS");
  return env && std::atoi(env) > 0 ? std::atoi(env)
                                   : int(std::max(1u, std::thread::hardware_concurrency()));
}

// The ISA oneDNN's kernels use (ONEDNN_MAX_CPU_ISA can lower it, e.g. to AVX2).
inline std::string onednn_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

// What runs the float32 kernels: the CPU's ISA, oneDNN's effective one, and whether zenith's
// AVX2 fast paths (its kernels for oneDNN's weak AVX2 spots) are on; zenith's own kernels are
// built for x86-64-v3 (AVX2) on every host.
inline std::string isa_line() {
  return cpu_isa() + " (oneDNN uses " + onednn_isa() + "; zenith's AVX2 fast paths " +
         (cpu::use_avx2_fast_paths() ? "on" : "off") + ")";
}

// The machine fields every bench's --json starts with (scripts/perf_report.py prints them beside
// each table): the ISAs, the AVX2 fast paths, the sgemm peak the bench measured, its threads.
inline nlohmann::json machine_json(int threads, double sgemm_peak_gflops) {
  return {{"isa", cpu_isa()},
          {"onednn_isa", onednn_isa()},
          {"avx2_fast_paths", cpu::use_avx2_fast_paths()},
          {"sgemm_peak_gflops", sgemm_peak_gflops},
          {"threads", threads}};
}

// ---- analytic FLOPs: conv and matmul only (2 per multiply-add). Backward costs twice the
// forward (data and weight gradients), except the first layer, whose input needs no gradient.
struct Layer {
  double fwd;  // forward FLOPs per image
  bool first;
};

inline double conv_flops(int64_t cin, int64_t cout, int64_t k, int64_t out_hw) {
  return 2.0 * double(cin * cout * k * k * out_hw * out_hw);
}

inline std::vector<Layer> layers_of(const std::string& model, int64_t channels, int64_t image) {
  std::vector<Layer> layers;
  if (model == "seedcnn") {
    int64_t s1 = image - 2, s2 = s1 / 2 - 2, s3 = s2 / 2;
    layers.push_back({conv_flops(channels, 32, 3, s1), true});
    layers.push_back({conv_flops(32, 64, 3, s2), false});
    layers.push_back({2.0 * double(64 * s3 * s3 * 10), false});
    return layers;
  }
  // ResNet-18, CIFAR stem.
  int64_t hw = image, in = 64;
  layers.push_back({conv_flops(channels, 64, 3, hw), true});
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int i = 0; i < 4; ++i)
    for (int b = 0; b < 2; ++b) {
      int64_t stride = (i > 0 && b == 0) ? 2 : 1, out = widths[i];
      hw /= stride;
      layers.push_back({conv_flops(in, out, 3, hw), false});
      layers.push_back({conv_flops(out, out, 3, hw), false});
      if (stride != 1 || in != out) layers.push_back({conv_flops(in, out, 1, hw), false});
      in = out;
    }
  layers.push_back({2.0 * 512 * 10, false});
  return layers;
}

inline double train_flops_per_image(const std::string& model, int64_t channels, int64_t image) {
  double total = 0;
  for (auto& l : layers_of(model, channels, image)) total += l.fwd * (l.first ? 2.0 : 3.0);
  return total;
}

// CPU seconds of this process (all its threads).
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// cpu_time: time by the process's CPU seconds instead of the wall clock (with one thread, what
// the sgemm itself takes, even on cores other processes share).
inline double sgemm_peak_gflops(int threads, int64_t n = 2048, bool cpu_time = false) {
  omp_set_num_threads(threads);
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double s = cpu_time
                   ? process_cpu_seconds() - c0
                   : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, s);  // the first run warms up
  }
  return 2.0 * double(n) * double(n) * double(n) / best / 1e9;
}

// Memory bandwidth now, GB/s: STREAM's triad a = b + s c over 64 MB arrays (far beyond the
// caches), the best of 4 passes after one that warms up, counting 12 bytes an element as STREAM
// does. A shared host's speed moves with its neighbours, and the triad drops with the sgemm
// in its slow phases: benches print it beside their tables as one more sign of the phase.
inline double stream_triad_gbps(int threads) {
  omp_set_num_threads(threads);
  const int64_t n = int64_t(16) << 20;  // floats an array: 64 MB
  std::vector<float> a(size_t(n), 0.0f), b(size_t(n), 1.0f), c(size_t(n), 2.0f);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) a[size_t(i)] = b[size_t(i)] + 1.5f * c[size_t(i)];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, s);
  }
  volatile float read = a[size_t(n / 2)];  // the stores are read: the loop stays
  (void)read;
  return 12.0 * double(n) / best / 1e9;
}

}  // namespace zenith::bench
