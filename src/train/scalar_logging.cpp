// Callbacks that log the run's scalars: SummaryCollector (TensorBoard event files) and
// MetricsLogger (JSON lines for dashboards). Both log the same names:
//   loss, learning_rate             every collect_freq steps
//   epoch_loss, epoch_time, images_per_second   every epoch
//   eval/<metric>                  after each validation
//   graph/...                      once, after the step that captured a graph (graph mode)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "zenith/train.h"

namespace zenith::callbacks {

namespace {

class ScalarLogger : public Callback {
 public:
  explicit ScalarLogger(int64_t collect_freq) : freq_(collect_freq) {
    ZENITH_CHECK(collect_freq > 0, "[callbacks] collect_freq must be positive, got ", collect_freq);
  }
  void on_train_step_end(RunContext& ctx) override {
    for (const auto& [name, value] : ctx.step_scalars) emit(name, value, ctx);
    if (ctx.step % freq_ != 0) return;
    emit("loss", ctx.loss, ctx);
    emit("learning_rate", ctx.learning_rate, ctx);
    if (ctx.comm_bytes > 0) emit_comm(ctx);
  }
  void on_train_begin(RunContext& ctx) override {
    last_bytes_ = ctx.comm_bytes;
    last_comm_seconds_ = ctx.comm_seconds;
    last_wait_seconds_ = ctx.comm_wait_seconds;
    last_time_ = std::chrono::steady_clock::now();
  }
  void on_train_epoch_end(RunContext& ctx) override {
    emit("epoch_loss", ctx.epoch_record.loss, ctx);
    emit("epoch_time", ctx.epoch_record.seconds, ctx);
    emit("images_per_second", ctx.epoch_record.images_per_second, ctx);
  }
  void on_eval_end(RunContext& ctx) override {
    for (const auto& [name, value] : ctx.eval_results) emit("eval/" + name, value, ctx);
  }

 protected:
  virtual void emit(const std::string& name, double value, const RunContext& ctx) = 0;

 private:
  // Communication over the interval since the previous logged step.
  void emit_comm(const RunContext& ctx) {
    auto now = std::chrono::steady_clock::now();
    double wall = std::chrono::duration<double>(now - last_time_).count();
    double bytes = double(ctx.comm_bytes - last_bytes_);
    emit("comm_bytes", bytes, ctx);
    emit("comm_time_s", ctx.comm_seconds - last_comm_seconds_, ctx);
    if (wall > 0) {
      emit("comm_bytes_per_second", bytes / wall, ctx);
      emit("comm_wait_fraction", (ctx.comm_wait_seconds - last_wait_seconds_) / wall, ctx);
    }
    last_bytes_ = ctx.comm_bytes;
    last_comm_seconds_ = ctx.comm_seconds;
    last_wait_seconds_ = ctx.comm_wait_seconds;
    last_time_ = now;
  }

  int64_t freq_;
  int64_t last_bytes_ = 0;
  double last_comm_seconds_ = 0, last_wait_seconds_ = 0;
  std::chrono::steady_clock::time_point last_time_ = std::chrono::steady_clock::now();
};

class SummaryCollectorImpl final : public ScalarLogger {
 public:
  SummaryCollectorImpl(std::string dir, int64_t freq) : ScalarLogger(freq), dir_(std::move(dir)) {}
  void on_train_begin(RunContext& ctx) override {
    ScalarLogger::on_train_begin(ctx);
    if (!writer_) writer_ = std::make_unique<io::SummaryWriter>(dir_);
  }

 protected:
  void emit(const std::string& name, double value, const RunContext& ctx) override {
    if (writer_) writer_->add_scalar(name, value, ctx.step);
  }

 private:
  std::string dir_;
  std::unique_ptr<io::SummaryWriter> writer_;
};

class MetricsLoggerImpl final : public ScalarLogger {
 public:
  MetricsLoggerImpl(std::string path, int64_t freq) : ScalarLogger(freq), path_(std::move(path)) {}
  ~MetricsLoggerImpl() override {
    if (file_) std::fclose(file_);
  }
  void on_train_begin(RunContext& ctx) override {
    ScalarLogger::on_train_begin(ctx);
    if (file_) return;
    auto parent = std::filesystem::path(path_).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    file_ = std::fopen(path_.c_str(), "a");  // a resumed run continues the same log
    ZENITH_CHECK(file_, "[MetricsLogger] ", path_, ": cannot open for appending");
  }

 protected:
  void emit(const std::string& name, double value, const RunContext& ctx) override {
    if (!file_) return;
    double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    nlohmann::json j = {
        {"step", ctx.step}, {"epoch", ctx.epoch}, {"name", name}, {"value", value}, {"time", now}};
    std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);  // a dashboard tails this file
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace

CallbackPtr SummaryCollector(const std::string& summary_dir, int64_t collect_freq) {
  return std::make_shared<SummaryCollectorImpl>(summary_dir, collect_freq);
}

CallbackPtr MetricsLogger(const std::string& path, int64_t collect_freq) {
  return std::make_shared<MetricsLoggerImpl>(path, collect_freq);
}

}  // namespace zenith::callbacks
