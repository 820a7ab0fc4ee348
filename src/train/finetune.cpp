// The fine-tuning loop: LoRA (frozen base in its file dtype, float32 adapters and AdamW state) or
// full (float32 weights), token-weighted gradient accumulation, clipping, warmup + schedule,
// metrics.jsonl / TensorBoard / eval_log.json, adapters or model directories out. run() reads as
// set-up (the Trainer's constructor), loop (Trainer::train, epochs of train_step) and finish;
// a step is detail::Step (finetune_step.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "core/format_clock.h"
#include "core/trace_range.h"
#include "distributed/parallelize_llama_train.h"
#include "distributed/zero.h"
#include "models/llama_quant.h"
#include "train/finetune_run.h"
#include "train/finetune_step.h"
#include "train/finetune_zero.h"
#include "zenith/autograd.h"
#include "zenith/random.h"

namespace zenith::finetune {
namespace {

namespace fs = std::filesystem;
using detail::format;

class Trainer {
 public:
  Trainer(const Options& o, const Data& train, const Data* eval, const detail::Log& log_fn);
  void train();
  Result finish();

 private:
  void load_model();
  void plan_steps();
  void make_optimizer();
  void announce(const detail::Log& log_fn);
  void train_epoch(int64_t epoch);
  std::vector<Batch> step_batches(const std::vector<size_t>& order, int64_t first, int64_t& targets,
                                  int64_t& tokens);
  void train_step(int64_t epoch, const std::vector<size_t>& order, int64_t first);
  void report(int64_t epoch, const detail::Step::Outcome& outcome, SpikeGuard::Verdict verdict,
              const std::string& why, double loss_scale);
  void rollback(int64_t epoch);
  void log_step(int64_t epoch, const detail::Step::Outcome& outcome, double lr, int64_t tokens,
                double seconds);
  void evaluate(int64_t step);
  void save(int64_t step, const std::string& dir);
  void snapshot();
  bool zero3() const { return zero_ && zero_->stage() == 3; }
  std::vector<Tensor> held_params() const;
  void with_full_parameters(const std::function<void()>& fn);
  void save_gathered(int64_t step, const std::string& dir);

