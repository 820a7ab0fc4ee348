// LossMonitor and TimeMonitor: MindSpore's console callbacks.
#include <cstdio>

#include "zenith/train.h"

namespace zenith::callbacks {

namespace {

class LossMonitorImpl final : public Callback {
 public:
  explicit LossMonitorImpl(int64_t every) : every_(every) {
    ZENITH_CHECK(every > 0, "[LossMonitor] per_print_times must be positive, got ", every);
  }
  void on_train_step_end(RunContext& ctx) override {
    if (ctx.step_in_epoch % every_ == 0)
      std::printf("epoch: %lld step: %lld, loss is %.6g\n", (long long)ctx.epoch,
                  (long long)ctx.step_in_epoch, ctx.loss);
  }
  void on_train_epoch_end(RunContext& ctx) override {
    std::printf("epoch: %lld, mean loss %.6g\n", (long long)ctx.epoch, ctx.epoch_record.loss);
    std::fflush(stdout);
  }

 private:
  int64_t every_;
};

class TimeMonitorImpl final : public Callback {
 public:
  void on_train_epoch_end(RunContext& ctx) override {
    const auto& r = ctx.epoch_record;
    double steps = double(std::max<int64_t>(ctx.steps_per_epoch, 1));
    std::printf("epoch time: %.1f ms, per step time: %.3f ms, %.0f images/s (data wait %.1f ms)\n",
                r.seconds * 1e3, r.seconds * 1e3 / steps, r.images_per_second,
                r.data_wait_seconds * 1e3);
    std::fflush(stdout);
  }
};

}  // namespace

CallbackPtr LossMonitor(int64_t per_print_times) {
  return std::make_shared<LossMonitorImpl>(per_print_times);
}
CallbackPtr TimeMonitor() { return std::make_shared<TimeMonitorImpl>(); }

}  // namespace zenith::callbacks
