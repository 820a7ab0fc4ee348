// The fine-tuning loop: LoRA (frozen base in its file dtype, float32 adapters and AdamW state) or
// full (float32 weights), token-weighted gradient accumulation, clipping, warmup + schedule,
// metrics.jsonl / TensorBoard / eval_log.json, adapters or model directories out.
#include "zenith/finetune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

#include "core/trace_range.h"
#include "models/llama_loss.h"
#include "train/finetune_ranks.h"
#include "train/finetune_step.h"
#include "zenith/autograd.h"
#include "zenith/cpu_features.h"
#include "zenith/io.h"
#include "zenith/loss_scaler.h"
#include "zenith/optim.h"
#include "zenith/random.h"

namespace zenith::finetune {

namespace fs = std::filesystem;

namespace {

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

io::LoraConfig lora_config(const Options& o) {
  io::LoraConfig c;
  c.r = o.lora_r;
  c.lora_alpha = o.lora_alpha;
  c.lora_dropout = o.lora_dropout;
  c.use_rslora = o.use_rslora;
  c.base_model_name_or_path = o.model;
  if (o.lora_targets == "all-linear") {
    c.all_linear = true;
  } else {
    std::stringstream s(o.lora_targets);
    for (std::string t; std::getline(s, t, ',');)
      if (!t.empty()) c.target_modules.push_back(t);
    ZENITH_CHECK(!c.target_modules.empty(),
                 "[finetune] --lora-targets is empty: give module names (q_proj,v_proj) or "
                 "all-linear");
  }
  return c;
}

nn::LRSchedule schedule(const Options& o, int64_t warmup, int64_t total) {
  if (o.schedule == "cosine") return nn::warmup_cosine_lr(o.lr, warmup, total);
  if (o.schedule == "wsd")  // decay over the last 20% (MiniCPM's WSD)
    return nn::warmup_stable_decay_lr(o.lr, warmup, warmup + (total - warmup) * 4 / 5, total);
  ZENITH_CHECK(o.schedule == "constant", "[finetune] unknown --schedule '", o.schedule,
               "' (cosine, wsd, constant)");
  const double lr = o.lr;
  return nn::LRSchedule{
      [=](int64_t step) { return step < warmup ? lr * double(step + 1) / double(warmup) : lr; },
      "constant after warmup"};
}

// One JSON object per scalar, as `zenith train` writes them (the platform's metrics ingestion
// and dashboard read this shape), to out/metrics.jsonl and $ZENITH_METRICS_FILE when set.
class MetricsOut {
 public:
  // `writes` false (ranks other than 0): emits nothing.
  MetricsOut(const std::string& out, bool writes) {
    if (!writes) return;
    tensorboard_.emplace(out + "/tensorboard");
    files_.emplace_back(out + "/metrics.jsonl", std::ios::app);
    if (const char* env = std::getenv("ZENITH_METRICS_FILE"); env && *env)
      files_.emplace_back(env, std::ios::app);
  }
  // `event`: a line for an event (a loss spike, a rollback) rather than a plain scalar.
  void emit(const std::string& name, double value, int64_t step, int64_t epoch,
            const std::string& event = "") {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    nlohmann::json j = {
        {"step", step}, {"epoch", epoch}, {"name", name}, {"value", value}, {"time", now}};
    if (!event.empty()) j["event"] = event;
    const std::string line = j.dump() + "\n";
    for (auto& f : files_) f << line << std::flush;
    if (tensorboard_) tensorboard_->add_scalar(name, value, step);
  }

