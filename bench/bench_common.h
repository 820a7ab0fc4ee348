// What the side-by-side benchmarks share: the machine's sgemm peak and memory bandwidth, this
// process's peak resident memory, the CPU's vector ISA, children whose last JSON line is their
// result, medians.
#pragma once

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace zenith::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The machine's sgemm peak: C = A B, M = N = K = n with oneDNN's sgemm, best of several runs.
inline double sgemm_peak_gflops(int threads, int64_t n = 2048) {
  omp_set_num_threads(threads);
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    auto t0 = Clock::now();
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double s = seconds_since(t0);
    if (rep > 0) best = std::min(best, s);  // the first run warms up
  }
  return 2.0 * double(n) * double(n) * double(n) / best / 1e9;
}

// Read bandwidth in GB/s: the sum of a buffer far larger than the caches, best of several runs.
inline double read_bandwidth_gbs(int threads, size_t bytes = size_t(512) << 20) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> data(n, 1.0f);
  double best = 1e30, sink = 0;
  for (int rep = 0; rep < 6; ++rep) {
    auto t0 = Clock::now();
    double total = 0;
#pragma omp parallel for simd num_threads(threads) reduction(+ : total) schedule(static)
    for (size_t i = 0; i < n; ++i) total += double(data[i]);
    double s = seconds_since(t0);
    sink += total;
    if (rep > 0) best = std::min(best, s);
  }
  if (sink < 0) std::cerr << sink;  // keeps the sums
  return double(bytes) / best / 1e9;
}

// This process's peak resident memory (VmHWM), KiB.
inline int64_t vmhwm_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  return 0;
}

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

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Runs `cmd`, returns the last line of its stdout that starts with '{', parsed (null on
// failure, with the output on stderr).
inline nlohmann::json run_child(const std::string& cmd) {
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return nullptr;
  std::string text, last;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) text += buf;
  int rc = ::pclose(pipe);
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);)
    if (!line.empty() && line[0] == '{') last = line;
  if (rc != 0 || last.empty()) {
    std::cerr << "bench: child failed (rc " << rc << "): " << cmd << "\n" << text;
    return nullptr;
  }
  return nlohmann::json::parse(last);
}

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace zenith::bench
