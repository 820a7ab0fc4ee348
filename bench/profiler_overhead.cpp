// What the profiler costs a training step: SeedCNN (1x28x28, batch 64, momentum SGD) trained
// through Model.train with (a) no profiler: nothing registered, (b) the profiler recording ops
// with their shapes and the memory counter, (c) ops only. Blocks of steps of the three kinds
// alternate, so that load from other processes falls on all of them alike; medians per step of
// wall time and of this process's CPU time (all its threads: what load from other processes
// changes least). Then the hooks' cost per op on tiny ops (1-element adds), where it is not
// hidden by kernel time.
//   profiler_overhead [steps per block] [blocks]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "zenith/zenith.h"

namespace {

using namespace zenith;
using Clock = std::chrono::steady_clock;

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// Per-step wall and CPU times of one Model.train epoch.
class StepTimes : public callbacks::Callback {
 public:
  StepTimes(std::vector<double>& wall, std::vector<double>& cpu) : wall_(wall), cpu_(cpu) {}
  void on_train_step_begin(callbacks::RunContext&) override {
    start_ = Clock::now();
    cpu_start_ = cpu_ms();
  }
  void on_train_step_end(callbacks::RunContext&) override {
    wall_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start_).count());
    cpu_.push_back(cpu_ms() - cpu_start_);
  }

 private:
  std::vector<double>&wall_, &cpu_;
  Clock::time_point start_;
  double cpu_start_ = 0;
};

// CPU microseconds per op of `n` 1-element adds.
double tiny_op_us(int64_t n) {
  Tensor a = Tensor::ones({1}), b = Tensor::ones({1});
  const double start = cpu_ms();
  for (int64_t i = 0; i < n; ++i) a = a + b;
  return (cpu_ms() - start) * 1e3 / double(n);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 20;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 5;
  manual_seed(0);
  auto data = dataset::TensorDataset(
                  {Tensor::randn({steps * 64, 1, 28, 28}), Tensor::randint(0, 10, {steps * 64})})
                  .batch(64);
  auto net = models::seed_cnn(1, 28, 10);
  Model model(net, nn::SoftmaxCrossEntropyWithLogits(true),
              nn::Momentum(net->trainable_params(), 0.01, 0.9));
  const char* kinds[] = {"off (nothing registered)", "on: ops, shapes, memory", "on: ops only"};
  std::vector<double> times[3], cpu[3];
  int64_t ops_per_step = 0;
  model.train(1, data);  // warm-up: oneDNN primitives, the allocator cache
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < 3; ++k) {
      std::optional<profiler::Profiler> prof;
      profiler::Options options;
      options.record_shapes = options.record_memory = k == 1;
      if (k > 0) prof.emplace(options);
      model.train(model.epochs_done() + 1, data, {std::make_shared<StepTimes>(times[k], cpu[k])},
                  false, model.epochs_done());
      if (prof) {
        prof->stop();
        int64_t ops = 0;
        for (const auto& t : prof->recording().threads) ops += int64_t(t.ops.size());
        ops_per_step = ops / steps;
      }
    }
  const double base = median(times[0]), cpu_base = median(cpu[0]);
  std::printf(
      "SeedCNN 1x28x28 batch 64, %lld steps x %d blocks per kind, %d threads, %lld ops per "
      "step (medians: wall, and CPU time of all threads)\n",
      (long long)steps, blocks, context::get_num_threads(), (long long)ops_per_step);
  for (int k = 0; k < 3; ++k) {
    const double m = median(times[k]), c = median(cpu[k]);
    std::printf("  %-26s %8.3f ms/step %+7.2f%%   cpu %8.3f ms/step %+7.2f%%  (%+.2f us per op)\n",
                kinds[k], m, (m / base - 1) * 100, c, (c / cpu_base - 1) * 100,
                ops_per_step ? (c - cpu_base) * 1e3 / double(ops_per_step) : 0.0);
  }

  // The hooks alone: tiny ops, blocks alternating as above, medians.
  const int64_t n = 20000;
  std::vector<double> tiny[3];
  tiny_op_us(n);
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < 3; ++k) {
      std::optional<profiler::Profiler> prof;
      profiler::Options options;
      options.record_shapes = options.record_memory = k == 1;
      if (k > 0) prof.emplace(options);
      tiny[k].push_back(tiny_op_us(n));
    }
  std::printf("1-element add, %lld ops x %d blocks per kind (CPU us per op)\n", (long long)n,
              blocks);
  for (int k = 0; k < 3; ++k)
    std::printf("  %-26s %8.3f us/op  %+.3f us\n", kinds[k], median(tiny[k]),
                median(tiny[k]) - median(tiny[0]));
  return 0;
}
