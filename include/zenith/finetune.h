// Supervised fine-tuning of a LLaMA-family model (zenith finetune): instruction/chat/text/
// pre-tokenized JSONL data turned into ids and labels, and a training loop (LoRA or full,
// AdamW, warmup + cosine/wsd/constant, gradient accumulation, clipping) writing PEFT adapters
// or HF model directories, metrics.jsonl, TensorBoard events and eval_log.json.
//
//   finetune::Options o{.model = "examples/llm/demo-llama", .data = "train.jsonl", .out = "run"};
//   auto tokenizer = text::Tokenizer::from_dir(o.model);                      // zenith_text
//   auto options = finetune::data_options(o, models::load_llama_config(o.model));
//   finetune::Data train = finetune::load_data(o.data, tokenizer.get(), options);
//   finetune::Result r = finetune::run(o, train);  // run/adapter_config.json, adapter_model...
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zenith/finetune_data.h"
#include "zenith/llama.h"
#include "zenith/lora.h"
#include "zenith/train.h"

namespace zenith::finetune {

// ---- batches

struct Batch {
  Tensor input_ids;       // int64 [B, T], T = the longest example, right-padded with pad_id
  Tensor attention_mask;  // int64 [B, T]: 1 token, 0 padding
  Tensor labels;          // int64 [B, T]: -100 on padding
  int64_t tokens = 0;     // real tokens (attention_mask's sum)
  int64_t targets = 0;    // predicted labels: labels[:, 1:] != -100
};
// Batches pad to their longest example, rounded up to a multiple of pad_to_multiple_of (HF's
// DataCollator option) but not past max_len where that is larger than the longest (0: no cap).
// Padding goes on the right: ids pad_id, attention_mask 0, labels -100, so under causal attention
// no real token sees it and the loss and gradients are those of the unpadded batch (to float32
// rounding); only random draws over the batch's shape (dropout) change with it.
Batch collate(const std::vector<const Example*>& examples, int64_t pad_id,
              int64_t pad_to_multiple_of = 1, int64_t max_len = 0);

// Packing: consecutive examples concatenated into sequences of at most max_seq_len tokens (an
// example that does not fit starts the next sequence), so batches carry no padding. Attention is
// causal over the whole sequence, as HF's packing without a block mask; the first token of each
// example after the first is not learned (it is not predicted from its own example).
Data pack(const Data& data, int64_t max_seq_len);

// ---- training

// The run's choices, typed; name() spells them as flags and checkpoints do, and parse_*()
// reads them, failing on an unknown name with the flag and the choices ("[finetune] unknown
// --mode 'turbo' (pynative, graph)").
enum class Method { lora, full };
// pretrained: Options::model's weights; random: a new model of Options::model_config (or the
// model directory's config.json) with transformers' initialisation, for pretraining (full).
enum class Init { pretrained, random };
enum class Schedule { cosine, wsd, constant };  // each after linear warmup; wsd decays the last 20%
// Mixed precision, MindSpore's levels: O0 float32; O1 every linear layer in amp_dtype; O2 also
// the LoRA matmuls and the hidden states between layers, norms float32 (Llama::
// set_low_precision). Trained weights stay float32 masters; a LoRA base is held in amp_dtype.
enum class Amp { O0, O1, O2 };
// pynative: every op dispatched eagerly; graph: each step (forward, loss, backward, clipping,
// AdamW) captured once per batch shape and replayed (zenith/graph.h).
enum class Mode { pynative, graph };

const char* name(Method v);
const char* name(Init v);
const char* name(Schedule v);
const char* name(Amp v);
const char* name(Mode v);
Method parse_method(const std::string& s);
Init parse_init(const std::string& s);
Schedule parse_schedule(const std::string& s);
Amp parse_amp(const std::string& s);
Mode parse_mode(const std::string& s);
// --amp-dtype: bf16 or fp16.
DType parse_amp_dtype(const std::string& s);
const char* amp_dtype_name(DType dtype);
// --lora-targets: a comma list of module names (suffix match), or all-linear, into `lora`.
void set_lora_targets(nn::LoraSettings& lora, const std::string& list);
// The comma list (or all-linear) of `lora`'s targets.
std::string lora_targets(const nn::LoraSettings& lora);

struct Options {
  std::string model, data, eval_data, out;
  Method method = Method::lora;
  // QLoRA (--method qlora): "nf4", "nf4_f32" (nf4 without double quantization) or "q4_0"
  // quantizes the frozen base's linear layers at load (zenith/quant.h); the adapter and its
  // optimizer states stay float32. "": LoRA as is.
  std::string quant;
  Init init = Init::pretrained;
  std::string model_config;
  // LoRA's settings (zenith/lora.h) with the recipe's defaults: r 8, alpha 16, dropout 0.05 on
  // q_proj and v_proj.
  nn::LoraSettings lora{
      .r = 8, .lora_alpha = 16, .lora_dropout = 0.05, .target_modules = {"q_proj", "v_proj"}};
  int64_t epochs = 1;
  int64_t max_steps = 0;  // optimizer steps; > 0 overrides epochs
  double lr = 3e-4;
  double weight_decay = 0;
  double clip_grad_norm = 1.0;  // 0: off
  Schedule schedule = Schedule::cosine;
  int64_t warmup_steps = -1;  // -1: 3% of the steps
  int64_t batch_size = 4;
  int64_t accumulate_steps = 1;
  int64_t max_seq_len = 512;
  bool train_on_prompt = false;
  bool packing = false;  // pack examples into sequences of max_seq_len (pack())
  // Training batches' lengths round up to a multiple of this (collate()); 0: the mode's default,
  // 1 (each batch's longest) in pynative mode, graph_pad_multiple(max_seq_len) in graph mode,
  // where every batch length is a shape of its own to capture. A run setting (dropout's draws
  // follow the padded shape): a checkpoint resumes with the same value.
  int64_t pad_to_multiple_of = 0;
  std::string chat_template;
  bool activation_checkpointing = false;
  // full, selective, or a comma list of what each layer keeps (Llama::set_activation_checkpointing)
  std::string activation_checkpointing_policy = "full";
  // ZeRO stage over the ranks (src/distributed/zero.h), with --method full in pynative mode: 1
  // shards AdamW's states, 2 also the gradients (reduce-scattered as backward makes them); 0:
  // off. MindFormers' parallel_config.optimizer_shard: true is stage 1.
  int64_t zero_stage = 0;
  // Model parallelism over the ranks (src/distributed/parallelize_llama_train.h, Megatron's
  // pipeline x data x tensor mesh): the data degree is ranks / (tensor_parallel x
  // pipeline_parallel), batch_size stays per data rank (the ranks of one tensor or pipeline
  // group see the same rows), micro_batches split each step's batch through the pipeline and
  // sequence_parallel shards the norms' and residuals' rows over the tensor group. MindFormers'
  // parallel_config: model_parallel, pipeline_stage, micro_batch_num, use_seq_parallel.
  int64_t tensor_parallel = 1;
  int64_t pipeline_parallel = 1;
  int64_t micro_batches = 1;
  bool sequence_parallel = false;
  // amp_dtype bf16 or fp16 (DType::f16); fp16 adds dynamic loss scaling (nn::DynamicLossScaler:
  // 2^16, x2 after 2000 clean steps, x0.5 and the step skipped on inf/NaN gradients). On CPUs
  // the low precision is a storage format: values are rounded to it, arithmetic is float32.
  Amp amp = Amp::O0;
  DType amp_dtype = DType::bf16;
  // The capture line is logged in graph mode and its figures go to metrics.jsonl. Not a run
  // setting: a checkpoint written in one mode resumes in the other.
  Mode mode = Mode::pynative;
  int64_t seed = 0;
  int64_t log_every = 1;   // steps between metrics lines
  int64_t eval_steps = 0;  // steps between evaluations (0: before and after training only)
  int64_t save_every = 0;  // steps between checkpoints out/checkpoint-<step> (0: the end only)
  // A checkpoint directory (out/checkpoint-<step>, or a finished run's out) to continue from:
  // weights, optimizer state, schedule position, random state and data position are restored,
  // so the run continues as if it had not stopped. Settings that change the run must be equal.
  std::string resume;
  // Loss-spike guard (SpikeGuard): a step whose loss exceeds spike_factor x the running median,
  // or whose loss or gradient norm is not finite, is skipped; after spike_rollback spikes in a
  // row the weights and optimizer go back to the last good checkpoint (or the start) and the
  // learning rate is halved. spike_factor 0: off (non-finite steps are still skipped).
  double spike_factor = 3.0;
  int64_t spike_rollback = 3;
  // Fault injection for tests: may change a step's measured loss and gradient norm (before the
  // guard sees them; the gradients themselves are unchanged).
  std::function<void(int64_t step, double& loss, double& grad_norm)> inject;
  // Fault injection for tests: may change a step's gradients (still scaled by the loss scale)
  // before they are checked for inf/NaN and unscaled.
  std::function<void(int64_t step, const std::vector<Tensor>& params)> inject_gradients;
  // Told of the run's begin, each optimizer step's end (RunContext::step, loss, learning_rate;
  // no model) and its end: callbacks::Profile (zenith finetune --profile) and the like. The
  // steps mark their phases (data wait, forward, backward, communication wait, optimizer) for
  // the profiler.
  std::vector<callbacks::CallbackPtr> callbacks;
};

// Graph mode's default padding multiple for sequences of at most max_seq_len tokens: 64, or
// max_seq_len / 8 rounded up to a multiple of 64 where that is larger, so batches take at most 8
// lengths, as many graphs as graph mode keeps (graph::Options::max_graphs).
int64_t graph_pad_multiple(int64_t max_seq_len);
// The multiple the run pads its training batches to (Options::pad_to_multiple_of, resolved).
int64_t pad_multiple(const Options& o, int64_t max_seq_len);

// Decides, step by step, whether an update is a loss spike (see Options::spike_factor).
class SpikeGuard {
 public:
  enum class Verdict { ok, skip, rollback };
  // factor: a loss above factor x the median of the last `window` accepted losses is a spike
  // (checked once min_history losses are in; 0: only non-finite values are); rollback: spikes
  // in a row that ask for a rollback.
  SpikeGuard(double factor, int64_t rollback, int64_t window = 32, int64_t min_history = 8);
  // The verdict on a step; `why` receives the reason for a spike.
  Verdict check(double loss, double grad_norm, std::string* why = nullptr);
  double median() const;

