// Training progress on the console: a bar redrawn in place (loss, rate, ETA) when stdout is a
// terminal, plain log lines otherwise. TrainProgress counts epochs (zenith train), StepProgress
// the steps of a run (zenith finetune).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "core/format_clock.h"
#include "zenith/train.h"

namespace zenith::cli {

enum class ProgressMode { kAuto, kBar, kPlain, kNone };
ProgressMode parse_progress_mode(const std::string& s);  // "auto", "bar", "plain", "none"

class TrainProgress : public callbacks::Callback {
 public:
  // Plain mode prints a line every `log_every` steps and one per epoch.
  TrainProgress(ProgressMode mode, int64_t log_every, std::FILE* out = stdout);
  void on_train_begin(callbacks::RunContext& ctx) override;
  void on_train_epoch_begin(callbacks::RunContext& ctx) override;
  void on_train_step_end(callbacks::RunContext& ctx) override;
  void on_train_epoch_end(callbacks::RunContext& ctx) override;
  void on_train_end(callbacks::RunContext& ctx) override;

 private:
  using Clock = std::chrono::steady_clock;
  std::string status(const callbacks::RunContext& ctx) const;  // loss, img/s, ETA
  void clear_bar();

  ProgressMode mode_;
  int64_t log_every_;
  std::FILE* out_;
  Clock::time_point run_start_, epoch_start_, last_draw_;
  int64_t steps_this_run_ = 0;
  int64_t images_this_epoch_ = 0;
  double loss_ema_ = 0;  // smoothed for display
  bool bar_visible_ = false;
};

// zenith finetune's bar over the run's steps (RunContext::total_steps): loss, tokens/s, ETA.
// Lines the command logs go through print(), above the bar. Without a terminal (plain) it draws
// nothing: the command's own step lines (loss, tokens/s) are the log.
class StepProgress : public callbacks::Callback {
 public:
  explicit StepProgress(ProgressMode mode, std::FILE* out = stdout);
  void on_train_begin(callbacks::RunContext& ctx) override;
  void on_train_step_end(callbacks::RunContext& ctx) override;
  void on_train_end(callbacks::RunContext& ctx) override;
  // A log line, printed above the bar (which the next step redraws).
  void print(const std::string& line);
  bool draws_bar() const { return mode_ == ProgressMode::kBar; }

 private:
  using Clock = std::chrono::steady_clock;
  void clear_bar();

  ProgressMode mode_;
  std::FILE* out_;
  Clock::time_point run_start_, last_draw_;
  int64_t steps_this_run_ = 0, tokens_this_run_ = 0;
  double loss_ema_ = 0;
  bool bar_visible_ = false;
};

}  // namespace zenith::cli
