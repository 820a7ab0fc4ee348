#include "train/finetune_step.h"

#include <cmath>

#include "core/trace_range.h"
#include "distributed/parallelize_llama_train.h"
#include "distributed/zero.h"
#include "distributed/zero_llama.h"
#include "models/llama_loss.h"
#include "train/finetune_zero.h"
#include "train/finetune_zero_lora.h"
#include "zenith/optim.h"

namespace zenith::finetune::detail {

models::LlamaInput input_of(const Batch& b) {
  models::LlamaInput input;
  input.input_ids = b.input_ids;
  input.attention_mask = b.attention_mask;
  return input;
}

Tensor forward(models::Llama& model, const Batch& b) { return model.forward(input_of(b)); }

Step::Step(models::Llama& model, std::vector<Tensor> params, nn::Optimizer& optimizer,
           StepSettings settings, std::function<void(const std::string&)> log)
    : model_(model),
      params_(std::move(params)),
      optimizer_(optimizer),
      settings_(std::move(settings)),
      log_(std::move(log)) {
  if (settings_.float64_sums && !settings_.graph) float64_.emplace(params_);
  if (settings_.graph) settings_.inject_gradients = nullptr;  // gradients live in the graph
}

Step::~Step() = default;

void Step::reset_graphs() { compiler_.reset(); }

std::map<std::string, double> Step::take_capture_scalars() {
  if (!compiler_) return {};
  std::unique_ptr<graph::CaptureReport> report = compiler_->take_new_capture();
  return report ? report->scalars() : std::map<std::string, double>{};
}

Step::Outcome Step::run(const std::vector<Batch>& micro, int64_t targets,
                        const std::function<bool(double&, double&)>& accept) {
  if (settings_.zero)
    settings_.zero->zero_grad();
  else
    optimizer_.zero_grad();
  // Each micro-batch's weight in the step's loss: in graph mode an input of the graph, not a
  // constant frozen at capture.
  if (settings_.parallel) return run_parallel(micro, targets, accept);
  std::vector<Tensor> weights;
  for (const Batch& b : micro)
    if (b.targets > 0) weights.push_back(Tensor::scalar(double(b.targets) / double(targets)));
  graph::StepRun run = begin(micro, weights);
  Outcome out;
  size_t w = 0;
  const bool zero3 = settings_.zero && settings_.zero->stage() == 3;
  for (const Batch& b : micro) {
    if (b.targets == 0 && !zero3) continue;
    const Tensor weight = b.targets > 0 ? weights[w++] : Tensor::scalar(0.0);
    Tensor loss =
        run.phase([&] { return std::vector<Tensor>{forward_loss(b, weight, targets)}; })[0];
    run.phase([&] {
      backward(loss);
      return std::vector<Tensor>{};
    });
    out.loss += loss.item();
  }
  out.loss = sum_over_ranks(out.loss);
  // The profiler's optimizer phase: in eager mode the rest of the step, in graph mode each of
  // its two phases (the gradient norm, the update), as a replay marks them.
  std::optional<core::TraceRange> optimizer_range;
  if (!settings_.graph) optimizer_range.emplace(core::Range::optimizer);
  if (settings_.inject_gradients) settings_.inject_gradients(params_);
  // fp16: inf/NaN in the (summed, so every rank's same) gradients skips the update.
  out.overflow = settings_.scaler && !settings_.scaler->unscale_and_update(params_);
  if (out.overflow) {
    out.grad_norm = NAN;
    return out;
  }
  out.grad_norm = clip(run);
  out.updated = accept(out.loss, out.grad_norm);
  if (!out.updated) return out;  // graph mode: the run ends unfinished, a capture is redone
  update(run);
  run.finish();
  return out;
}

graph::StepRun Step::begin(const std::vector<Batch>& micro, const std::vector<Tensor>& weights) {
  if (!settings_.graph) return graph::StepRun::eager();
  if (!compiler_) {
    std::vector<std::pair<std::string, Tensor>> state = model_.named_parameters();
    for (auto& [name, t] : optimizer_.state_dict()) state.push_back({"optimizer." + name, t});
    compiler_ = std::make_unique<graph::StepCompiler>(std::move(state), &optimizer_,
                                                      graph::Options{.log = log_});
  }
  std::vector<Tensor> inputs;
  size_t w = 0;
  for (const Batch& b : micro)
    if (b.targets > 0)
      inputs.insert(inputs.end(), {b.input_ids, b.attention_mask, b.labels, weights[w++]});
  return compiler_->begin(inputs, "finetune");
}

// Model parallelism: the step's one batch of this data rank (check_options refuses
// accumulation) through ParallelLlama, which splits it into its pipeline micro-batches, each
// weighted by its share of the step's `targets` (the learned labels over every data rank).
Step::Outcome Step::run_parallel(const std::vector<Batch>& micro, int64_t targets,
                                 const std::function<bool(double&, double&)>& accept) {
  ZENITH_CHECK(micro.size() == 1, "[finetune] model parallelism takes one batch a step, got ",
               micro.size());
  Outcome out;
  const auto& zero = settings_.zero;
  if (zero && zero->stage() == 3)  // tensor parallel x ZeRO-3: each module gathered in turn
    out.loss = zero3_tensor_parallel_step(micro[0], targets);
  else
    out.loss = settings_.parallel->forward_backward(micro[0].input_ids, micro[0].labels, targets);
  core::TraceRange range(core::Range::optimizer);
  const double max_norm = settings_.clip_grad_norm > 0 ? settings_.clip_grad_norm : 1e300;
  // --zero: the data ranks' gradients reduce-scattered into each shard's rows by ZeRO.
  out.grad_norm =
      zero ? zero->clip_grad_norm(max_norm, zero_norm_layout(*settings_.parallel, params_))
           : settings_.parallel->clip_grad_norm(max_norm);
  out.updated = accept(out.loss, out.grad_norm);
  if (out.updated && zero) zero->step();
  if (out.updated && !zero) optimizer_.step();
  return out;
}

// --zero 3 --tensor-parallel: this data rank's batch (a stand-in without learned labels too:
// every rank takes part in each gather), weighted by its share of the step's `targets`, through
// the module-by-module walk; the step's loss summed over the data ranks.
double Step::zero3_tensor_parallel_step(const Batch& b, int64_t targets) {
  Tensor loss;
  {
    core::TraceRange range(core::Range::forward);
    // LoRA: the frozen base's tensor shards whole on every rank, the adapters through ZeRO-3.
    loss = (has_frozen_parameters(model_) ? zero3_tensor_parallel_lora_loss
                                          : distributed::zero3_tensor_parallel_llama_loss)(
        model_, settings_.parallel->plan(), settings_.zero, b.input_ids, b.attention_mask, b.labels,
        targets > 0 ? double(b.targets) / double(targets) : 0.0, b.targets > 0);
  }
  backward(loss);
  core::TraceRange wait(core::Range::communication_wait);
  // Partial gradients (sequence parallel: the norms'; LoRA: the unsplit factors) summed over
  // the tensor group.
  distributed::zero3_tensor_parallel_sync_gradients(model_, settings_.parallel->plan(),
                                                    *settings_.zero);
  return settings_.ranks->sum({loss.item()})[0];
}

// The micro-batch's summed loss over the step's learned labels (over every rank): the gradient
// of the mean over all of them, as one batch of the combined examples gives, once the ranks'
// gradients are summed.
Tensor Step::forward_loss(const Batch& b, const Tensor& weight, int64_t targets) {
  core::TraceRange range(core::Range::forward);
  if (settings_.zero && settings_.zero->stage() == 3)  // LoRA: the frozen base whole everywhere
    return (has_frozen_parameters(model_) ? zero3_lora_loss : distributed::zero3_llama_loss)(
        model_, settings_.zero, b.input_ids, b.attention_mask, b.labels,
        targets > 0 ? double(b.targets) / double(targets) : 0.0, b.targets > 0);
  if (settings_.graph)  // the weight is the graph's input: a replay follows each step's targets
    return ops::mul(models::causal_lm_loss(forward(model_, b), b.labels), weight);
  // Eager: the loss in chunks of positions, the [B, T, V] logits never whole
  // (models/llama_loss.cpp); the head's backward runs here, the layers' in backward().
  return models::causal_lm_loss_over(model_, input_of(b), b.labels, double(targets));
}

void Step::backward(const Tensor& loss) {
  core::TraceRange range(core::Range::backward);
  ops::WeightGradScope sums(float64_ ? &*float64_ : nullptr);
  (settings_.scaler ? settings_.scaler->scale_loss(loss) : loss).backward();
}

// Eager mode's data parallelism: the loss and the gradients summed over the ranks.
double Step::sum_over_ranks(double loss) {
  if (settings_.graph) return loss;  // one process
  core::TraceRange wait(core::Range::communication_wait);
  const Ranks& ranks = *settings_.ranks;
  loss = ranks.sum({loss})[0];
  if (float64_) float64_->finish();
  if (!settings_.zero) ranks.sum_gradients(params_, float64_ ? DType::f64 : DType::f32);
  return loss;
}

// The global gradient norm, clipped to clip_grad_norm: eager mode sums the squares in float64
// (nn::clip_grad_norm), graph mode with ops the graph holds (nn::clip_grad_norm_ops).
double Step::clip(graph::StepRun& run) {
  const double max_norm = settings_.clip_grad_norm > 0 ? settings_.clip_grad_norm : 1e300;
  if (settings_.zero) return settings_.zero->clip_grad_norm(max_norm);
  if (!settings_.graph) return nn::clip_grad_norm(params_, max_norm);
  return run
      .phase([&] {
        core::TraceRange range(core::Range::optimizer);
        return std::vector<Tensor>{nn::clip_grad_norm_ops(params_, max_norm)};
      })[0]
      .item();
}

void Step::update(graph::StepRun& run) {
  run.phase([&] {
    std::optional<core::TraceRange> range;
    if (settings_.graph) range.emplace(core::Range::optimizer);
    if (settings_.zero)
      settings_.zero->step();
    else
      optimizer_.step();
    return std::vector<Tensor>{};
  });
}

}  // namespace zenith::finetune::detail
