// `zenith train`: trains a zoo model on a named dataset, from flags or a YAML file.
//   zenith train --model seedcnn --dataset fashion-mnist --epochs 10 --batch-size 64 --lr 0.01
//                --momentum 0.9 --out out/fashion-mnist
// Writes OUT/checkpoint_epoch_<N>.safetensors, OUT/eval_log.json, OUT/metrics.jsonl and
// OUT/summary/ (TensorBoard). --resume FILE continues a run where its checkpoint left off,
// with the checkpoint's settings unless given again.
// Data parallel: --nproc N runs N ranks of this command through the platform's local executor
// (rank_launcher.h); a rank trains on its shard of the data with DistributedDataParallel
// (--batch-size is per rank) and evaluates its shard of the test set (metrics reduced). Only
// rank 0 writes OUT. The settings are in train_settings.h. --profile N records N steps after
// --profile-skip warm-up steps (default 1, 3 in graph mode) into OUT/profile/ (profile_flags.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command.h"
#include "cli/output_dir.h"
#include "cli/profile_flags.h"
#include "cli/progress.h"
#include "cli/rank_launcher.h"
#include "cli/train_settings.h"
#include "core/atomic_file.h"
#include "zenith/zenith.h"

namespace zenith::cli {
namespace {

// What a train run writes into --out (--overwrite-output-dir deletes these).
const OutputDirRule kOutputDir{
    "train", {"checkpoint_*.safetensors", "eval_log.json", "metrics.jsonl", "summary", "profile"}};

// Settings, later winning: those saved in the --resume checkpoint, the --config YAML, the
// flags. Returns an exit code when the command line asks for help or does not parse.
std::optional<int> parse_command_line(int argc, char** argv, TrainSettings& s, std::string& resume,
                                      bool& overwrite, RankLauncher& launcher,
                                      ProfileFlags& profile) {
  const SettingsSchema schema = train_schema(s);
  refuse_renamed_eval_flag(argc, argv, "train", "--eval-epochs");
  std::string config = prescan_flag(argc, argv, "--config");
  resume = prescan_flag(argc, argv, "--resume");
  if (!resume.empty()) {
    io::Metadata saved = io::read_safetensors_metadata(resume);
    if (saved.count("config")) {
      nlohmann::json settings = nlohmann::json::parse(saved["config"]);
      if (settings.contains("eval-every") && !settings.contains("eval-epochs"))
        settings["eval-epochs"] = settings["eval-every"];  // its name before the rename
      schema.apply_json(settings);
    }
  }
  if (!config.empty()) schema.apply_yaml_file(config);

  CLI::App app{"Train a model from the zoo on a dataset", "zenith train"};
  app.add_option("--config", config, "YAML file of settings (flags override it)");
  app.add_option("--resume", resume, "continue from this checkpoint");
  app.add_flag("--overwrite-output-dir", overwrite,
               "replace the run in a non-empty --out (its run files are deleted first)");
  launcher.add_flags(app);
  profile.add(app);
  schema.add_flags(app);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  return std::nullopt;
}

struct Pipelines {
  dataset::Pipeline train, test;
};

// This rank's shard of the training split (shuffled, augmented) and of the test split.
Pipelines make_pipelines(const TrainSettings& s, const Ranks& ranks) {
  dataset::PipelineOptions train_opts{.batch_size = s.batch_size,
                                      .training = true,
                                      .random_crop = s.augment.find("crop") != std::string::npos,
                                      .random_flip = s.augment.find("flip") != std::string::npos,
                                      .num_workers = int(s.workers),
                                      .limit = s.limit_train,
                                      .image_size = s.image_size,
                                      .num_shards = ranks.world(),
                                      .shard_id = ranks.rank()};
  auto train = dataset::classification_pipeline(s.dataset, s.data_dir, "train", train_opts);
  dataset::PipelineOptions test_opts = train_opts;
  test_opts.training = false;
  test_opts.batch_size = std::max<int64_t>(s.batch_size, 256);
  test_opts.limit = s.limit_test;
  test_opts.image_size = train.info.image_size;
  auto test = dataset::classification_pipeline(s.dataset, s.data_dir, "test", test_opts);
  return {std::move(train), std::move(test)};
}

// Only rank 0 shows progress and writes OUT: checkpoints, summaries, metrics. Under `zenith
// server` every rank also logs to the file the server ingests for its dashboard.
std::vector<callbacks::CallbackPtr> make_callbacks(const TrainSettings& s, ProgressMode progress,
                                                   const Ranks& ranks,
                                                   const ProfileFlags& profile) {
  const int rank = ranks.rank();
  std::vector<callbacks::CallbackPtr> cbs;
  if (rank == 0)
    cbs = {std::make_shared<TrainProgress>(progress, s.log_every),
           callbacks::ModelCheckpoint(s.out, {.save_checkpoint_epochs = 1,
                                              .save_checkpoint_steps = s.save_steps,
                                              .keep_checkpoint_max = s.keep_checkpoints}),
           callbacks::SummaryCollector(s.out + "/summary", s.log_every),
           callbacks::MetricsLogger(s.out + "/metrics.jsonl", s.log_every)};
  if (const char* f = std::getenv("ZENITH_METRICS_FILE"); f && *f)
    cbs.push_back(callbacks::MetricsLogger(f, s.log_every));
  if (s.patience > 0) cbs.push_back(callbacks::EarlyStopping("eval_loss", s.patience - 1));
  if (auto p = profile.callback(s.out, rank, ranks.world(), s.mode == "graph")) cbs.push_back(p);
  return cbs;
}

// "1 epoch", "3 epochs".
std::string epochs_text(int64_t n) { return std::to_string(n) + (n == 1 ? " epoch" : " epochs"); }

nlohmann::json history_json(const std::vector<callbacks::EpochRecord>& history) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : history)
    out.push_back({{"epoch", r.epoch},
                   {"train_loss", r.loss},
                   {"seconds", r.seconds},
                   {"images_per_second", r.images_per_second},
                   {"data_wait_seconds", r.data_wait_seconds},
                   {"learning_rate", r.learning_rate},
                   {"eval", r.eval}});
  for (size_t i = 0; i < history.size(); ++i)
    if (history[i].comm_bytes > 0)  // data parallel: this rank's communication
      out[i].update({{"comm_bytes", history[i].comm_bytes},
                     {"comm_seconds", history[i].comm_seconds},
                     {"comm_wait_seconds", history[i].comm_wait_seconds}});
  return out;
}

