// `zenith train`: trains a zoo model on a named dataset, from flags or a YAML file.
//   zenith train --model seedcnn --dataset fashion-mnist --epochs 10 --batch-size 64 --lr 0.01
//                --momentum 0.9 --out out/fashion-mnist
// Writes OUT/checkpoint_epoch_<N>.safetensors, OUT/eval_log.json, OUT/metrics.jsonl and
// OUT/summary/ (TensorBoard). --resume FILE continues a run where its checkpoint left off,
// with the checkpoint's settings unless given again.
// Data parallel: --nproc N runs N ranks of this command through the platform's local executor;
// a rank (WORLD_SIZE / RANK_SIZE > 1 in its environment, as the platform sets for a job with
// `npu: N`) joins the others, trains on its shard of the data with DistributedDataParallel
// (--batch-size is per rank) and evaluates its shard of the test set (metrics reduced). Only
// rank 0 writes OUT. A restarted job (ZENITH_RESTART_COUNT > 0) resumes from OUT's newest
// checkpoint.
#include <sched.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "cli/client.h"
#include "cli/command.h"
#include "cli/foreground.h"
#include "cli/progress.h"
#include "core/atomic_file.h"
#include "platform/jobs/job_spec.h"
#include "zenith/zenith.h"

namespace zenith::cli {
namespace {

struct Settings {
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
  int64_t eval_every = 1;
  int64_t patience = 0;
  int64_t keep_checkpoints = 0;
  int64_t save_steps = 0;
  int64_t log_every = 100;
  int64_t limit_train = 0;
  int64_t limit_test = 0;
  int64_t image_size = 0;
  std::string out;  // "": out/<dataset>-<model>
  std::string progress = "auto";
};

// Every setting with its name (flag --name, YAML key name or name_with_underscores) and help.
template <typename S, typename F>
void for_each_setting(S& s, F&& f) {
  f("model", s.model, "zoo model: seedcnn, lenet, resnet18");
  f("dataset", s.dataset, "fashion-mnist, mnist, cifar10 or image-folder");
  f("data-dir", s.data_dir, "dataset directory (default: the dataset's standard location)");
  f("epochs", s.epochs, "total epochs to train");
  f("batch-size", s.batch_size, "training batch size");
  f("accumulate-steps", s.accumulate_steps,
    "batches whose gradients make one optimizer step "
    "(gradient accumulation; the effective batch is batch-size x this)");
  f("lr", s.lr, "learning rate (peak rate with a schedule)");
  f("optimizer", s.optimizer, "momentum, sgd, adam or adamw");
  f("momentum", s.momentum, "momentum of the momentum optimizer");
  f("nesterov", s.nesterov, "Nesterov momentum");
  f("weight-decay", s.weight_decay, "L2 weight decay");
  f("label-smoothing", s.label_smoothing, "cross-entropy label smoothing in [0, 1)");
  f("schedule", s.schedule,
    "learning-rate schedule: constant, cosine, step or wsd "
    "(warmup, constant, linear decay to 0)");
  f("warmup-epochs", s.warmup_epochs, "cosine and wsd: linear warmup epochs");
  f("decay-epochs", s.decay_epochs,
    "wsd: epochs of the final linear decay (0: the last 30%, "
    "at least 1)");
  f("step-epochs", s.step_epochs, "step schedule: multiply the rate by gamma every N epochs");
  f("gamma", s.gamma, "step schedule factor");
  f("seed", s.seed, "seed of initialisation, shuffling and augmentation");
  f("threads", s.threads, "compute threads (0: ZENITH_NUM_THREADS or all cores)");
  f("workers", s.workers, "input pipeline worker threads");
  f("augment", s.augment, "training augmentation: none, flip, crop or crop+flip");
  f("eval-every", s.eval_every, "evaluate on the test split every N epochs");
  f("patience", s.patience, "stop after N evaluations without a lower test loss (0: off)");
  f("keep-checkpoints", s.keep_checkpoints, "keep only the newest N checkpoints (0: all)");
  f("save-steps", s.save_steps, "also checkpoint every N steps (0: only per epoch)");
  f("log-every", s.log_every, "steps between logged losses and progress lines");
  f("limit-train", s.limit_train, "train on the first N samples only (0: all)");
  f("limit-test", s.limit_test, "evaluate on the first N samples only (0: all)");
  f("image-size", s.image_size, "resize images to N x N (bilinear; 0: the dataset's own size)");
  f("out", s.out, "output directory (default: out/<dataset>-<model>)");
  f("progress", s.progress, "auto, bar, plain or none");
}

nlohmann::json to_json(const Settings& s) {
  nlohmann::json j;
  for_each_setting(s, [&](const char* name, const auto& value, const char*) { j[name] = value; });
  return j;
}

std::string normalise_key(std::string key) {
  for (auto& c : key)
    if (c == '_') c = '-';
  return key;
}

// Applies a JSON object (settings saved in a checkpoint) to `s`; unknown keys are ignored.
void apply_json(Settings& s, const nlohmann::json& j) {
  for_each_setting(s, [&](const char* name, auto& value, const char*) {
    if (j.contains(name)) value = j[name].get<std::decay_t<decltype(value)>>();
  });
}

// Applies a YAML map (a --config file); unknown keys are errors listing the known ones.
void apply_yaml(Settings& s, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    ZENITH_FAIL("[train] ", path, ": ", e.what());
  }
  if (root["train"]) root = root["train"];
  ZENITH_CHECK(root.IsMap(), "[train] ", path, ": expected a map of settings");
  for (const auto& item : root) {
    std::string key = normalise_key(item.first.as<std::string>());
    bool found = false;
    std::string known;
    for_each_setting(s, [&](const char* name, auto& value, const char*) {
      known += (known.empty() ? "" : ", ") + std::string(name);
      if (key != name) return;
      found = true;
      try {
        value = item.second.as<std::decay_t<decltype(value)>>();
      } catch (const YAML::Exception& e) {
        ZENITH_FAIL("[train] ", path, ": '", key, "' has a bad value (line ",
                    item.second.Mark().line + 1, ")");
      }
    });
    ZENITH_CHECK(found, "[train] ", path, ": unknown setting '", key, "' (known: ", known, ")");
  }
}

// The value of `--flag VALUE` or `--flag=VALUE` in argv, "" when absent.
std::string prescan(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == flag && i + 1 < argc) return argv[i + 1];
    if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
  }
  return "";
}

