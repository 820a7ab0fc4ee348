#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace zenith::cli {

namespace {
double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

ProgressMode parse_progress_mode(const std::string& s) {
  if (s == "auto") return ProgressMode::kAuto;
  if (s == "bar") return ProgressMode::kBar;
  if (s == "plain") return ProgressMode::kPlain;
  if (s == "none") return ProgressMode::kNone;
  ZENITH_FAIL("[cli] unknown progress mode '", s, "' (known: auto, bar, plain, none)");
}

TrainProgress::TrainProgress(ProgressMode mode, int64_t log_every, std::FILE* out)
    : mode_(mode), log_every_(std::max<int64_t>(1, log_every)), out_(out) {
  if (mode_ == ProgressMode::kAuto)
    mode_ = ::isatty(::fileno(out_)) ? ProgressMode::kBar : ProgressMode::kPlain;
}

void TrainProgress::on_train_begin(callbacks::RunContext& ctx) {
  run_start_ = Clock::now();
  steps_this_run_ = 0;
}

void TrainProgress::on_train_epoch_begin(callbacks::RunContext& ctx) {
  epoch_start_ = Clock::now();
  images_this_epoch_ = 0;
}

std::string TrainProgress::status(const callbacks::RunContext& ctx) const {
  auto now = Clock::now();
  double epoch_s = seconds_between(epoch_start_, now);
  double run_s = seconds_between(run_start_, now);
  double per_step = steps_this_run_ ? run_s / double(steps_this_run_) : 0;
  int64_t remaining =
      (ctx.epochs - ctx.epoch) * ctx.steps_per_epoch + (ctx.steps_per_epoch - ctx.step_in_epoch);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "loss %.4f  %.0f img/s  ETA %s", loss_ema_,
                epoch_s > 0 ? double(images_this_epoch_) / epoch_s : 0.0,
                format_clock(per_step * double(remaining)).c_str());
  return buf;
}

void TrainProgress::clear_bar() {
  if (!bar_visible_) return;
  std::fputs("\r\033[K", out_);
  bar_visible_ = false;
}

void TrainProgress::on_train_step_end(callbacks::RunContext& ctx) {
  ++steps_this_run_;
  images_this_epoch_ += ctx.batch_size;
  loss_ema_ = steps_this_run_ == 1 || ctx.step_in_epoch == 1 ? ctx.loss
                                                             : 0.95 * loss_ema_ + 0.05 * ctx.loss;
  if (mode_ == ProgressMode::kNone) return;
  if (mode_ == ProgressMode::kPlain) {
    if (ctx.step_in_epoch % log_every_ == 0) {
      std::fprintf(out_, "epoch %lld/%lld step %lld/%lld  %s\n", (long long)ctx.epoch,
                   (long long)ctx.epochs, (long long)ctx.step_in_epoch,
                   (long long)ctx.steps_per_epoch, status(ctx).c_str());
      std::fflush(out_);
    }
    return;
  }
  auto now = Clock::now();
  if (ctx.step_in_epoch != ctx.steps_per_epoch && seconds_between(last_draw_, now) < 0.1) return;
  last_draw_ = now;
  const int width = 30;
  int filled = int(double(width) * double(ctx.step_in_epoch) /
                   double(std::max<int64_t>(1, ctx.steps_per_epoch)));
  std::string bar(size_t(filled), '=');
  if (filled < width) bar += '>' + std::string(size_t(width - filled - 1), ' ');
  std::fprintf(out_, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld  %s", (long long)ctx.epoch,
               (long long)ctx.epochs, bar.c_str(), (long long)ctx.step_in_epoch,
               (long long)ctx.steps_per_epoch, status(ctx).c_str());
  std::fflush(out_);
  bar_visible_ = true;
}

void TrainProgress::on_train_epoch_end(callbacks::RunContext& ctx) {
  if (mode_ == ProgressMode::kNone) return;
  clear_bar();
  const auto& r = ctx.epoch_record;
  std::string eval;
  for (const auto& [name, value] : r.eval) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), ", test %s %.4f", name.c_str(), value);
    eval += buf;
  }
  std::fprintf(out_, "epoch %lld/%lld: train loss %.4f%s, %.1f s, %.0f img/s, lr %.4g\n",
               (long long)ctx.epoch, (long long)ctx.epochs, r.loss, eval.c_str(), r.seconds,
               r.images_per_second, r.learning_rate);
  std::fflush(out_);
}

void TrainProgress::on_train_end(callbacks::RunContext& ctx) {
  clear_bar();
  if (ctx.stop_requested && mode_ != ProgressMode::kNone)
    std::fprintf(out_, "stopped: %s\n", ctx.stop_reason.c_str());
  std::fflush(out_);
}

StepProgress::StepProgress(ProgressMode mode, std::FILE* out) : mode_(mode), out_(out) {
  if (mode_ == ProgressMode::kAuto)
    mode_ = ::isatty(::fileno(out_)) ? ProgressMode::kBar : ProgressMode::kPlain;
}

void StepProgress::on_train_begin(callbacks::RunContext& ctx) {
  run_start_ = Clock::now();
  steps_this_run_ = tokens_this_run_ = 0;
}

void StepProgress::clear_bar() {
  if (!bar_visible_) return;
  std::fputs("\r\033[K", out_);
  bar_visible_ = false;
}

void StepProgress::print(const std::string& line) {
  clear_bar();
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void StepProgress::on_train_step_end(callbacks::RunContext& ctx) {
  ++steps_this_run_;
  tokens_this_run_ += ctx.batch_size;
  loss_ema_ = steps_this_run_ == 1 ? ctx.loss : 0.95 * loss_ema_ + 0.05 * ctx.loss;
  if (mode_ != ProgressMode::kBar) return;
  const auto now = Clock::now();
  const int64_t total = std::max<int64_t>(1, ctx.total_steps);
  if (ctx.step != total && seconds_between(last_draw_, now) < 0.1) return;
  last_draw_ = now;
  const double run_s = seconds_between(run_start_, now);
  const double per_step = run_s / double(steps_this_run_);
  const int width = 30;
  const int filled = int(double(width) * double(std::min(ctx.step, total)) / double(total));
  std::string bar(size_t(filled), '=');
  if (filled < width) bar += '>' + std::string(size_t(width - filled - 1), ' ');
  std::fprintf(out_, "\r\033[Kstep [%s] %lld/%lld  loss %.4f  %.0f tok/s  ETA %s", bar.c_str(),
               (long long)ctx.step, (long long)total, loss_ema_,
               run_s > 0 ? double(tokens_this_run_) / run_s : 0.0,
               format_clock(per_step * double(total - ctx.step)).c_str());
  std::fflush(out_);
  bar_visible_ = true;
}

void StepProgress::on_train_end(callbacks::RunContext& ctx) {
  clear_bar();
  std::fflush(out_);
}

}  // namespace zenith::cli
