// One optimizer step of the fine-tuning loop (train/finetune.cpp): forward and backward of each
// micro-batch, the gradient norm (clipped), and the update when the caller accepts the step.
// Graph mode (--mode graph; eager steps run in train/finetune.cpp): the step captured once per
// batch shape as one graph (forward, loss, backward, clipping, AdamW) and replayed after; the code
// between the phases (the loss read, the spike guard) runs every step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/finetune.h"
#include "zenith/graph.h"

namespace zenith::finetune::detail {

// The model's input of a batch (its ids and attention mask), and its logits.
models::LlamaInput input_of(const Batch& b);
Tensor forward(models::Llama& model, const Batch& b);

class StepRunner {
 public:
  // log receives the capture lines and fallback reasons.
  StepRunner(models::Llama& model, std::vector<Tensor> params, nn::Optimizer& optimizer,
             double clip_grad_norm, std::function<void(const std::string&)> log);
  ~StepRunner();

  struct Outcome {
    double loss = 0, grad_norm = 0;
    bool updated = false;
  };
  // Runs forward and backward of `micro` (each micro-batch's mean loss weighted by its share of
  // `targets`, the step's learned labels), then asks `accept(loss, grad_norm)`; updates when it
  // says yes. The gradients are left for the caller's zero_grad().
  Outcome run(const std::vector<Batch>& micro, int64_t targets,
              const std::function<bool(double& loss, double& grad_norm)>& accept);
  // The figures of a capture the last step made (metrics.jsonl), once; empty otherwise.
  std::map<std::string, double> take_capture_scalars();
  // After the optimizer's state or the weights were replaced from outside (a rollback): the
  // compiled graphs are dropped and the next step captures anew.
  void reset_graphs();

 private:
  models::Llama& model_;
  std::vector<Tensor> params_;
  nn::Optimizer& optimizer_;
  double clip_;
  std::function<void(const std::string&)> log_;
  std::unique_ptr<graph::StepCompiler> compiler_;
};

}  // namespace zenith::finetune::detail