nn::OptimizerPtr make_optimizer(const Settings& s, const std::vector<Tensor>& params,
                                int64_t steps_per_epoch) {
  nn::LRSchedule lr = nn::constant_lr(s.lr);
  if (s.schedule == "cosine")
    lr = nn::warmup_cosine_lr(s.lr, s.warmup_epochs * steps_per_epoch, s.epochs * steps_per_epoch);
  else if (s.schedule == "step")
    lr = nn::step_lr(s.lr, std::max<int64_t>(1, s.step_epochs) * steps_per_epoch, s.gamma);
  else if (s.schedule == "wsd") {
    const int64_t decay =
        s.decay_epochs > 0 ? s.decay_epochs : std::max<int64_t>(1, s.epochs * 3 / 10);
    ZENITH_CHECK(s.warmup_epochs + decay <= s.epochs, "[train] wsd schedule: warmup-epochs (",
                 s.warmup_epochs, ") + decay-epochs (", decay, ") exceed epochs (", s.epochs, ")");
    lr = nn::warmup_stable_decay_lr(s.lr, s.warmup_epochs * steps_per_epoch,
                                    (s.epochs - decay) * steps_per_epoch,
                                    s.epochs * steps_per_epoch);
  } else
    ZENITH_CHECK(s.schedule == "constant", "[train] unknown schedule '", s.schedule,
                 "' (known: constant, cosine, step, wsd)");
  if (s.optimizer == "momentum")
    return nn::Momentum(params, lr, s.momentum, s.weight_decay, s.nesterov);
  if (s.optimizer == "sgd") return nn::Momentum(params, lr, 0.0, s.weight_decay);
  if (s.optimizer == "adam") return nn::Adam(params, lr, 0.9, 0.999, 1e-8, s.weight_decay);
  if (s.optimizer == "adamw") return nn::AdamW(params, lr, 0.9, 0.999, 1e-8, s.weight_decay);
  ZENITH_FAIL("[train] unknown optimizer '", s.optimizer, "' (known: momentum, sgd, adam, adamw)");
}

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

