#include "zenith/context.h"

#include <omp.h>

#include <cstdlib>
#include <thread>

#include "zenith/error.h"

namespace zenith::context {
namespace {

int default_threads() {
  if (const char* env = std::getenv("ZENITH_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

Options& options() {
  static Options o;
  return o;
}

// Sizes the OpenMP pool before the first kernel runs.
struct ThreadInit {
  ThreadInit() { omp_set_num_threads(default_threads()); }
} thread_init;

}  // namespace

void set_context(const Options& o) {
  ZENITH_CHECK(o.device_target == "CPU" || o.device_target == "GPU" || o.device_target == "CUDA",
               "[context] unknown device_target '", o.device_target, "' (known: CPU, GPU)");
  options() = o;
  if (o.num_threads > 0) set_num_threads(o.num_threads);
}

const Options& get_context() { return options(); }

void set_num_threads(int n) {
  ZENITH_CHECK(n > 0, "[context] num_threads must be positive, got ", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace zenith::context