  const Options& o_;
  Ranks ranks_;  // rank 0 alone logs and writes; under model parallelism the data group
  detail::Log log_;
  int64_t max_seq_len_ = 0, pad_to_ = 1, pad_id_ = 0;
  std::optional<detail::TrainerState> resumed_;
  std::shared_ptr<models::Llama> model_;
  const Data& data_;
  Data packed_;
  const Data* train_ = nullptr;
  const Data* eval_ = nullptr;
  io::LoraConfig lora_;
  std::vector<std::string> adapted_;
  std::optional<nn::DynamicLossScaler> scaler_;
  std::vector<Tensor> params_;
  // A micro-batch holds batch_size examples per rank; rank r takes its r-th run of them.
  int64_t n_ = 0, global_batch_ = 0, micro_per_epoch_ = 0, steps_per_epoch_ = 0;
  int64_t total_steps_ = 0, warmup_ = 0;
  nn::OptimizerPtr optimizer_;  // with --zero, ZeRO's inner optimizer over this rank's rows
  std::shared_ptr<distributed::ZeroOptimizer> zero_;
  distributed::LlamaRows zero_rows_;  // shape_only_model's rows until ZeRO takes them
  std::unique_ptr<distributed::ParallelLlama> parallel_;  // --tensor/--pipeline-parallel
  // The last good state, for the spike guard's rollback: taken at the start and at each
  // checkpoint.
  struct Snapshot {
    std::vector<Tensor> params;
    nn::StateDict optimizer;
  } good_;
  SpikeGuard guard_;
  double lr_scale_ = 1;
  std::optional<detail::Step> step_;
  std::optional<detail::MetricsOut> metrics_;
  nlohmann::json eval_log_ = nlohmann::json::array();
  int64_t steps_done_ = 0;
  double step_seconds_ = 0;  // the steps of this run, for the log's ETA
  int64_t steps_timed_ = 0;
  callbacks::RunContext context_;
  Result result_;
};

Trainer::Trainer(const Options& o, const Data& train, const Data* eval, const detail::Log& log_fn)
    : o_(o), data_(train), eval_(eval), guard_(o.spike_factor, o.spike_rollback) {
  log_ = [this, log_fn](const std::string& line) {
    if (log_fn && ranks_.writes()) log_fn(line);
  };
  detail::check_options(o);
  ZENITH_CHECK(!train.examples.empty(), "[finetune] no training examples");
  // The training batches' padding (graph mode's default follows the sequences' length).
  max_seq_len_ = data_options(o, models::load_llama_config(model_config_path(o))).max_seq_len;
  pad_to_ = pad_multiple(o, max_seq_len_);
  if (!o.resume.empty()) resumed_ = detail::read_resume_state(o, ranks_.world(), pad_to_);
  manual_seed(uint64_t(o.seed));
  load_model();
  if (detail::model_parallel(o))
    parallel_ = detail::make_parallel(o, model_, ranks_, params_, log_);
  plan_steps();
  make_optimizer();
  // Graph mode captures one process's step without loss scaling (check_options refuses fp16);
  // the ranks' sums run between phases only in eager mode so far.
  ZENITH_CHECK(o.mode != Mode::graph || ranks_.world() == 1,
               "[finetune] --mode graph runs one process: use --mode pynative with --nproc/npu ",
               ranks_.world());
  detail::StepSettings settings{.clip_grad_norm = o.clip_grad_norm,
                                .graph = o.mode == Mode::graph,
                                .ranks = &ranks_,
                                .scaler = scaler_ ? &*scaler_ : nullptr,
                                // LoRA's adapter gradients summed in float64 over each step's
                                // rows: equal whatever the ranks (ZeRO reduces float32 ones)
                                .float64_sums = o.method == Method::lora && !zero_,
                                .zero = zero_};
  settings.parallel = parallel_.get();
  if (o.inject_gradients)
    settings.inject_gradients = [this](const std::vector<Tensor>& params) {
      o_.inject_gradients(steps_done_ + 1, params);
    };
  step_.emplace(*model_, params_, *optimizer_, std::move(settings), log_);
  announce(log_fn);
}

// The model in training: LoRA keeps the base in its file's dtype (or the amp dtype), frozen;
// full fine-tuning trains float32 weights.
void Trainer::load_model() {
  const bool lora = o_.method == Method::lora, amp = o_.amp != Amp::O0;
  if (lora)  // QLoRA (--quant): each base weight quantized as it is read
    model_ = detail::load_pretrained(o_, true);
  else if (detail::zero3_shape_only(o_, ranks_.world()))  // only this rank's rows of the weights
    model_ = detail::shape_only_model(o_, ranks_.rank(), ranks_.world(), zero_rows_);
  else if (resumed_)
    model_ = models::Llama::from_pretrained(o_.resume, DType::f32);
  else if (o_.init == Init::random)  // pretraining from scratch: transformers' initialisation
    model_ = std::make_shared<models::Llama>(models::load_llama_config(model_config_path(o_)));
  else
    model_ = detail::load_pretrained(o_, false);
  if (o_.packing) packed_ = pack(data_, max_seq_len_);
  train_ = o_.packing ? &packed_ : &data_;
  // Padded positions are masked out of attention and loss: any id in the vocabulary does.
  pad_id_ = model_->config().pad_token_id.value_or(0);
  if (lora) {
    lora_ = detail::lora_config(o_);
    adapted_ = models::add_lora(*model_, lora_);
    if (resumed_) models::load_lora(*model_, o_.resume);
    model_->freeze_base();
  }
  model_->set_activation_checkpointing(o_.activation_checkpointing,
                                       o_.activation_checkpointing_policy);
  model_->set_low_precision(amp ? o_.amp_dtype : DType::f32, o_.amp == Amp::O2);
  // float16's narrow range needs loss scaling; bfloat16's is float32's.
  if (amp && o_.amp_dtype == DType::f16) {
    scaler_.emplace();
    if (resumed_) detail::restore_loss_scaler(*resumed_, *scaler_);
  }
  model_->train();
  params_ = model_->trainable_params();
  for (const auto& p : params_) result_.trainable_parameters += p.numel();
  for (const auto& [name, p] : model_->named_parameters()) result_.total_parameters += p.numel();
}

void Trainer::plan_steps() {
  n_ = int64_t(train_->examples.size());
  global_batch_ = o_.batch_size * ranks_.world();
  micro_per_epoch_ = (n_ + global_batch_ - 1) / global_batch_;
  steps_per_epoch_ = (micro_per_epoch_ + o_.accumulate_steps - 1) / o_.accumulate_steps;
  total_steps_ = o_.max_steps > 0 ? o_.max_steps : o_.epochs * steps_per_epoch_;
  warmup_ =
      o_.warmup_steps >= 0 ? o_.warmup_steps : int64_t(std::llround(0.03 * double(total_steps_)));
}

void Trainer::make_optimizer() {
  auto adamw = [this](std::vector<Tensor> params) {
    return nn::AdamW(std::move(params), detail::make_schedule(o_, warmup_, total_steps_), 0.9,
                     0.999, 1e-8, o_.weight_decay);
  };
  if (o_.zero_stage > 0 && ranks_.world() > 1) {  // one rank has nothing to shard
    // Over the data ranks (of the mesh, under model parallelism); gradients summed at step().
    zero_ = std::make_shared<distributed::ZeroOptimizer>(
        params_, adamw,
        detail::zero_options(o_, parallel_.get(), detail::zero_rows_of(*model_, zero_rows_)));
    optimizer_ = zero_->inner_ptr();
  } else {
    optimizer_ = adamw(params_);
  }
  if (resumed_ && zero_)  // every rank's rows from the checkpoint's zero/ shards
    detail::load_zero_state(o_.resume, *zero_, detail::parameter_names(*model_, params_),
                            parallel_.get());
  else if (resumed_)  // model parallelism: this rank's shards from the checkpoint's parallel/
    detail::load_optimizer_state(o_.resume, *resumed_, parallel_.get(),
                                 detail::parameter_names(*model_, params_), *optimizer_);
  if (resumed_) default_generator().set_state(resumed_->rng);
  snapshot();
}

// What the spike guard restores: the parameters, or at ZeRO stage 3 this rank's shards of them.
std::vector<Tensor> Trainer::held_params() const {
  if (!zero3()) return params_;
  std::vector<Tensor> shards;
  for (const auto& s : zero_->shards()) shards.push_back(s.shard);
  return shards;
}

// ZeRO-3: every parameter gathered around fn (evaluation, saving), freed after. Collective.
void Trainer::with_full_parameters(const std::function<void()>& fn) {
  if (!zero3()) return fn();
  for (size_t i = 0; i < zero_->shards().size(); ++i) zero_->gather(i);
  fn();
  for (size_t i = 0; i < zero_->shards().size(); ++i) zero_->release(i);
}

void Trainer::snapshot() {
  good_.params.clear();
  for (const Tensor& p : held_params()) good_.params.push_back(p.detach().clone());
  good_.optimizer.clear();
  for (const auto& [name, t] : optimizer_->state_dict()) good_.optimizer[name] = t.clone();
}

// The settings logged, this rank's share (every rank says it), the output directory made.
void Trainer::announce(const detail::Log& log_fn) {
  const detail::RunShape shape{.max_seq_len = max_seq_len_,
                               .pad_to = pad_to_,
                               .steps_per_epoch = steps_per_epoch_,
                               .total_steps = total_steps_,
                               .warmup = warmup_,
                               .adapted_layers = adapted_.size(),
                               .trainable = result_.trainable_parameters,
                               .total = result_.total_parameters,
                               .data = &data_,
                               .sequences = train_};
  detail::log_settings(o_, *model_, shape, scaler_ ? &*scaler_ : nullptr, log_);
  if (ranks_.world() > 1 && log_fn)
    log_fn(format("[finetune] rank %d of %d: %lld examples of each micro-batch of %lld; %s",
                  ranks_.rank(), ranks_.world(), (long long)o_.batch_size, (long long)global_batch_,
                  ranks_.writes() ? ("writing " + o_.out).c_str() : "rank 0 writes"));
  if (zero_ && log_fn) {
    // Float32 weights, gradients and AdamW's two moments: 16 bytes a parameter in one process.
    const double psi = double(result_.trainable_parameters), mib = 1 << 20;
    const double per_rank =
        detail::zero_state_bytes_per_rank(o_.zero_stage, params_, ranks_.world());
    log_fn(
        format("[finetune] rank %d: ZeRO stage %d over %d ranks, %s: model state %.1f MiB "
               "per rank at the step (one process: %.1f MiB)",
               ranks_.rank(), int(o_.zero_stage), ranks_.world(),
               o_.zero_stage == 1   ? "AdamW states sharded"
               : o_.zero_stage == 2 ? "AdamW states and gradients sharded"
                                    : "parameters (gathered per layer), gradients and AdamW states "
                                      "sharded",
               per_rank / mib, 16 * psi / mib));
  }
  if (ranks_.writes()) fs::create_directories(o_.out);
  metrics_.emplace(o_.out, ranks_.writes());
}

// Every step from the first (or the resumed one) to the last, epoch by epoch.
void Trainer::train() {
  if (resumed_) {
    steps_done_ = resumed_->step;
    if (fs::exists(o_.out + "/eval_log.json"))
      eval_log_ = nlohmann::json::parse(std::ifstream(o_.out + "/eval_log.json"));
    log_(format("[finetune] resumed from %s at step %lld", o_.resume.c_str(),
                (long long)steps_done_));
  } else {
    evaluate(0);
  }
  context_.steps_per_epoch = steps_per_epoch_;
  context_.total_steps = total_steps_;
  context_.step = steps_done_;
  for (const auto& cb : o_.callbacks) cb->on_train_begin(context_);
  for (int64_t epoch = steps_done_ / steps_per_epoch_; steps_done_ < total_steps_; ++epoch)
    train_epoch(epoch);
  for (const auto& cb : o_.callbacks) cb->on_train_end(context_);
}

// The final evaluation and outputs.
Result Trainer::finish() {
  result_.steps = steps_done_;
  evaluate(steps_done_);
  save(steps_done_, o_.out);
  log_(format("[finetune] %lld steps done; %s written to %s", (long long)steps_done_,
              o_.method == Method::lora
                  ? "the PEFT adapter (adapter_config.json, adapter_model.safetensors)"
                  : "the model (config.json, safetensors, tokenizer files)",
              o_.out.c_str()));
  return result_;
}

void Trainer::train_epoch(int64_t epoch) {
  std::vector<size_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), size_t(0));
  std::mt19937_64 rng(uint64_t(o_.seed) * 1000003u + uint64_t(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  // A resumed run starts at the micro-batch its step left off at.
  const int64_t skip = steps_done_ - epoch * steps_per_epoch_;
  for (int64_t first = skip > 0 ? skip * o_.accumulate_steps : 0;
       first < micro_per_epoch_ && steps_done_ < total_steps_; first += o_.accumulate_steps)
    train_step(epoch, order, first);
}

// This rank's micro-batches of the step that starts at micro-batch `first`; `targets` and
// `tokens` receive the step's learned labels and tokens over every rank.
std::vector<Batch> Trainer::step_batches(const std::vector<size_t>& order, int64_t first,
                                         int64_t& targets, int64_t& tokens) {
  std::vector<Batch> micro;
  targets = tokens = 0;
  {
    core::TraceRange range(core::Range::data_wait);
    for (int64_t m = first; m < std::min(first + o_.accumulate_steps, micro_per_epoch_); ++m) {
      std::vector<const Example*> part;
      const auto [begin, end] = ranks_.share(m * global_batch_, o_.batch_size, n_);
      for (int64_t i = begin; i < end; ++i) part.push_back(&train_->examples[order[size_t(i)]]);
      // The epoch's last micro-batch may have none for this rank: skipped, or at ZeRO stage 3
      // (every rank runs each layer's gathers) a stand-in example that counts for nothing.
      const bool stand_in = part.empty() && zero3();
      if (stand_in) part.push_back(&train_->examples[order[0]]);
      if (part.empty()) continue;
      micro.push_back(collate(part, pad_id_, pad_to_, max_seq_len_));
      if (stand_in) {
        micro.back().targets = micro.back().tokens = 0;
        continue;
      }
      targets += micro.back().targets;
      tokens += micro.back().tokens;
    }
  }
  core::TraceRange wait(core::Range::communication_wait);
  const std::vector<double> sums = ranks_.sum({double(targets), double(tokens)});
  targets = int64_t(sums[0]);
  tokens = int64_t(sums[1]);
  return micro;
}

void Trainer::train_step(int64_t epoch, const std::vector<size_t>& order, int64_t first) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<core::TraceRange> step_range(core::Range::step);  // the profiler's phases
  int64_t targets = 0, tokens = 0;
  const std::vector<Batch> micro = step_batches(order, first, targets, tokens);
  const double loss_scale = scaler_ ? scaler_->scale() : 1;
  const double lr = optimizer_->current_lr();
  SpikeGuard::Verdict verdict = SpikeGuard::Verdict::ok;
  std::string why;
  const detail::Step::Outcome outcome = step_->run(micro, targets, [&](double& loss, double& norm) {
    if (o_.inject) o_.inject(steps_done_ + 1, loss, norm);
    verdict = guard_.check(loss, norm, &why);
    return verdict == SpikeGuard::Verdict::ok;
  });
  step_range.reset();
  const int64_t step = ++steps_done_;
  context_.step = step;
  context_.epoch = epoch + 1;
  context_.step_in_epoch = step - epoch * steps_per_epoch_;
  context_.batch_size = tokens;
  context_.loss = outcome.loss;
  context_.learning_rate = lr;
  context_.step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& cb : o_.callbacks) cb->on_train_step_end(context_);
  report(epoch, outcome, verdict, why, loss_scale);
  if (verdict == SpikeGuard::Verdict::rollback) rollback(epoch);
  result_.losses.push_back(outcome.loss);
  result_.grad_norms.push_back(outcome.grad_norm);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  step_seconds_ += seconds;
  ++steps_timed_;
  if (step % o_.log_every == 0 || step == total_steps_)
    log_step(epoch, outcome, lr, tokens, seconds);
  const bool before_end = step < total_steps_;
  if (o_.eval_steps > 0 && step % o_.eval_steps == 0 && before_end) evaluate(step);
  if (o_.save_every > 0 && step % o_.save_every == 0) {
    if (before_end) save(step, o_.out + "/checkpoint-" + std::to_string(step));
    if (verdict == SpikeGuard::Verdict::ok) snapshot();
  }
}

