// One optimizer step of zenith finetune, in the four calls of Model::train_step (model.cpp):
// zero the gradients, forward + loss and backward of each micro-batch, then the update, here
// after the gradient norm (clipped) and the caller's verdict on the step (the spike guard).
// Eager mode (pynative) runs the definition; graph mode captures it once per batch shape as one
// graph and replays it, the code between phases (the loss read, the verdict) running every step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/float64_gradients.h"
#include "train/ranks.h"
#include "zenith/finetune.h"
#include "zenith/graph.h"
#include "zenith/loss_scaler.h"

namespace zenith::distributed {
class ZeroOptimizer;
class ParallelLlama;
}  // namespace zenith::distributed

namespace zenith::finetune::detail {

// The model's input of a batch (its ids and attention mask), and its logits.
models::LlamaInput input_of(const Batch& b);
Tensor forward(models::Llama& model, const Batch& b);

// How a step runs: its clipping, and what eager mode adds (graph mode captures one process
// without loss scaling: run() refuses the rest).
struct StepSettings {
  double clip_grad_norm = 1.0;  // 0: off (the norm is still measured)
  bool graph = false;
  // Eager only: the ranks whose losses and gradients are summed, fp16's loss scaler (may be
  // null), LoRA's float64 gradient sums (Float64Gradients), and the test hook on gradients.
  const Ranks* ranks = nullptr;
  nn::DynamicLossScaler* scaler = nullptr;
  bool float64_sums = false;
  std::function<void(const std::vector<Tensor>& params)> inject_gradients;
  // --zero: the ranks' gradients reduce-scattered, clipped and applied by ZeRO (its inner
  // optimizer is the step's optimizer, over this rank's rows); null: summed as DDP does. At
  // stage 3 the forward runs through distributed::zero3_llama_loss and every micro-batch runs,
  // one without learned labels too (each rank must take part in every gather).
  std::shared_ptr<distributed::ZeroOptimizer> zero;
  // --tensor-parallel/--pipeline-parallel: one batch's forward, backward, gradient sums and
  // global norm run by ParallelLlama (its loss token-weighted over the micro-batches and data
  // ranks: one process's mean over the step's learned labels).
  distributed::ParallelLlama* parallel = nullptr;
};

class Step {
 public:
  // log receives graph mode's capture lines and fallback reasons.
  Step(models::Llama& model, std::vector<Tensor> params, nn::Optimizer& optimizer,
       StepSettings settings, std::function<void(const std::string&)> log);
  ~Step();

  struct Outcome {
    double loss = 0;       // the step's mean loss over its learned labels (every rank's)
    double grad_norm = 0;  // NaN when fp16 gradients overflowed
    bool updated = false;
    bool overflow = false;  // fp16: inf/NaN gradients, the update skipped, the scale halved
  };
  // The step over `micro` (each micro-batch's mean loss weighted by its share of `targets`, the
  // step's learned labels over every rank): updates when accept(loss, grad_norm) says yes
  // (it may change the values it is shown: the tests' fault injection).
  Outcome run(const std::vector<Batch>& micro, int64_t targets,
              const std::function<bool(double& loss, double& grad_norm)>& accept);
  // The figures of a capture the last step made (metrics.jsonl), once; empty otherwise.
  std::map<std::string, double> take_capture_scalars();
  // After the optimizer's state or the weights were replaced from outside (a rollback): the
  // compiled graphs are dropped and the next step captures anew.
  void reset_graphs();

 private:
  Outcome run_parallel(const std::vector<Batch>& micro, int64_t targets,
                       const std::function<bool(double&, double&)>& accept);
  double zero3_tensor_parallel_step(const Batch& b, int64_t targets);
  graph::StepRun begin(const std::vector<Batch>& micro, const std::vector<Tensor>& weights);
  Tensor forward_loss(const Batch& b, const Tensor& weight, int64_t targets);
  void backward(const Tensor& loss);
  double sum_over_ranks(double loss);
  double clip(graph::StepRun& run);
  void update(graph::StepRun& run);

  models::Llama& model_;
  std::vector<Tensor> params_;
  nn::Optimizer& optimizer_;
  StepSettings settings_;
  std::function<void(const std::string&)> log_;
  std::optional<Float64Gradients> float64_;
  std::unique_ptr<graph::StepCompiler> compiler_;
};

}  // namespace zenith::finetune::detail