 private:
  std::vector<std::ofstream> files_;
  std::optional<io::SummaryWriter> tensorboard_;
};

// The settings a resumed run must share with the checkpoint's (the others, such as where
// output goes and how often to log, may change). `ranks`: the data-parallel ranks, each taking
// batch_size examples of a micro-batch; `pad_to`: the multiple its training batches pad to.
nlohmann::json run_settings(const Options& o, int ranks, int64_t pad_to) {
  return {{"model", o.model},
          {"data", o.data},
          {"method", o.method},
          {"init", o.init},
          {"model_config", o.model_config},
          {"lora_r", o.lora_r},
          {"lora_alpha", o.lora_alpha},
          {"lora_dropout", o.lora_dropout},
          {"lora_targets", o.lora_targets},
          {"use_rslora", o.use_rslora},
          {"epochs", o.epochs},
          {"max_steps", o.max_steps},
          {"lr", o.lr},
          {"weight_decay", o.weight_decay},
          {"clip_grad_norm", o.clip_grad_norm},
          {"schedule", o.schedule},
          {"warmup_steps", o.warmup_steps},
          {"batch_size", o.batch_size},
          {"accumulate_steps", o.accumulate_steps},
          {"max_seq_len", o.max_seq_len},
          {"train_on_prompt", o.train_on_prompt},
          {"packing", o.packing},
          {"pad_to_multiple_of", pad_to},
          {"chat_template", o.chat_template},
          {"seed", o.seed},
          {"ranks", ranks},
          {"amp", o.amp},
          {"amp_dtype", o.amp_dtype}};
}

constexpr const char* kTrainerState = "trainer_state.safetensors";

// The weights (adapter or model) and trainer_state.safetensors: the optimizer's state, and as
// metadata the step, the settings and the random generator's state.
void save_output(models::Llama& model, const Options& o, const io::LoraConfig& lora,
                 const nn::Optimizer& optimizer, const nn::DynamicLossScaler* scaler, int64_t step,
                 int ranks, int64_t pad_to, const std::string& dir) {
  if (o.method == "lora") {
    models::save_lora(model, lora, dir);
  } else {
    model.save_pretrained(dir);
    models::copy_model_side_files(o.model, dir);
  }
  io::Metadata meta = {{"format", "zenith-finetune"},
                       {"step", std::to_string(step)},
                       {"settings", run_settings(o, ranks, pad_to).dump()},
                       {"rng", default_generator().state()}};
  if (scaler)
    for (const auto& [name, t] : scaler->state_dict())
      meta["loss_scaler." + name] = format("%.17g", t.item());
  io::save_safetensors(dir + "/" + kTrainerState, optimizer.state_dict(), meta);
}

struct TrainerState {
  int64_t step = 0;
  std::string rng;
  nn::StateDict optimizer;
  io::Metadata meta;
};

// A checkpoint's trainer state; errors name each setting that differs from `o`.
TrainerState read_trainer_state(const Options& o, int ranks, int64_t pad_to) {
  const std::string path = o.resume + "/" + kTrainerState;
  ZENITH_CHECK(fs::exists(path), "[finetune] --resume ", o.resume, " has no ", kTrainerState,
               " (a checkpoint-<step> directory of zenith finetune)");
  io::Metadata meta;
  TrainerState t;
  t.optimizer = io::load_safetensors(path, &meta);
  ZENITH_CHECK(meta.count("settings") && meta.count("step") && meta.count("rng"), "[finetune] ",
               path, " lacks the step, settings or rng metadata");
  nlohmann::json saved = nlohmann::json::parse(meta.at("settings"));
  const nlohmann::json now = run_settings(o, ranks, pad_to);
  // Settings added later, as checkpoints written before them ran.
  for (const auto& [key, value] : {std::pair<const char*, nlohmann::json>{"ranks", 1},
                                   {"amp", "O0"},
                                   {"amp_dtype", "bf16"},
                                   {"pad_to_multiple_of", 1}})
    if (!saved.contains(key)) saved[key] = value;
  std::string changed;
  for (const auto& [key, value] : now.items())
    if (!saved.contains(key) || saved[key] != value)
      changed += "\n  " + key + ": " + value.dump() +
                 " (the checkpoint's: " + (saved.contains(key) ? saved[key].dump() : "absent") +
                 ")";
  ZENITH_CHECK(changed.empty(), "[finetune] cannot resume ", o.resume,
               " with changed settings:", changed);
  t.step = std::stoll(meta.at("step"));
  t.rng = meta.at("rng");
  t.meta = meta;
  return t;
}

void check_options(const Options& o) {
  ZENITH_CHECK(!o.model.empty() || (o.init == "random" && !o.model_config.empty()),
               "[finetune] --model DIR is required (or --init random --model-config FILE)");
  ZENITH_CHECK(!o.out.empty(), "[finetune] --out DIR is required");
  ZENITH_CHECK(o.method == "lora" || o.method == "full", "[finetune] unknown --method '", o.method,
               "' (lora, full)");
  ZENITH_CHECK(o.method != "lora" || o.lora_r > 0, "[finetune] --lora-r must be positive, got ",
               o.lora_r);
  ZENITH_CHECK(o.lora_dropout >= 0 && o.lora_dropout < 1,
               "[finetune] --lora-dropout must be in [0, 1), got ", o.lora_dropout);
  ZENITH_CHECK(o.batch_size > 0, "[finetune] --batch-size must be positive, got ", o.batch_size);
  ZENITH_CHECK(o.pad_to_multiple_of >= 0,
               "[finetune] --pad-to-multiple-of must be positive (0: the mode's default), got ",
               o.pad_to_multiple_of);
  ZENITH_CHECK(o.accumulate_steps > 0, "[finetune] --accumulate-steps must be positive, got ",
               o.accumulate_steps);
  ZENITH_CHECK(o.epochs > 0 || o.max_steps > 0, "[finetune] give --epochs N or --max-steps N");
  ZENITH_CHECK(o.lr > 0, "[finetune] --lr must be positive, got ", o.lr);
  ZENITH_CHECK(o.init == "pretrained" || o.init == "random", "[finetune] unknown --init '", o.init,
               "' (pretrained, random)");
  ZENITH_CHECK(o.init == "pretrained" || o.method == "full",
               "[finetune] --init random trains every weight: it needs --method full");
  ZENITH_CHECK(o.mode == "pynative" || o.mode == "graph", "[finetune] unknown --mode '", o.mode,
               "' (known: pynative, graph)");
  ZENITH_CHECK(o.log_every > 0, "[finetune] --log-every must be positive, got ", o.log_every);
  ZENITH_CHECK(o.amp == "O0" || o.amp == "O1" || o.amp == "O2", "[finetune] unknown --amp '", o.amp,
               "' (O0, O1, O2)");
  ZENITH_CHECK(o.amp_dtype == "bf16" || o.amp_dtype == "fp16", "[finetune] unknown --amp-dtype '",
               o.amp_dtype, "' (bf16, fp16)");
}

}  // namespace

Batch collate(const std::vector<const Example*>& examples, int64_t pad_id,
              int64_t pad_to_multiple_of, int64_t max_len) {
  ZENITH_CHECK(!examples.empty(), "[finetune] an empty batch");
  ZENITH_CHECK(pad_to_multiple_of >= 1, "[finetune] pad_to_multiple_of must be at least 1, got ",
               pad_to_multiple_of);
  size_t longest = 0;
  for (const Example* e : examples) longest = std::max(longest, e->ids.size());
  const int64_t b = int64_t(examples.size());
  int64_t t = (int64_t(longest) + pad_to_multiple_of - 1) / pad_to_multiple_of * pad_to_multiple_of;
  if (max_len > 0) t = std::max(int64_t(longest), std::min(t, max_len));
  std::vector<int64_t> ids(size_t(b * t), pad_id), mask(size_t(b * t), 0),
      labels(size_t(b * t), -100);
  Batch batch;
  for (int64_t i = 0; i < b; ++i) {
    const Example& e = *examples[size_t(i)];
    for (size_t j = 0; j < e.ids.size(); ++j) {
      const size_t at = size_t(i * t) + j;
      ids[at] = e.ids[j];
      mask[at] = 1;
      labels[at] = e.labels[j];
      ++batch.tokens;
      if (j > 0 && e.labels[j] != -100) ++batch.targets;
    }
  }
  batch.input_ids = Tensor::from_vector(ids, {b, t});
  batch.attention_mask = Tensor::from_vector(mask, {b, t});
  batch.labels = Tensor::from_vector(labels, {b, t});
  return batch;
}

int64_t graph_pad_multiple(int64_t max_seq_len) {
  return std::max<int64_t>(64, (max_seq_len / 8 + 63) / 64 * 64);
}

int64_t pad_multiple(const Options& o, int64_t max_seq_len) {
  if (o.pad_to_multiple_of > 0) return o.pad_to_multiple_of;
  return o.mode == "graph" ? graph_pad_multiple(max_seq_len) : 1;
}

Data pack(const Data& data, int64_t max_seq_len) {
  Data out = data;
  out.examples.clear();
  Example current;
  for (const Example& e : data.examples) {
    if (!current.ids.empty() && current.ids.size() + e.ids.size() > size_t(max_seq_len)) {
      out.examples.push_back(std::move(current));
      current = Example();
    }
    const bool joined = !current.ids.empty();
    current.ids.insert(current.ids.end(), e.ids.begin(), e.ids.end());
    current.labels.insert(current.labels.end(), e.labels.begin(), e.labels.end());
    if (joined) current.labels[current.labels.size() - e.labels.size()] = -100;
  }
  if (!current.ids.empty()) out.examples.push_back(std::move(current));
  return out;
}

SpikeGuard::SpikeGuard(double factor, int64_t rollback, int64_t window, int64_t min_history)
    : factor_(factor), rollback_(rollback), window_(window), min_history_(min_history) {
  ZENITH_CHECK(factor == 0 || factor > 1, "[finetune] the spike factor must be > 1 (0: off), got ",
               factor);
  ZENITH_CHECK(rollback > 0 && window > 0 && min_history > 0 && min_history <= window,
               "[finetune] bad spike guard settings");
}

double SpikeGuard::median() const {
  if (recent_.empty()) return NAN;
  std::vector<double> v = recent_;
  std::nth_element(v.begin(), v.begin() + int64_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

SpikeGuard::Verdict SpikeGuard::check(double loss, double grad_norm, std::string* why) {
  std::string reason;
  if (!std::isfinite(loss)) {
    reason = "the loss is " + std::to_string(loss);
  } else if (!std::isfinite(grad_norm)) {
    reason = "the gradient norm is " + std::to_string(grad_norm);
  } else if (factor_ > 0 && int64_t(recent_.size()) >= min_history_ && loss > factor_ * median()) {
    reason = format("the loss %.4g is above %g x the running median %.4g", loss, factor_, median());
  }
  if (reason.empty()) {
    in_a_row_ = 0;
    recent_.push_back(loss);
    if (int64_t(recent_.size()) > window_) recent_.erase(recent_.begin());
    return Verdict::ok;
  }
  if (why) *why = reason;
  if (++in_a_row_ >= rollback_) {
    in_a_row_ = 0;
    return Verdict::rollback;
  }
  return Verdict::skip;
}

namespace {

// evaluate() over every world-th batch of `data`, from the rank-th, summed over the ranks.
EvalRecord evaluate_shared(models::Llama& model, const Data& data, int64_t batch_size,
                           int64_t pad_id, const Ranks* ranks) {
  const bool was_training = model.training();
  model.eval();
  NoGradGuard no_grad;
  double total = 0;
  EvalRecord r;
  const size_t first = ranks ? size_t(ranks->rank()) : 0,
               every = ranks ? size_t(ranks->world()) : 1;
  for (size_t i = first * size_t(batch_size); i < data.examples.size();
       i += every * size_t(batch_size)) {
    std::vector<const Example*> part;
    for (size_t j = i; j < std::min(data.examples.size(), i + size_t(batch_size)); ++j)
      part.push_back(&data.examples[j]);
    Batch b = collate(part, pad_id);
    Tensor logits = detail::forward(model, b);
    total += models::causal_lm_loss(logits, b.labels).item() * double(b.targets);
    r.targets += b.targets;
  }
  model.train(was_training);
  if (ranks) {
    const std::vector<double> sums = ranks->sum({total, double(r.targets)});
    total = sums[0];
    r.targets = int64_t(sums[1]);
  }
  r.loss = r.targets > 0 ? total / double(r.targets) : 0;
  r.perplexity = std::exp(r.loss);
  return r;
}

}  // namespace

EvalRecord evaluate(models::Llama& model, const Data& data, int64_t batch_size, int64_t pad_id) {
  return evaluate_shared(model, data, batch_size, pad_id, nullptr);
}

std::string model_config_path(const Options& o) {
  return o.model_config.empty() ? o.model : o.model_config;
}

DataOptions data_options(const Options& o, const models::LlamaConfig& config) {
  const int64_t context = config.max_position_embeddings;
  return DataOptions{.max_seq_len = context > 0 ? std::min(o.max_seq_len, context) : o.max_seq_len,
                     .train_on_prompt = o.train_on_prompt,
                     .chat_template = o.chat_template,
                     .vocab_size = config.vocab_size};
}

Result run(const Options& o, const Data& train_data, const Data* eval_data,
           const std::function<void(const std::string&)>& log_fn) {
  const Ranks ranks;  // rank 0 alone logs and writes
  auto log = [&](const std::string& line) {
    if (log_fn && ranks.writes()) log_fn(line);
  };
  check_options(o);
  ZENITH_CHECK(!train_data.examples.empty(), "[finetune] no training examples");
  const bool lora = o.method == "lora";
  // LoRA keeps the base in its file's dtype (frozen); full fine-tuning trains float32 weights.
  // The training batches' padding (graph mode's default follows the sequences' length).
  const int64_t max_seq_len =
      data_options(o, models::load_llama_config(model_config_path(o))).max_seq_len;
  const int64_t pad_to = pad_multiple(o, max_seq_len);
  std::optional<TrainerState> resumed;
  if (!o.resume.empty()) resumed = read_trainer_state(o, ranks.world(), pad_to);
  manual_seed(uint64_t(o.seed));
  std::shared_ptr<models::Llama> model;
  const bool amp = o.amp != "O0";
  const DType amp_dtype = o.amp_dtype == "fp16" ? DType::f16 : DType::bf16;
  if (lora)  // the frozen base in its file's dtype, or the amp dtype
    model = amp ? models::Llama::from_pretrained(o.model, amp_dtype)
                : models::Llama::from_pretrained(o.model);
  else if (resumed)
    model = models::Llama::from_pretrained(o.resume, DType::f32);
  else if (o.init == "random")  // pretraining from scratch: transformers' initialisation
    model = std::make_shared<models::Llama>(models::load_llama_config(model_config_path(o)));
  else
    model = models::Llama::from_pretrained(o.model, DType::f32);
  const Data packed = o.packing ? pack(train_data, max_seq_len) : Data();
  const Data& train = o.packing ? packed : train_data;
  // Padded positions are masked out of attention and loss: any id in the vocabulary does.
  const int64_t pad_id = model->config().pad_token_id.value_or(0);
  Result result;

  const io::LoraConfig lora_cfg = lora ? lora_config(o) : io::LoraConfig{};
  std::vector<std::string> adapted;
  if (lora) {
    adapted = models::add_lora(*model, lora_cfg);
    if (resumed) models::load_lora(*model, o.resume);
    model->freeze_base();
  }
  model->set_activation_checkpointing(o.activation_checkpointing,
                                      o.activation_checkpointing_policy);
  model->set_low_precision(amp ? amp_dtype : DType::f32, o.amp == "O2");
  // float16's narrow range needs loss scaling; bfloat16's is float32's.
  std::optional<nn::DynamicLossScaler> scaler;
  if (amp && amp_dtype == DType::f16) {
    scaler.emplace();
    if (resumed && resumed->meta.count("loss_scaler.scale")) {
      nn::StateDict state;
      for (const std::string name : {"scale", "clean_steps"})
        state[name] =
            Tensor::scalar(std::stod(resumed->meta.at("loss_scaler." + name)), DType::f64);
      scaler->load_state_dict(state);
    }
  }
  model->train();
  std::vector<Tensor> params = model->trainable_params();
  for (const auto& p : params) result.trainable_parameters += p.numel();
  for (const auto& [name, p] : model->named_parameters()) result.total_parameters += p.numel();

  // A micro-batch holds batch_size examples per rank; rank r takes its r-th run of them.
  const int64_t n = int64_t(train.examples.size());
  const int64_t global_batch = o.batch_size * ranks.world();
  const int64_t micro_per_epoch = (n + global_batch - 1) / global_batch;
  const int64_t steps_per_epoch = (micro_per_epoch + o.accumulate_steps - 1) / o.accumulate_steps;
  const int64_t total_steps = o.max_steps > 0 ? o.max_steps : o.epochs * steps_per_epoch;
  const int64_t warmup =
      o.warmup_steps >= 0 ? o.warmup_steps : int64_t(std::llround(0.03 * double(total_steps)));
  auto optimizer =
      nn::AdamW(params, schedule(o, warmup, total_steps), 0.9, 0.999, 1e-8, o.weight_decay);
  if (resumed) {
    optimizer->load_state_dict(resumed->optimizer);
    default_generator().set_state(resumed->rng);
  }
  // The last good state, for the spike guard's rollback: taken now and at each checkpoint.
  struct Snapshot {
    std::vector<Tensor> params;
    nn::StateDict optimizer;
  } good;
  auto take_snapshot = [&] {
    good.params.clear();
    for (const Tensor& p : params) good.params.push_back(p.detach().clone());
    good.optimizer.clear();
    for (const auto& [name, t] : optimizer->state_dict()) good.optimizer[name] = t.clone();
  };
  take_snapshot();
  SpikeGuard guard(o.spike_factor, o.spike_rollback);
  // Graph mode captures one process's step without loss scaling; the ranks' sums and the fp16
  // scaler run between phases only in eager mode so far.
  const bool graph_mode = o.mode == "graph";
  ZENITH_CHECK(!graph_mode || ranks.world() == 1,
               "[finetune] --mode graph runs one process: use --mode pynative with --nproc/npu ",
               ranks.world());
  ZENITH_CHECK(!graph_mode || !scaler,
               "[finetune] --mode graph has no fp16 loss scaling: use --amp-dtype bf16 or --mode "
               "pynative");
  detail::StepRunner runner(*model, params, *optimizer, o.clip_grad_norm, log);
  // LoRA's adapter gradients summed in float64 over each step's rows (eager steps): the same
  // float32 gradients whether one process or N ranks take the batch (finetune_ranks.h).
  std::optional<Float64Gradients> exact;
  if (lora) exact.emplace(params);
  double lr_scale = 1;

  // The settings, as torchtune/PEFT users expect them.
  if (lora)
    log(
        format("[finetune] LoRA r %lld, alpha %g (scaling %g), dropout %g, targets %s: %zu layers; "
               "base frozen in %s",
               (long long)o.lora_r, o.lora_alpha, lora_cfg.scaling(), o.lora_dropout,
               o.lora_targets.c_str(), adapted.size(), dtype_name(model->weight_dtype())));
  else
    log(o.init == "random"
            ? "[finetune] training from random weights (" + model_config_path(o) + "), float32"
            : "[finetune] full fine-tuning, float32 weights");
  // bfloat16 products (two bfloat16 operands, backend/cpu/gemm_bf16.cpp) are real bfloat16
  // arithmetic where the CPU has it; elsewhere the low dtype only rounds values.
  const std::string arithmetic =
      amp_dtype == DType::bf16 && bf16_arithmetic()
          ? "the linear layers' products run in bfloat16 arithmetic on this CPU (AVX512_BF16, "
            "float32 accumulation)"
          : "on this CPU " + std::string(dtype_name(amp_dtype)) +
                " is a storage format (values rounded to it), arithmetic is float32";
  if (amp)
    log(format("[finetune] amp %s: %s in %s, float32 master weights and norms%s; %s", o.amp.c_str(),
               o.amp == "O1" ? "linear layers" : "linear layers, LoRA matmuls and hidden states",
               dtype_name(amp_dtype),
               scaler ? ", dynamic loss scaling (2^16, x2 after 2000 clean steps, x0.5 and skip "
                        "on inf/NaN)"
                      : "",
               arithmetic.c_str()));
  else
    log("[finetune] amp O0: float32 compute");
  if (o.activation_checkpointing) {
    std::string keeps;
    for (const std::string& k : model->checkpointing_keeps())
      keeps += (keeps.empty() ? "" : ",") + k;
    log("[finetune] activation checkpointing per decoder layer, " +
        (keeps.empty() ? std::string("full: each layer recomputed from its input in backward")
                       : o.activation_checkpointing_policy + ": keeps the outputs of " + keeps +
                             ", recomputes the rest in backward"));
  }
  log(format("[finetune] trainable %lld of %lld parameters (%.3f%%)",
             (long long)result.trainable_parameters, (long long)result.total_parameters,
             100.0 * double(result.trainable_parameters) / double(result.total_parameters)));
  log(
      format("[finetune] AdamW lr %g (betas 0.9, 0.999, eps 1e-8, weight decay %g), %s schedule, "
             "warmup %lld of %lld steps, clip %g",
             o.lr, o.weight_decay, o.schedule.c_str(), (long long)warmup, (long long)total_steps,
             o.clip_grad_norm));
  std::string formats;
  for (const auto& [f, count] : train.formats)
    formats += (formats.empty() ? "" : ", ") + std::to_string(count) + " " + f;
  log(
      format("[finetune] %s: %zu examples (%s), %lld truncated to %lld tokens, %lld dropped "
             "without a learned token; batch %lld x accumulate %lld, %lld steps per epoch%s",
             o.data.c_str(), train.examples.size(), formats.c_str(), (long long)train.truncated,
             (long long)max_seq_len, (long long)train.skipped, (long long)o.batch_size,
             (long long)o.accumulate_steps, (long long)steps_per_epoch,
             o.train_on_prompt ? ", training on prompts too" : ", prompts masked"));
  if (o.packing)
    log(format("[finetune] packing: %zu examples in %zu sequences of at most %lld tokens",
               train_data.examples.size(), train.examples.size(), (long long)max_seq_len));
  if (pad_to > 1)
    log(format("[finetune] batches padded to a multiple of %lld tokens (at most %lld lengths)%s",
               (long long)pad_to, (long long)((max_seq_len + pad_to - 1) / pad_to),
               o.pad_to_multiple_of > 0
                   ? ""
                   : ": graph mode's default, each batch length being a graph to capture; "
                     "--pad-to-multiple-of 1 pads to the longest only"));

  if (ranks.world() > 1 && log_fn)
    log_fn(format("[finetune] rank %d of %d: %lld examples of each micro-batch of %lld; %s",
                  ranks.rank(), ranks.world(), (long long)o.batch_size, (long long)global_batch,
                  ranks.writes() ? ("writing " + o.out).c_str() : "rank 0 writes"));
  if (ranks.writes()) fs::create_directories(o.out);
  MetricsOut metrics(o.out, ranks.writes());
  nlohmann::json eval_log = nlohmann::json::array();
  auto run_eval = [&](int64_t step) {
    if (!eval_data) return;
    EvalRecord r = evaluate_shared(*model, *eval_data, o.batch_size, pad_id, &ranks);
    r.step = step;
    result.evals.push_back(r);
    eval_log.push_back({{"step", step},
                        {"eval_loss", r.loss},
                        {"perplexity", r.perplexity},
                        {"tokens", r.targets}});
    if (ranks.writes()) std::ofstream(o.out + "/eval_log.json") << eval_log.dump(2) << "\n";
    metrics.emit("eval/loss", r.loss, step, 0);
    metrics.emit("eval/perplexity", r.perplexity, step, 0);
    log(format("[finetune] step %lld: eval loss %.4f, perplexity %.3f (%lld tokens)",
               (long long)step, r.loss, r.perplexity, (long long)r.targets));
  };
  int64_t step = 0;
  if (resumed) {
    step = resumed->step;
    if (fs::exists(o.out + "/eval_log.json"))
      eval_log = nlohmann::json::parse(std::ifstream(o.out + "/eval_log.json"));
    log(format("[finetune] resumed from %s at step %lld", o.resume.c_str(), (long long)step));
  } else {
    run_eval(0);
  }
  callbacks::RunContext context;
  context.steps_per_epoch = steps_per_epoch;
  context.step = step;
  for (const auto& cb : o.callbacks) cb->on_train_begin(context);
  for (int64_t epoch = step / steps_per_epoch; step < total_steps; ++epoch) {
    std::vector<size_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), size_t(0));
    std::mt19937_64 rng(uint64_t(o.seed) * 1000003u + uint64_t(epoch));
    std::shuffle(order.begin(), order.end(), rng);
    // A resumed run starts at the micro-batch its step left off at.
    const int64_t skip = step - epoch * steps_per_epoch;
    for (int64_t first = skip > 0 ? skip * o.accumulate_steps : 0;
         first < micro_per_epoch && step < total_steps; first += o.accumulate_steps) {
      auto start = std::chrono::steady_clock::now();
      // The step's phases for the profiler (core/trace_range.h), as zenith train marks them.
      std::optional<core::TraceRange> step_range, phase;
      step_range.emplace(core::Range::step);
      phase.emplace(core::Range::data_wait);
      std::vector<Batch> micro;
      int64_t targets = 0, tokens = 0;
      for (int64_t m = first; m < std::min(first + o.accumulate_steps, micro_per_epoch); ++m) {
        std::vector<const Example*> part;
        const auto [begin, end] = ranks.share(m * global_batch, o.batch_size, n);
        for (int64_t i = begin; i < end; ++i) part.push_back(&train.examples[order[size_t(i)]]);
        if (part.empty()) continue;  // the epoch's last micro-batch has none for this rank
        micro.push_back(collate(part, pad_id, pad_to, max_seq_len));
        targets += micro.back().targets;
        tokens += micro.back().tokens;
      }
      phase.reset();
      {
        core::TraceRange wait(core::Range::communication_wait);
        const std::vector<double> sums = ranks.sum({double(targets), double(tokens)});
        targets = int64_t(sums[0]);
        tokens = int64_t(sums[1]);
      }
      // Each micro-batch's summed loss over the step's learned labels (over every rank): the
      // gradient of the mean over all of them, as one batch of the combined examples gives, once
      // the ranks' gradients are summed (1 / targets the same float in every part).
      double loss_value = 0, grad_norm = NAN;
      SpikeGuard::Verdict verdict = SpikeGuard::Verdict::ok;
      std::string why;
      bool overflow = false;
      const double loss_scale = scaler ? scaler->scale() : 1;
      const double lr = optimizer->current_lr();
      if (graph_mode) {
        // One process, no loss scaling (check_options and run() refuse the rest): the step runs
        // as one captured graph, the spike guard between its phases.
        const detail::StepRunner::Outcome outcome =
            runner.run(micro, targets, [&](double& loss, double& norm) {
              if (o.inject) o.inject(step + 1, loss, norm);
              verdict = guard.check(loss, norm, &why);
              return verdict == SpikeGuard::Verdict::ok;
            });
        loss_value = outcome.loss;
        grad_norm = outcome.grad_norm;
      } else {
        for (const Batch& b : micro) {
          if (b.targets == 0) continue;
          Tensor loss;
          {
            // The loss in chunks of positions: the [B, T, V] logits are never whole
            // (models/llama_loss.cpp); the head's backward runs here, the layers' below.
            core::TraceRange range(core::Range::forward);
            loss =
                models::causal_lm_loss_over(*model, detail::input_of(b), b.labels, double(targets));
          }
          {
            core::TraceRange range(core::Range::backward);
            ops::WeightGradScope sums(exact ? &*exact : nullptr);
            (scaler ? scaler->scale_loss(loss) : loss).backward();
          }
          loss_value += loss.item();
        }
        {
          core::TraceRange wait(core::Range::communication_wait);
          loss_value = ranks.sum({loss_value})[0];
          if (exact) exact->finish();
          ranks.sum_gradients(params, exact ? DType::f64 : DType::f32);
        }
        phase.emplace(core::Range::optimizer);
        if (o.inject_gradients) o.inject_gradients(step + 1, params);
        // fp16: inf/NaN in the (summed, so every rank's same) gradients skips the update.
        overflow = scaler && !scaler->unscale_and_update(params);
        if (!overflow) {
          grad_norm = o.clip_grad_norm > 0 ? nn::clip_grad_norm(params, o.clip_grad_norm)
                                           : nn::clip_grad_norm(params, 1e300);
          if (o.inject) o.inject(step + 1, loss_value, grad_norm);
          verdict = guard.check(loss_value, grad_norm, &why);
          if (verdict == SpikeGuard::Verdict::ok) optimizer->step();
        }
      }
      optimizer->zero_grad();
      phase.reset();
      step_range.reset();
      ++step;
      context.step = step;
      context.loss = loss_value;
      context.learning_rate = lr;
      for (const auto& cb : o.callbacks) cb->on_train_step_end(context);
      if (scaler) result.loss_scales.push_back(loss_scale);
      if (overflow) {
        ++result.overflows;
        const std::string event =
            format("inf/NaN gradients at loss scale %g: update skipped, loss scale halved to %g",
                   loss_scale, scaler->scale());
        metrics.emit("loss_scale_overflow", loss_scale, step, epoch, event);
        log(format("[finetune] step %lld: %s", (long long)step, event.c_str()));
      }
      for (const auto& [name, value] : runner.take_capture_scalars())
        metrics.emit(name, value, step, epoch);
      if (verdict != SpikeGuard::Verdict::ok) {
        ++result.spikes;
        metrics.emit("spike", loss_value, step, epoch, "loss spike: " + why + "; update skipped");
        log(format("[finetune] step %lld: loss spike (%s): update skipped", (long long)step,
                   why.c_str()));
      }
      if (verdict == SpikeGuard::Verdict::rollback) {
        NoGradGuard no_grad;
        for (size_t i = 0; i < params.size(); ++i) params[i].copy_(good.params[i]);
        optimizer->load_state_dict(good.optimizer);
        runner.reset_graphs();
        lr_scale /= 2;
        nn::LRSchedule base = schedule(o, warmup, total_steps);
        optimizer->set_lr(nn::LRSchedule{[base, lr_scale](int64_t s) { return base(s) * lr_scale; },
                                         base.description + " x " + std::to_string(lr_scale)});
        ++result.rollbacks;
        const std::string event = format(
            "%lld loss spikes in a row: rolled back to the last good checkpoint, learning rate "
            "x %g",
            (long long)o.spike_rollback, lr_scale);
        metrics.emit("rollback", lr_scale, step, epoch, event);
        log("[finetune] step " + std::to_string(step) + ": " + event);
      }
      result.losses.push_back(loss_value);
      result.grad_norms.push_back(grad_norm);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (step % o.log_every == 0 || step == total_steps) {
        const double rate = seconds > 0 ? double(tokens) / seconds : 0;
        metrics.emit("loss", loss_value, step, epoch);
        metrics.emit("learning_rate", lr, step, epoch);
        metrics.emit("grad_norm", grad_norm, step, epoch);
        metrics.emit("tokens_per_second", rate, step, epoch);
        if (scaler) metrics.emit("loss_scale", scaler->scale(), step, epoch);
        log(
            format("[finetune] step %lld/%lld epoch %lld: loss %.4f, lr %.3g, grad norm %.3f, "
                   "%.0f tokens/s",
                   (long long)step, (long long)total_steps, (long long)epoch, loss_value, lr,
                   grad_norm, rate));
      }
      if (o.eval_every > 0 && step % o.eval_every == 0 && step < total_steps) run_eval(step);
      if (o.save_every > 0 && step % o.save_every == 0 && step < total_steps && ranks.writes())
        save_output(*model, o, lora_cfg, *optimizer, scaler ? &*scaler : nullptr, step,
                    ranks.world(), pad_to, o.out + "/checkpoint-" + std::to_string(step));
      if (o.save_every > 0 && step % o.save_every == 0 && verdict == SpikeGuard::Verdict::ok)
        take_snapshot();
    }
  }
  for (const auto& cb : o.callbacks) cb->on_train_end(context);
  result.steps = step;
  run_eval(step);
  if (ranks.writes())
    save_output(*model, o, lora_cfg, *optimizer, scaler ? &*scaler : nullptr, step, ranks.world(),
                pad_to, o.out);
  log(format("[finetune] %lld steps done; %s written to %s", (long long)step,
             lora ? "the PEFT adapter (adapter_config.json, adapter_model.safetensors)"
                  : "the model (config.json, safetensors, tokenizer files)",
             o.out.c_str()));
  return result;
}

}  // namespace zenith::finetune