// A skipped update's metrics event and log line (fp16 overflow, loss spike).
void Trainer::report(int64_t epoch, const detail::Step::Outcome& outcome,
                     SpikeGuard::Verdict verdict, const std::string& why, double loss_scale) {
  const int64_t step = steps_done_;
  if (scaler_) result_.loss_scales.push_back(loss_scale);
  if (outcome.overflow) {
    ++result_.overflows;
    const std::string event =
        format("inf/NaN gradients at loss scale %g: update skipped, loss scale halved to %g",
               loss_scale, scaler_->scale());
    metrics_->emit("loss_scale_overflow", loss_scale, step, epoch, event);
    log_(format("[finetune] step %lld: %s", (long long)step, event.c_str()));
  }
  for (const auto& [name, value] : step_->take_capture_scalars())
    metrics_->emit(name, value, step, epoch);
  if (verdict != SpikeGuard::Verdict::ok) {
    ++result_.spikes;
    metrics_->emit("spike", outcome.loss, step, epoch, "loss spike: " + why + "; update skipped");
    log_(format("[finetune] step %lld: loss spike (%s): update skipped", (long long)step,
                why.c_str()));
  }
}

// Back to the last good state, at half the learning rate.
void Trainer::rollback(int64_t epoch) {
  {
    NoGradGuard no_grad;
    std::vector<Tensor> held = held_params();
    for (size_t i = 0; i < held.size(); ++i) held[i].copy_(good_.params[i]);
  }
  optimizer_->load_state_dict(good_.optimizer);
  step_->reset_graphs();
  lr_scale_ /= 2;
  nn::LRSchedule base = detail::make_schedule(o_, warmup_, total_steps_);
  optimizer_->set_lr(nn::LRSchedule{[base, s = lr_scale_](int64_t at) { return base(at) * s; },
                                    base.description + " x " + std::to_string(lr_scale_)});
  ++result_.rollbacks;
  const std::string event = format(
      "%lld loss spikes in a row: rolled back to the last good checkpoint, learning rate x %g",
      (long long)o_.spike_rollback, lr_scale_);
  metrics_->emit("rollback", lr_scale_, steps_done_, epoch, event);
  log_("[finetune] step " + std::to_string(steps_done_) + ": " + event);
}

