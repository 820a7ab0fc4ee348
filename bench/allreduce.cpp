// all_reduce bandwidth over loopback, as nccl-tests report it:
//   algbw = bytes / time,  busbw = algbw * 2(n-1)/n  (what each rank's link carries)
// next to single-thread memcpy bandwidth of the same size, measured in the same run.
// Forks n ranks on 127.0.0.1 with a file store; float32 SUM; time = slowest rank's mean.
//
//   allreduce [--ranks 2,4] [--min-bytes 4096] [--max-bytes 268435456] [--check 0|1]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "zenith/communication.h"

namespace comm = zenith::communication;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::vector<int> ranks{2, 4};
  size_t min_bytes = size_t(4) << 10;
  size_t max_bytes = size_t(256) << 20;
  int check = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--ranks") {
      a.ranks.clear();
      for (size_t p = 0; p < v.size();) {
        size_t q = v.find(',', p);
        a.ranks.push_back(std::stoi(v.substr(p, q - p)));
        p = q == std::string::npos ? v.size() : q + 1;
      }
    } else if (k == "--min-bytes") {
      a.min_bytes = std::stoull(v);
    } else if (k == "--max-bytes") {
      a.max_bytes = std::stoull(v);
    } else if (k == "--check") {
      a.check = std::stoi(v);
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

std::vector<size_t> sizes(const Args& a) {
  std::vector<size_t> s;
  for (size_t b = a.min_bytes; b <= a.max_bytes; b *= 4) s.push_back(b);
  return s;
}

// About 256 MiB of data per size, between 3 and 200 iterations.
int iterations(size_t bytes) {
  return int(std::clamp<size_t>((size_t(256) << 20) / bytes, 3, 200));
}

double memcpy_gbps(size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const int iters = iterations(bytes) * 4;
  std::memcpy(dst.data(), src.data(), bytes);  // fault the pages in
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    src[size_t(i) % bytes] = char(i);  // keep the copies from being folded together
    std::memcpy(dst.data(), src.data(), bytes);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return double(bytes) * iters / s / 1e9 + 0 * double(dst[bytes / 2]);
}

// One rank: times every size; rank 0 writes one line per size into `out` (a pipe).
void run_rank(int rank, int n, const Args& a, const std::string& store, int out) {
  comm::Options o;
  o.rank = rank;
  o.size = n;
  o.store = store;
  o.address = "127.0.0.1";
  o.prefix = "bench" + std::to_string(n);
  o.check_inputs = a.check;
  comm::init(o);
  for (size_t bytes : sizes(a)) {
    const int64_t count = int64_t(bytes / 4);
    auto t = zenith::Tensor::full({count}, 1.0, zenith::DType::f32);
    const int iters = iterations(bytes);
    comm::all_reduce(t);  // warm up: connections, scratch buffers, page faults
    comm::barrier();
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) comm::all_reduce(t);
    const double mean = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    auto slowest = zenith::Tensor::full({1}, mean, zenith::DType::f64);
    comm::all_reduce(slowest, comm::ReduceOp::MAX);
    if (rank == 0) {
      const double s = slowest.item();
      const double algbw = double(bytes) / s / 1e9;
      const double busbw = algbw * 2.0 * (n - 1) / n;
      char line[256];
      int len = std::snprintf(line, sizeof line, "%d %zu %d %.3f %.3f %.3f\n", n, bytes, iters,
                              s * 1e6, algbw, busbw);
      [[maybe_unused]] auto w = write(out, line, size_t(len));
    }
  }
  comm::release();
}

// Other processes share the cores on a loopback run; their load goes into the header.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

std::string human(size_t bytes) {
  char buf[32];
  if (bytes >= (size_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes >> 20);
  else
    std::snprintf(buf, sizeof buf, "%zu KiB", bytes >> 10);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::vector<double> memcpy_bw;
  for (size_t b : sizes(a)) memcpy_bw.push_back(memcpy_gbps(b));

  std::printf(
      "# zenith all_reduce, float32 SUM, Gloo TCP transport over 127.0.0.1, ranks forked "
      "on one host (%ld cores, load average %s); input check %s\n",
      sysconf(_SC_NPROCESSORS_ONLN), load_average().c_str(), a.check ? "on" : "off");
  std::printf(
      "# algbw = bytes/time, busbw = algbw*2(n-1)/n (nccl-tests); memcpy = one thread, "
      "same size, same run; GB/s = 1e9 B/s\n");
  std::printf("%5s %9s %6s %12s %12s %12s %12s\n", "ranks", "size", "iters", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "memcpy(GB/s)");
  for (int n : a.ranks) {
    const auto dir =
        std::filesystem::temp_directory_path() /
        ("zenith_bench_allreduce_" + std::to_string(getpid()) + "_" + std::to_string(n));
    int fds[2];
    if (pipe(fds) != 0) return 1;
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        try {
          run_rank(r, n, a, "file://" + dir.string(), fds[1]);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: %s\n", r, e.what());
          _exit(1);
        }
        _exit(0);
      }
      pids.push_back(pid);
    }
    close(fds[1]);
    std::string text;
    char buf[4096];
    for (ssize_t got; (got = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(got));
    close(fds[0]);
    bool failed = false;
    for (pid_t p : pids) {
      int status = 0;
      waitpid(p, &status, 0);
      failed = failed || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    std::filesystem::remove_all(dir);
    size_t i = 0;
    for (size_t p = 0; p < text.size(); ++i) {
      const size_t q = text.find('\n', p);
      int ranks = 0, iters = 0;
      size_t bytes = 0;
      double us = 0, algbw = 0, busbw = 0;
      std::sscanf(text.c_str() + p, "%d %zu %d %lf %lf %lf", &ranks, &bytes, &iters, &us, &algbw,
                  &busbw);
      std::printf("%5d %9s %6d %12.1f %12.3f %12.3f %12.3f\n", ranks, human(bytes).c_str(), iters,
                  us, algbw, busbw, i < memcpy_bw.size() ? memcpy_bw[i] : 0.0);
      p = q + 1;
    }
    std::fflush(stdout);
    if (failed) {
      std::fprintf(stderr, "a rank failed with %d ranks\n", n);
      return 1;
    }
  }
  return 0;
}
