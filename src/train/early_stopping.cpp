// EarlyStopping: stop when the monitored quantity stops improving.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "zenith/train.h"

namespace zenith::callbacks {

namespace {

class EarlyStoppingImpl final : public Callback {
 public:
  EarlyStoppingImpl(std::string monitor, int64_t patience, double min_delta, std::string mode)
      : monitor_(std::move(monitor)), patience_(patience), min_delta_(std::abs(min_delta)) {
    ZENITH_CHECK(patience >= 0, "[EarlyStopping] patience must be >= 0, got ", patience);
    ZENITH_CHECK(mode == "auto" || mode == "min" || mode == "max",
                 "[EarlyStopping] mode must be auto, min or max, got '", mode, "'");
    std::string lower = monitor_;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    maximize_ = mode == "max" || (mode == "auto" && lower.find("acc") != std::string::npos);
  }
  void on_train_epoch_end(RunContext& ctx) override {
    double value;
    if (monitor_ == "loss") {
      value = ctx.epoch_record.loss;
    } else {
      if (ctx.epoch_record.eval.empty()) return;  // not validated this epoch
      std::string key = monitor_ == "eval_loss" ? "Loss" : monitor_;
      auto it = ctx.epoch_record.eval.find(key);
      if (it == ctx.epoch_record.eval.end()) {
        std::string known = "loss, eval_loss";
        for (const auto& [name, _] : ctx.epoch_record.eval) known += ", " + name;
        ZENITH_FAIL("[EarlyStopping] unknown monitor '", monitor_, "' (known: ", known, ")");
      }
      value = it->second;
    }
    bool better = !seen_ || (maximize_ ? value > best_ + min_delta_ : value < best_ - min_delta_);
    if (better) {
      best_ = value;
      seen_ = true;
      wait_ = 0;
      return;
    }
    if (++wait_ > patience_) {
      char reason[200];
      std::snprintf(reason, sizeof(reason),
                    "EarlyStopping: %s has not improved on %.6g for %lld epochs", monitor_.c_str(),
                    best_, (long long)wait_);
      ctx.request_stop(reason);
    }
  }

 private:
  std::string monitor_;
  int64_t patience_;
  double min_delta_;
  bool maximize_ = false;
  bool seen_ = false;
  double best_ = 0;
  int64_t wait_ = 0;
};

}  // namespace

CallbackPtr EarlyStopping(const std::string& monitor, int64_t patience, double min_delta,
                          const std::string& mode) {
  return std::make_shared<EarlyStoppingImpl>(monitor, patience, min_delta, mode);
}

}  // namespace zenith::callbacks