void Trainer::log_step(int64_t epoch, const detail::Step::Outcome& outcome, double lr,
                       int64_t tokens, double seconds) {
  const int64_t step = steps_done_;
  const double rate = seconds > 0 ? double(tokens) / seconds : 0;
  metrics_->emit("loss", outcome.loss, step, epoch);
  metrics_->emit("learning_rate", lr, step, epoch);
  metrics_->emit("grad_norm", outcome.grad_norm, step, epoch);
  metrics_->emit("tokens_per_second", rate, step, epoch);
  if (scaler_) metrics_->emit("loss_scale", scaler_->scale(), step, epoch);
  // The ETA from this run's mean step time (a resumed run counts only its own steps).
  const double eta = step_seconds_ / double(std::max<int64_t>(1, steps_timed_)) *
                     double(std::max<int64_t>(0, total_steps_ - step));
  log_(
      format("[finetune] step %lld/%lld epoch %lld: loss %.4f, lr %.3g, grad norm %.3f, "
             "%.0f tokens/s, ETA %s",
             (long long)step, (long long)total_steps_, (long long)epoch, outcome.loss, lr,
             outcome.grad_norm, rate, format_clock(eta).c_str()));
}

void Trainer::evaluate(int64_t step) {
  if (!eval_) return;
  EvalRecord r =  // ZeRO-3: one module's parameters gathered at a time, as in training
      zero3() ? detail::evaluate_zero3(*model_, zero_, *eval_, o_.batch_size, pad_id_, ranks_,
                                       parallel_.get())
      : parallel_
          ? detail::evaluate_parallel(*parallel_, *eval_, o_.batch_size, pad_id_, pad_to_, ranks_)
          : detail::evaluate_shared(*model_, *eval_, o_.batch_size, pad_id_, &ranks_);
  r.step = step;
  result_.evals.push_back(r);
  eval_log_.push_back(
      {{"step", step}, {"eval_loss", r.loss}, {"perplexity", r.perplexity}, {"tokens", r.targets}});
  if (ranks_.writes()) std::ofstream(o_.out + "/eval_log.json") << eval_log_.dump(2) << "\n";
  metrics_->emit("eval/loss", r.loss, step, 0);
  metrics_->emit("eval/perplexity", r.perplexity, step, 0);
  log_(format("[finetune] step %lld: eval loss %.4f, perplexity %.3f (%lld tokens)",
              (long long)step, r.loss, r.perplexity, (long long)r.targets));
}