// The job's world size from the platform's environment; 1 outside a multi-rank job.
int env_world_size() {
  for (const char* name : {"WORLD_SIZE", "RANK_SIZE"})
    if (const char* v = std::getenv(name); v && *v) {
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        ZENITH_FAIL("[train] ", name, "='", v, "' is not a number");
      }
    }
  return 1;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `zenith train --nproc N ...`: this command without the launcher flags, as a job of N ranks run
// in the foreground by the platform (logs under ZENITH_DATA/runs/<id>/logs).
int launch_ranks(int argc, char** argv, int nproc, int max_restarts) {
  std::string entry =
      shell_quote(std::filesystem::read_symlink("/proc/self/exe").string()) + " train";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc" || a == "--max-restarts") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("--max-restarts=", 0) == 0) continue;
    entry += " " + shell_quote(a);
  }
  platform::JobSpec spec;
  spec.name = "train";
  spec.devices = nproc;
  spec.entry = entry;
  spec.working_dir = std::filesystem::current_path().string();
  spec.max_restarts = max_restarts;
  ForegroundOptions options;
  options.data_dir = default_data_dir();
  options.cpu_devices = std::max(8, nproc);
  return run_spec_foreground(spec, options);
}

// The checkpoint in `dir` with the most training steps, "" when there is none.
std::string latest_checkpoint(const std::string& dir) {
  std::string best;
  int64_t best_step = -1;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("checkpoint_", 0) != 0 || e.path().extension() != ".safetensors") continue;
    try {
      auto meta = io::read_safetensors_metadata(e.path().string());
      int64_t step = meta.count("step") ? std::stoll(meta["step"]) : 0;
      if (step > best_step) best_step = step, best = e.path().string();
    } catch (const std::exception&) {
      // unreadable: not a candidate
    }
  }
  return best;
}

