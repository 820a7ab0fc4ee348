// `zenith train`'s settings: their defaults (the README's recipe), their schema (flags, --config
// YAML, the JSON saved in checkpoints), their checks, and the optimizer and learning-rate
// schedule they describe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/settings_schema.h"
#include "zenith/zenith.h"

namespace zenith::cli {

struct TrainSettings {
  std::string model = "seedcnn";
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // "": the dataset's default directory
  int64_t epochs = 10;
  int64_t batch_size = 64;
  int64_t accumulate_steps = 1;
  double lr = 0.01;
  std::string optimizer = "momentum";
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double label_smoothing = 0.0;
  std::string schedule = "wsd";  // the README recipe's; "constant" for a fixed rate
  int64_t warmup_epochs = 0;
  int64_t step_epochs = 0;
  int64_t decay_epochs = 0;
  double gamma = 0.1;
  int64_t seed = 0;
  int64_t threads = 0;
  int64_t workers = 1;
  std::string augment = "none";
  int64_t eval_epochs = 1;
  int64_t patience = 0;
  int64_t keep_checkpoints = 0;
  int64_t save_steps = 0;
  int64_t log_every = 100;
  int64_t limit_train = 0;
  int64_t limit_test = 0;
  int64_t image_size = 0;
  std::string out;  // "": out/<dataset>-<model>
  std::string progress = "auto";
  std::string mode = "pynative";  // or "graph": capture the training step once, replay it
};

// Every setting of `s` with its name and help; the schema points into `s`.
SettingsSchema train_schema(TrainSettings& s);
nlohmann::json to_json(TrainSettings s);

// Fails on values no run accepts (unknown augment, non-positive counts) and fills in the default
// output directory.
void check_and_complete(TrainSettings& s);

// The optimizer with the settings' learning-rate schedule, counted in optimizer steps.
nn::OptimizerPtr make_optimizer(const TrainSettings& s, const std::vector<Tensor>& params,
                                int64_t steps_per_epoch);

}  // namespace zenith::cli