void Trainer::save(int64_t step, const std::string& dir) {
  const detail::Checkpoint c{*model_, o_, lora_, *optimizer_, nullptr, ranks_.world(), pad_to_};
  if (!zero3() || parallel_ || o_.method != Method::full ||  // else one parameter at a time
      !detail::save_zero3_output(c, *zero_, ranks_.writes(), step, dir))
    with_full_parameters([&] { save_gathered(step, dir); });
  // A checkpoint of a --zero run: each rank's optimizer rows too (rank 0's trainer state holds
  // only its own), for --resume on any rank count.
  if (zero_ && dir != o_.out)
    detail::save_zero_state(dir, *zero_, detail::parameter_names(*model_, params_),
                            parallel_.get());
}

void Trainer::save_gathered(int64_t step, const std::string& dir) {
  const detail::Checkpoint c{
      *model_, o_, lora_, *optimizer_, scaler_ ? &*scaler_ : nullptr, ranks_.world(), pad_to_};
  if (parallel_)  // collective: the shards gathered
    return detail::save_parallel(*parallel_, c, step, dir, ranks_.writes());
  if (ranks_.writes()) detail::save_output(c, step, dir);
}

}  // namespace

Result run(const Options& options, const Data& train, const Data* eval,
           const std::function<void(const std::string&)>& log) {
  Trainer trainer(options, train, eval, log);  // set-up
  trainer.train();                             // the loop
  return trainer.finish();
}

}  // namespace zenith::finetune