// OUT/eval_log.json: the run's settings, status, per-epoch history and timing (rank 0 writes).
class EvalLog {
 public:
  EvalLog(const TrainSettings& s, const std::string& architecture, const std::string& resume,
          const Ranks& ranks)
      : path_(s.out + "/eval_log.json"), ranks_(ranks) {
    log_ = {{"model", s.model},
            {"dataset", s.dataset},
            {"architecture", architecture},
            {"config", to_json(s)},
            {"resumed_from", resume}};
  }
  void set(const std::string& key, nlohmann::json value) { log_[key] = std::move(value); }
  void write(const std::string& status, const Model& model) {
    const double total = std::chrono::duration<double>(Clock::now() - start_).count();
    double epoch_sum = 0;
    for (const auto& r : model.history()) epoch_sum += r.seconds;
    log_["status"] = status;
    log_["epochs_done"] = model.epochs_done();
    log_["history"] = history_json(model.history());
    if (ranks_.rank() != 0) return;
    log_["timing"] = {{"run_seconds", total},
                      {"mean_epoch_seconds",
                       model.history().empty() ? 0.0 : epoch_sum / double(model.history().size())},
                      {"threads", context::get_num_threads()},
                      {"ranks", ranks_.world()}};
    core::write_file_atomic(path_, log_.dump(2) + "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string path_;
  Ranks ranks_;
  nlohmann::json log_;
  Clock::time_point start_ = Clock::now();
};

// The line that opens a run: what trains on what, for how long, where it writes.
void print_plan(const TrainSettings& s, const std::string& arch, int64_t train_samples,
                int64_t test_samples, int64_t steps_per_epoch, int64_t initial_epoch,
                const Ranks& ranks) {
  const std::string ranks_note = ranks.world() > 1 ? ", rank " + std::to_string(ranks.rank()) +
                                                         " of " + std::to_string(ranks.world())
                                                   : "";
  const std::string accumulation_note =
      s.accumulate_steps > 1 ? " (" + std::to_string(s.accumulate_steps) + " batches of " +
                                   std::to_string(s.batch_size) + " per step)"
                             : "";
  std::printf(
      "training %s on %s: %lld train / %lld test samples, %lld steps per epoch%s, "
      "epochs %lld..%lld, %d threads%s; writing %s\n",
      arch.c_str(), s.dataset.c_str(), (long long)train_samples, (long long)test_samples,
      (long long)steps_per_epoch, accumulation_note.c_str(), (long long)initial_epoch + 1,
      (long long)s.epochs, context::get_num_threads(), ranks_note.c_str(),
      ranks.writes() ? s.out.c_str() : "nothing (rank 0 writes)");
  std::fflush(stdout);
}

int run_train(int argc, char** argv) {
  TrainSettings s;
  std::string resume;
  bool overwrite = false;
  RankLauncher launcher("train");
  ProfileFlags profile;
  if (auto exit_code = parse_command_line(argc, argv, s, resume, overwrite, launcher, profile))
    return *exit_code;
  check_and_complete(s);
  profile.check();
  ProgressMode progress_mode = parse_progress_mode(s.progress);

  // Everything that can fail on bad input happens before anything is written; names first,
  // before the data is read.
  auto known_models = models::names();
  if (std::find(known_models.begin(), known_models.end(), s.model) == known_models.end())
    models::create(s.model, 1, 28, 10);  // throws, listing the known models
  dataset::dataset_info(s.dataset);
  const int world_env = env_world_size("train");
  launcher.check(world_env);
  prepare_output_dir(kOutputDir, s.out, overwrite, !resume.empty());
  if (launcher.launches()) return launcher.launch(argc, argv);
  if (resume.empty()) resume = restart_checkpoint("train", s.out);
  if (s.threads > 0) context::set_num_threads(int(s.threads));
  context::Options options = context::get_context();
  options.mode = s.mode == "graph" ? context::GRAPH_MODE : context::PYNATIVE_MODE;
  context::set_context(options);
  const Ranks ranks = join_ranks(world_env, s.threads);
  const int rank = ranks.rank();
  manual_seed(uint64_t(s.seed));
  dataset::config::set_seed(uint64_t(s.seed));
  auto [train, test] = make_pipelines(s, ranks);
  const auto& info = train.info;
  nn::CellPtr net = models::create(s.model, info.channels, info.image_size, info.num_classes);
  if (ranks.world() > 1) net = nn::DistributedDataParallel(net);  // rank 0's initial values
  auto loss = nn::SoftmaxCrossEntropyWithLogits(/*sparse=*/true, "mean", s.label_smoothing);
  const int64_t steps_per_epoch =
      (train.dataset.get_dataset_size() + s.accumulate_steps - 1) / s.accumulate_steps;
  auto opt = make_optimizer(s, net->trainable_params(), steps_per_epoch);
  Model model(net, loss, opt, {{"Accuracy", metrics::Accuracy()}});
  model.set_accumulation_steps(s.accumulate_steps);
  char arch[160];
  std::snprintf(arch, sizeof(arch), "%s(in_channels=%lld, image_size=%lld, num_classes=%lld)",
                s.model.c_str(), (long long)info.channels, (long long)info.image_size,
                (long long)info.num_classes);
  model.set_architecture(arch);
  model.set_checkpoint_metadata({{"config", to_json(s).dump()}});
  int64_t initial_epoch = 0;
  if (!resume.empty()) {
    model.load_checkpoint(resume);
    initial_epoch = model.epochs_done();
    ZENITH_CHECK(initial_epoch < s.epochs, "[train] ", resume, " has already trained ",
                 initial_epoch, " epochs; pass --epochs N with N > ", initial_epoch,
                 " to train further");
  }

  if (rank == 0) std::filesystem::create_directories(s.out);
  print_plan(s, arch, train.samples, test.samples, steps_per_epoch, initial_epoch, ranks);
  auto cbs = make_callbacks(s, progress_mode, ranks, profile);

  EvalLog log(s, arch, resume, ranks);
  try {
    model.fit(s.epochs, train.dataset, test.dataset, s.eval_epochs, cbs, false, initial_epoch);
  } catch (const Error& e) {
    log.set("error", e.what());
    log.write("failed", model);
    throw;
  }
  auto final = model.history().empty() || model.history().back().eval.empty()
                   ? model.eval(test.dataset)
                   : model.history().back().eval;
  log.set("final", final);
  log.set("checkpoint",
          s.out + "/checkpoint_epoch_" + std::to_string(model.epochs_done()) + ".safetensors");
  log.write("finished", model);
  if (ranks.world() > 1) communication::release();
  if (rank != 0) {
    std::printf("rank %d finished after %s\n", rank, epochs_text(model.epochs_done()).c_str());
    return 0;
  }
  std::printf("final test accuracy: %.4f (loss %.4f) after %s; %s/eval_log.json\n",
              final.at("Accuracy"), final.at("Loss"), epochs_text(model.epochs_done()).c_str(),
              s.out.c_str());
  return 0;
}

}  // namespace

ZENITH_COMMAND("train", "Train a zoo model on a dataset (flags or --config YAML)", run_train);

}  // namespace zenith::cli
