#include "train/finetune_step.h"

#include "core/trace_range.h"
#include "zenith/optim.h"

namespace zenith::finetune::detail {

models::LlamaInput input_of(const Batch& b) {
  models::LlamaInput input;
  input.input_ids = b.input_ids;
  input.attention_mask = b.attention_mask;
  return input;
}

Tensor forward(models::Llama& model, const Batch& b) { return model.forward(input_of(b)); }

StepRunner::StepRunner(models::Llama& model, std::vector<Tensor> params, nn::Optimizer& optimizer,
                       double clip_grad_norm, std::function<void(const std::string&)> log)
    : model_(model),
      params_(std::move(params)),
      optimizer_(optimizer),
      clip_(clip_grad_norm),
      log_(std::move(log)) {}

StepRunner::~StepRunner() = default;

void StepRunner::reset_graphs() { compiler_.reset(); }

std::map<std::string, double> StepRunner::take_capture_scalars() {
  if (!compiler_) return {};
  std::unique_ptr<graph::CaptureReport> report = compiler_->take_new_capture();
  return report ? report->scalars() : std::map<std::string, double>{};
}

StepRunner::Outcome StepRunner::run(const std::vector<Batch>& micro, int64_t targets,
                                    const std::function<bool(double&, double&)>& accept) {
  Outcome out;
  if (!compiler_) {
    std::vector<std::pair<std::string, Tensor>> state = model_.named_parameters();
    for (auto& [name, t] : optimizer_.state_dict()) state.push_back({"optimizer." + name, t});
    compiler_ = std::make_unique<graph::StepCompiler>(std::move(state), &optimizer_,
                                                      graph::Options{.log = log_});
  }
  // Each micro-batch's weight is an input of the graph, not a constant frozen at capture.
  std::vector<Tensor> inputs, weights;
  for (const Batch& b : micro) {
    if (b.targets == 0) continue;
    weights.push_back(Tensor::scalar(double(b.targets) / double(targets)));
    inputs.insert(inputs.end(), {b.input_ids, b.attention_mask, b.labels, weights.back()});
  }
  graph::StepRun run = compiler_->begin(inputs, "finetune");
  size_t w = 0;
  for (const Batch& b : micro) {
    if (b.targets == 0) continue;
    const Tensor& weight = weights[w++];
    // Each phase marks its range for the profiler, as the eager step does (core/trace_range.h;
    // a replay marks the phase as the range its capture began).
    Tensor loss = run.phase([&] {
      core::TraceRange range(core::Range::forward);
      return std::vector<Tensor>{
          ops::mul(models::causal_lm_loss(forward(model_, b), b.labels), weight)};
    })[0];
    out.loss += loss.item();
    run.phase([&] {
      core::TraceRange range(core::Range::backward);
      loss.backward();
      return std::vector<Tensor>{};
    });
  }
  out.grad_norm =
      run.phase([&] {
           core::TraceRange range(core::Range::optimizer);
           return std::vector<Tensor>{nn::clip_grad_norm_ops(params_, clip_ > 0 ? clip_ : 1e300)};
         })[0]
          .item();
  out.updated = accept(out.loss, out.grad_norm);
  if (!out.updated) return out;  // the run ends unfinished: a replay is dropped, a capture redone
  run.phase([&] {
    core::TraceRange range(core::Range::optimizer);
    optimizer_.step();
    return std::vector<Tensor>{};
  });
  run.finish();
  return out;
}

}  // namespace zenith::finetune::detail
