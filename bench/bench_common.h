// What the side-by-side benchmarks share: the machine's sgemm peak and memory bandwidth, this
// process's peak resident memory, the CPU's vector ISA, children whose last JSON line is their
// result, medians.
#pragma once

#include <dnnl.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bench_machine.h"

namespace zenith::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Sum of n floats in 32 independent lanes (four AVX2 vectors), so loads, not the latency of one
// chain of adds, bound it.
inline float sum_lanes(const float* p, size_t n) {
  float acc[32] = {};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 32; ++j) acc[j] += p[i + j];
  float s = 0;
  for (float a : acc) s += a;
  for (; i < n; ++i) s += p[i];
  return s;
}

// Read bandwidth in GB/s, STREAM-like: `threads` threads each sum their part of a buffer far
// larger than the caches (512 MiB), best of several runs. The buffer is in transparent huge
// pages, as a loaded model's weights are (src/models/llama_pages.h): on 4 KiB pages the TLB
// misses of the stream would lower the limit the decode benches compare against.
inline double read_bandwidth_gbs(int threads, size_t bytes = size_t(512) << 20) {
  constexpr size_t kHugePage = size_t(2) << 20;
  bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  const size_t n = bytes / sizeof(float);
  std::unique_ptr<float, decltype(&std::free)> buffer(
      static_cast<float*>(std::aligned_alloc(kHugePage, bytes)), &std::free);
  if (!buffer) throw std::bad_alloc();
  ::madvise(buffer.get(), bytes, MADV_HUGEPAGE);
  std::span<float> data(buffer.get(), n);
  std::fill(data.begin(), data.end(), 1.0f);
  double best = 1e30, sink = 0;
  for (int rep = 0; rep < 6; ++rep) {
    auto t0 = Clock::now();
    double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
      total += sum_lanes(data.data() + n * t / nt, n * (t + 1) / nt - n * t / nt);
    }
    double s = seconds_since(t0);
    sink += total;
    if (rep > 0) best = std::min(best, s);
  }
  if (sink < 0) std::cerr << sink;  // keeps the sums
  return double(bytes) / best / 1e9;
}

// This process's peak resident memory (VmHWM), KiB.
// A field of /proc/self/status in kB ("VmHWM:" the peak resident memory, "VmRSS:" the current).
inline int64_t proc_status_kb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size()));
  return 0;
}
inline int64_t vmhwm_kb() { return proc_status_kb("VmHWM:"); }

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
