// What the profiler costs a training step: SeedCNN (1x28x28, batch 64, momentum SGD) trained
// through Model.train with (a) no profiler: nothing registered, (b) the profiler recording ops
// with their shapes and the memory counter, (c) ops only. Blocks of steps of the three kinds
// alternate, so that load from other processes falls on all of them alike; medians per step.
//   profiler_overhead [steps per block] [blocks]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "zenith/zenith.h"

namespace {

using namespace zenith;
using Clock = std::chrono::steady_clock;

// Per-step wall times of one Model.train epoch.
class StepTimes : public callbacks::Callback {
 public:
  explicit StepTimes(std::vector<double>& out) : out_(out) {}
  void on_train_step_begin(callbacks::RunContext&) override { start_ = Clock::now(); }
  void on_train_step_end(callbacks::RunContext&) override {
    out_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start_).count());
  }

 private:
  std::vector<double>& out_;
  Clock::time_point start_;
};

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
  std::vector<double> times[3];
  int64_t ops_per_step = 0;
  model.train(1, data);  // warm-up: oneDNN primitives, the allocator cache
  for (int b = 0; b < blocks; ++b)
    for (int k = 0; k < 3; ++k) {
      std::optional<profiler::Profiler> prof;
      profiler::Options options;
      options.record_shapes = options.record_memory = k == 1;
      if (k > 0) prof.emplace(options);
      model.train(model.epochs_done() + 1, data, {std::make_shared<StepTimes>(times[k])}, false,
                  model.epochs_done());
      if (prof) {
        prof->stop();
        int64_t ops = 0;
        for (const auto& t : prof->recording().threads) ops += int64_t(t.ops.size());
        ops_per_step = ops / steps;
      }
    }
  const double base = median(times[0]);
  std::printf(
      "SeedCNN 1x28x28 batch 64, %lld steps x %d blocks per kind, %d threads, %lld ops per "
      "step\n",
      (long long)steps, blocks, context::get_num_threads(), (long long)ops_per_step);
  for (int k = 0; k < 3; ++k) {
    const double m = median(times[k]);
    std::printf("  %-26s %8.3f ms/step  %+6.2f%%  (%+.2f us per op)\n", kinds[k], m,
                (m / base - 1) * 100, ops_per_step ? (m - base) * 1e3 / double(ops_per_step) : 0.0);
  }
  return 0;
}