int run_train(int argc, char** argv) {
  Settings s;
  std::string config = prescan(argc, argv, "--config");
  std::string resume = prescan(argc, argv, "--resume");
  io::Metadata resume_meta;
  if (!resume.empty()) {
    resume_meta = io::read_safetensors_metadata(resume);
    if (resume_meta.count("config")) apply_json(s, nlohmann::json::parse(resume_meta["config"]));
  }
  if (!config.empty()) apply_yaml(s, config);

  CLI::App app{"Train a model from the zoo on a dataset", "zenith train"};
  app.add_option("--config", config, "YAML file of settings (flags override it)");
  app.add_option("--resume", resume, "continue from this checkpoint");
  int nproc = 1, max_restarts = 0;
  app.add_option("--nproc", nproc, "train with N data-parallel ranks on this host (platform job)")
      ->capture_default_str();
  app.add_option("--max-restarts", max_restarts,
                 "with --nproc: restart the job up to N times after a failure (resumes from "
                 "the newest checkpoint)")
      ->capture_default_str();
  for_each_setting(s, [&](const char* name, auto& value, const char* help) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>)
      app.add_flag(std::string("--") + name, value, help);
    else
      app.add_option(std::string("--") + name, value, help)
          ->capture_default_str()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last flag wins
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  ZENITH_CHECK(
      s.augment == "none" || s.augment == "flip" || s.augment == "crop" || s.augment == "crop+flip",
      "[train] unknown augment '", s.augment, "' (known: none, flip, crop, crop+flip)");
  ZENITH_CHECK(s.epochs > 0 && s.batch_size > 0 && s.accumulate_steps > 0 && s.eval_every > 0 &&
                   s.log_every > 0,
               "[train] epochs, batch-size, accumulate-steps, eval-every and log-every must be "
               "positive");
  if (s.out.empty()) s.out = "out/" + s.dataset + "-" + s.model;
  ProgressMode progress_mode = parse_progress_mode(s.progress);

  // Everything that can fail on bad input happens before anything is written; names first,
  // before the data is read.
  auto known_models = models::names();
  if (std::find(known_models.begin(), known_models.end(), s.model) == known_models.end())
    models::create(s.model, 1, 28, 10);  // throws, listing the known models
  dataset::dataset_info(s.dataset);
  const int world_env = env_world_size();
  ZENITH_CHECK(nproc >= 1 && max_restarts >= 0,
               "[train] --nproc must be >= 1 and "
               "--max-restarts >= 0");
  ZENITH_CHECK(nproc == 1 || world_env == 1, "[train] --nproc ", nproc, " inside a job of ",
               world_env, " ranks: the platform has already started the ranks; drop --nproc");
  if (nproc > 1) return launch_ranks(argc, argv, nproc, max_restarts);
  if (resume.empty())
    if (const char* rc = std::getenv("ZENITH_RESTART_COUNT"); rc && std::atoi(rc) > 0) {
      // Every rank lists OUT before init(): rank 0 cannot write a newer checkpoint until all
      // ranks have joined, so they all pick the same file.
      resume = latest_checkpoint(s.out);
      std::printf("[train] restart %s: %s\n", rc,
                  resume.empty() ? "no checkpoint yet, starting over"
                                 : ("resuming from " + resume).c_str());
    }
  if (s.threads > 0) context::set_num_threads(int(s.threads));
  int rank = 0, world = 1;
  if (world_env > 1) {
    // One rank per device: by default as many threads as the cores the platform pinned us to.
    cpu_set_t cores;
    if (s.threads == 0 && !std::getenv("ZENITH_NUM_THREADS") &&
        sched_getaffinity(0, sizeof(cores), &cores) == 0)
      context::set_num_threads(std::max(1, CPU_COUNT(&cores)));
    communication::init();
    rank = communication::get_rank();
    world = communication::get_group_size();
  }
  manual_seed(uint64_t(s.seed));
  dataset::config::set_seed(uint64_t(s.seed));
  dataset::PipelineOptions train_opts{.batch_size = s.batch_size,
                                      .training = true,
                                      .random_crop = s.augment.find("crop") != std::string::npos,
                                      .random_flip = s.augment.find("flip") != std::string::npos,
                                      .num_workers = int(s.workers),
                                      .limit = s.limit_train,
                                      .image_size = s.image_size,
                                      .num_shards = world,
                                      .shard_id = rank};
  auto train = dataset::classification_pipeline(s.dataset, s.data_dir, "train", train_opts);
  dataset::PipelineOptions test_opts = train_opts;
  test_opts.training = false;
  test_opts.batch_size = std::max<int64_t>(s.batch_size, 256);
  test_opts.limit = s.limit_test;
  test_opts.image_size = train.info.image_size;
  auto test = dataset::classification_pipeline(s.dataset, s.data_dir, "test", test_opts);
  const auto& info = train.info;
  nn::CellPtr net = models::create(s.model, info.channels, info.image_size, info.num_classes);
  if (world > 1) net = nn::DistributedDataParallel(net);  // rank 0's initial values everywhere
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
  std::string ranks_note =
      world > 1 ? ", rank " + std::to_string(rank) + " of " + std::to_string(world) : "";
  const std::string accumulation_note =
      s.accumulate_steps > 1 ? " (" + std::to_string(s.accumulate_steps) + " batches of " +
                                   std::to_string(s.batch_size) + " per step)"
                             : "";
  std::printf(
      "training %s on %s: %lld train / %lld test samples, %lld steps per epoch%s, "
      "epochs %lld..%lld, %d threads%s; writing %s\n",
      arch, s.dataset.c_str(), (long long)train.samples, (long long)test.samples,
      (long long)steps_per_epoch, accumulation_note.c_str(), (long long)initial_epoch + 1,
      (long long)s.epochs, context::get_num_threads(), ranks_note.c_str(),
      rank == 0 ? s.out.c_str() : "nothing (rank 0 writes)");
  std::fflush(stdout);
  // Only rank 0 shows progress and writes OUT: checkpoints, summaries, metrics, the eval log.
  std::vector<callbacks::CallbackPtr> cbs;
  if (rank == 0)
    cbs = {std::make_shared<TrainProgress>(progress_mode, s.log_every),
           callbacks::ModelCheckpoint(s.out, {.save_checkpoint_epochs = 1,
                                              .save_checkpoint_steps = s.save_steps,
                                              .keep_checkpoint_max = s.keep_checkpoints}),
           callbacks::SummaryCollector(s.out + "/summary", s.log_every),
           callbacks::MetricsLogger(s.out + "/metrics.jsonl", s.log_every)};
  // Under `zenith server` each rank also logs to the file the server ingests for its dashboard.
  if (const char* f = std::getenv("ZENITH_METRICS_FILE"); f && *f)
    cbs.push_back(callbacks::MetricsLogger(f, s.log_every));
  if (s.patience > 0) cbs.push_back(callbacks::EarlyStopping("eval_loss", s.patience - 1));

  auto start = std::chrono::steady_clock::now();
  nlohmann::json log = {{"model", s.model},
                        {"dataset", s.dataset},
                        {"architecture", arch},
                        {"config", to_json(s)},
                        {"resumed_from", resume}};
  auto write_log = [&](const std::string& status) {
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double epoch_sum = 0;
    for (const auto& r : model.history()) epoch_sum += r.seconds;
    log["status"] = status;
    log["epochs_done"] = model.epochs_done();
    log["history"] = history_json(model.history());
    if (rank != 0) return;
    log["timing"] = {{"run_seconds", total},
                     {"mean_epoch_seconds",
                      model.history().empty() ? 0.0 : epoch_sum / double(model.history().size())},
                     {"threads", context::get_num_threads()},
                     {"ranks", world}};
    core::write_file_atomic(s.out + "/eval_log.json", log.dump(2) + "\n");
  };
  try {
    model.fit(s.epochs, train.dataset, test.dataset, s.eval_every, cbs, false, initial_epoch);
  } catch (const Error& e) {
    log["error"] = e.what();
    write_log("failed");
    throw;
  }
  auto final = model.history().empty() || model.history().back().eval.empty()
                   ? model.eval(test.dataset)
                   : model.history().back().eval;
  log["final"] = final;
  log["checkpoint"] =
      s.out + "/checkpoint_epoch_" + std::to_string(model.epochs_done()) + ".safetensors";
  write_log("finished");
  if (world > 1) communication::release();
  if (rank != 0) {
    std::printf("rank %d finished after %lld epochs\n", rank, (long long)model.epochs_done());
    return 0;
  }
  std::printf("final test accuracy: %.4f (loss %.4f) after %lld epochs; %s/eval_log.json\n",
              final.at("Accuracy"), final.at("Loss"), (long long)model.epochs_done(),
              s.out.c_str());
  return 0;
}

}  // namespace

ZENITH_COMMAND("train", "Train a zoo model on a dataset (flags or --config YAML)", run_train);

}  // namespace zenith::cli
