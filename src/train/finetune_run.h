// The pieces of finetune::run (finetune.cpp) that are not the loop: the settings' checks and
// their record in checkpoints (finetune_settings.cpp), what a run writes (finetune_output.cpp)
// and the lines it logs before training (finetune_log.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "train/ranks.h"
#include "zenith/finetune.h"
#include "zenith/io.h"
#include "zenith/loss_scaler.h"
#include "zenith/optim.h"

namespace zenith::distributed {
class ParallelLlama;
}

namespace zenith::finetune::detail {

using Log = std::function<void(const std::string&)>;

inline std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// ---- settings (finetune_settings.cpp)

// Fails on settings no run accepts, naming the flag.
void check_options(const Options& o);
// The settings a resumed run must share with the checkpoint's (the others, such as where
// output goes and how often to log, may change). `ranks`: the data-parallel ranks, each taking
// batch_size examples of a micro-batch; `pad_to`: the multiple its training batches pad to.
nlohmann::json run_settings(const Options& o, int ranks, int64_t pad_to);
// The learning rate over `total` steps: linear warmup, then o.schedule.
nn::LRSchedule make_schedule(const Options& o, int64_t warmup, int64_t total);
// The adapter_config.json of the run's LoRA settings.
io::LoraConfig lora_config(const Options& o);

// ---- the model loaded (finetune_batches.cpp)

// The pretrained weights a run starts from (--model: a directory or a GGUF file). `lora`: the
// frozen base, in amp_dtype under --amp; QLoRA (--quant) quantizes each weight as it is read and
// keeps a GGUF file's blocks when they are of that format, plain LoRA widens them to float.
// Otherwise float32, GGUF blocks dequantized (full fine-tuning trains every weight).
std::shared_ptr<models::Llama> load_pretrained(const Options& o, bool lora);

// ---- outputs (finetune_output.cpp)

// One JSON object per scalar, as `zenith train` writes them (the platform's metrics ingestion
// and dashboard read this shape), to out/metrics.jsonl and $ZENITH_METRICS_FILE when set.
class MetricsOut {
 public:
  // `writes` false (ranks other than 0): emits nothing.
  MetricsOut(const std::string& out, bool writes);
  // `event`: a line for an event (a loss spike, a rollback) rather than a plain scalar.
  void emit(const std::string& name, double value, int64_t step, int64_t epoch,
            const std::string& event = "");

 private:
  std::vector<std::ofstream> files_;
  std::optional<io::SummaryWriter> tensorboard_;
};

struct TrainerState {
  int64_t step = 0;
  std::string rng;
  nn::StateDict optimizer;
  io::Metadata meta;
};

// What a checkpoint (or the run's end) writes to `dir`.
struct Checkpoint {
  models::Llama& model;
  const Options& o;
  const io::LoraConfig& lora;
  const nn::Optimizer& optimizer;
  const nn::DynamicLossScaler* scaler;
  int ranks;
  int64_t pad_to;
  // Model parallelism: the adapter gathered from the ranks' shards (c.model is then the whole
  // model gathered, or unused for LoRA).
  const io::LoraAdapter* adapter = nullptr;
};
// The weights (adapter or model) and trainer_state.safetensors: the optimizer's state, and as
// metadata the step, the settings and the random generator's state.
void save_output(const Checkpoint& c, int64_t step, const std::string& dir);
// save_output's trainer_state.safetensors alone.
void save_trainer_state(const Checkpoint& c, int64_t step, const std::string& dir);
// Full fine-tuning's output written one tensor at a time, so that no rank holds the whole model:
// model.safetensors laid out as io::save_safetensors does (the names of `shapes`, sorted; float32)
// with `config`, the side files and the trainer state. visit(name, write) runs on every rank in
// name order (it may gather collectively) and calls write(the whole tensor) once; rank `writes`
// writes it. False (nothing done, on every rank alike) for a tensor that is not float32 or a
// model that needs several shard files.
bool save_streamed_output(
    const Checkpoint& c, const models::LlamaConfig& config,
    const std::map<std::string, Tensor>& shapes,
    const std::function<void(const std::string&, const std::function<void(const Tensor&)>&)>& visit,
    int64_t step, const std::string& dir, bool writes);
// o.resume's trainer state; errors name each setting that differs from `o`.
TrainerState read_trainer_state(const Options& o, int ranks, int64_t pad_to);
// fp16's loss scaler as the checkpoint left it.
void restore_loss_scaler(const TrainerState& state, nn::DynamicLossScaler& scaler);

// evaluate() over every world-th batch of `data`, from the rank-th, summed over the ranks.
EvalRecord evaluate_shared(models::Llama& model, const Data& data, int64_t batch_size,
                           int64_t pad_id, const Ranks* ranks);

// ---- what the run logs before training (finetune_log.cpp)

struct RunShape {
  int64_t max_seq_len = 0, pad_to = 1;
  int64_t steps_per_epoch = 0, total_steps = 0, warmup = 0;
  size_t adapted_layers = 0;
  int64_t trainable = 0, total = 0;
  const Data* data = nullptr;       // as read (before packing)
  const Data* sequences = nullptr;  // as trained (packed or not)
};
void log_settings(const Options& o, models::Llama& model, const RunShape& shape,
                  const nn::DynamicLossScaler* scaler, const Log& log);

// ---- model parallelism (finetune_parallel.cpp)

// Whether o asks for tensor or pipeline parallelism.
bool model_parallel(const Options& o);
// Collective: `model` (LoRA added) rewritten over the job's ranks; `ranks` becomes the mesh's
// data group, `params` this rank's trainable shards. Errors name the flag that does not fit.
std::unique_ptr<distributed::ParallelLlama> make_parallel(const Options& o,
                                                          std::shared_ptr<models::Llama> model,
                                                          Ranks& ranks, std::vector<Tensor>& params,
                                                          const Log& log);
// o.resume's optimizer state into `optimizer`: with model parallelism (`run`) this rank's
// shards from the checkpoint's parallel/ pieces (any layout saved them); one process resuming a
// model-parallel checkpoint: the whole state from those pieces (`names`: the parameters' names,
// in the optimizer's order); else `state`'s.
void load_optimizer_state(const std::string& resume, const TrainerState& state,
                          const distributed::ParallelLlama* run,
                          const std::vector<std::string>& names, nn::Optimizer& optimizer);
// evaluate_shared through `run` (its tensor and pipeline groups run each batch, padded to a
// multiple of pad_to); the data ranks take every world-th batch, their sums added.
EvalRecord evaluate_parallel(distributed::ParallelLlama& run, const Data& data, int64_t batch_size,
                             int64_t pad_id, int64_t pad_to, const Ranks& ranks);
// Collective: the whole model or adapter gathered from the shards; rank `writes` saves it as
// save_output does (c.model unused). A checkpoint (dir is not o.out) also gets every rank's
// optimizer shards in dir/parallel (a sharded checkpoint), for --resume.
void save_parallel(distributed::ParallelLlama& run, const Checkpoint& c, int64_t step,
                   const std::string& dir, bool writes);

}  // namespace zenith::finetune::detail