 private:
  double factor_;
  int64_t rollback_, window_, min_history_;
  int64_t in_a_row_ = 0;
  std::vector<double> recent_;  // accepted losses, oldest first
};

struct EvalRecord {
  int64_t step = 0;
  double loss = 0;  // mean NLL per predicted label
  double perplexity = 0;
  int64_t targets = 0;
};

struct Result {
  int64_t steps = 0;
  int64_t trainable_parameters = 0, total_parameters = 0;
  std::vector<double> losses;         // each optimizer step's loss (mean over its learned labels)
  std::vector<double> grad_norms;     // each step's global gradient norm (before clipping)
  std::vector<EvalRecord> evals;      // eval data only: before training, every eval_steps, after
  int64_t spikes = 0, rollbacks = 0;  // updates skipped by the spike guard, rollbacks
  int64_t overflows = 0;              // fp16: updates skipped for inf/NaN gradients
  std::vector<double> loss_scales;    // fp16: each step's loss scale (empty without scaling)
};

// Mean next-token NLL of `data` under `model` (no gradients), in batches of batch_size.
EvalRecord evaluate(models::Llama& model, const Data& data, int64_t batch_size, int64_t pad_id);

// How load_data (zenith/finetune_data.h, with the model's tokenizer) reads data for `config`:
// max_seq_len capped at the context, the vocabulary size checked.
DataOptions data_options(const Options& options, const models::LlamaConfig& config);
// options.model_config, or options.model (a directory with config.json) when none.
std::string model_config_path(const Options& options);

// Fine-tunes options.model on `train` (evaluating `eval` before, every eval_steps steps and
// after, when given); `log` receives the lines a user sees (settings, data counts, progress).
// Writes to options.out: the adapter (lora: adapter_config.json + adapter_model.safetensors) or
// the model (full: config.json, weights, tokenizer files), metrics.jsonl, tensorboard/ events,
// eval_log.json (with eval data), checkpoint-<step>/ every save_every steps; each checkpoint
// and the final directory also hold trainer_state.safetensors (for options.resume).
Result run(const Options& options, const Data& train, const Data* eval = nullptr,
           const std::function<void(const std::string&)>& log = {});

}  // namespace zenith::finetune
