// The C++ side of bench/python_overhead.py: SeedCNN (1x28x28, batch B) trained by Model::train
// on an in-memory dataset of random images, in C++ alone. Prints the best time per step over
// the repeats as JSON, for the Python front end's overhead ratio: wall time and the process's
// CPU time (getrusage; on a shared host the CPU time is what survives other load).
//
//   python_overhead_ref [--steps 60] [--batch 64] [--repeats 3] [--threads 2]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "zenith/zenith.h"

using namespace zenith;

// User + system CPU seconds of this process, all threads.
static double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int main(int argc, char** argv) {
  int64_t steps = 60, batch = 64, repeats = 3, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--steps") steps = value;
    if (flag == "--batch") batch = value;
    if (flag == "--repeats") repeats = value;
    if (flag == "--threads") threads = value;
  }
  try {
    context::set_num_threads(int(threads));
    manual_seed(0);
    const int64_t n = steps * batch;
    auto data = dataset::TensorDataset({Tensor::randn({n, 1, 28, 28}), Tensor::randint(0, 10, {n})},
                                       {"image", "label"})
                    .batch(batch);
    auto net = models::seed_cnn(1, 28, 10);
    Model model(net, nn::SoftmaxCrossEntropyWithLogits(true),
                nn::Momentum(net->trainable_params(), 0.01, 0.9));
    model.train(1, data);  // warm-up: primitive caches, allocator
    double best = 1e30, best_cpu = 1e30;
    for (int64_t r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = cpu_seconds();
      model.train(1, data);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::min(best, s);
      best_cpu = std::min(best_cpu, cpu_seconds() - cpu_start);
    }
    std::printf(
        "{\"ms_per_step\": %.4f, \"cpu_ms_per_step\": %.4f, \"images_per_second\": %.1f, "
        "\"steps\": %lld}\n",
        best * 1e3 / double(steps), best_cpu * 1e3 / double(steps), double(n) / best,
        (long long)steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
