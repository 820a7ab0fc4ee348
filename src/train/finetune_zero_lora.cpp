#include "train/finetune_zero_lora.h"

#include <functional>

#include "distributed/parallelize_llama.h"
#include "distributed/zero_llama.h"
#include "models/llama_layers.h"
#include "models/llama_loss.h"
#include "zenith/error.h"

namespace zenith::finetune::detail {
namespace {

// The ZeRO parameters of `module`: its trainable ones (the frozen ones are whole everywhere).
std::vector<size_t> trainable_indices(const distributed::ZeroOptimizer& zero,
                                      const nn::Cell& module) {
  std::vector<size_t> out;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.requires_grad()) continue;
    const int i = zero.index_of(p);
    ZENITH_CHECK(i >= 0, "[finetune] parameter '", name, "' of ", module.type_name(),
                 " is trainable but not among the ZeRO optimizer's parameters");
    out.push_back(size_t(i));
  }
  return out;
}

// fn(x), through ZeRO-3 when `module` has trainable parameters; a frozen module runs as is.
Tensor through(const std::shared_ptr<distributed::ZeroOptimizer>& zero, const nn::Cell& module,
               std::function<Tensor(const Tensor&)> fn, const Tensor& x) {
  std::vector<size_t> params = trainable_indices(*zero, module);
  if (params.empty()) return fn(x);
  return distributed::sharded_forward(zero, std::move(params), std::move(fn), x);
}

}  // namespace

bool has_frozen_parameters(const models::Llama& model) {
  for (const auto& [name, p] : model.named_parameters())
    if (!p.requires_grad()) return true;
  return false;
}

namespace {

// The decoder walked module by module (a module with trainable parameters through ZeRO-3), then
// head(final norm output), through ZeRO-3 too when lm_head has trainable parameters.
Tensor lora_walk(models::Llama& model, const std::shared_ptr<distributed::ZeroOptimizer>& zero,
                 const Tensor& input_ids, const Tensor& attention_mask,
                 std::function<Tensor(const Tensor&)> head) {
  const models::LlamaConfig& c = model.config();
  ZENITH_CHECK(c.rope_scaling.type == models::RopeScaling::Type::none,
               "[finetune] --zero 3 with --method lora: rope scaling is not supported");
  std::shared_ptr<models::detail::DecoderCell> decoder;
  for (const auto& [name, cell] : model.named_children())
    if (name == "model") decoder = std::dynamic_pointer_cast<models::detail::DecoderCell>(cell);
  ZENITH_CHECK(decoder, "[finetune] the model has no LlamaModel under 'model'");
  const Tensor x = distributed::llama_hidden_by_module(
      c, *decoder, input_ids, attention_mask,
      [&zero](const nn::Cell& module, std::function<Tensor(const Tensor&)> fn, const Tensor& h) {
        return through(zero, module, std::move(fn), h);
      });
  std::vector<size_t> head_params;
  for (const auto& [name, cell] : model.named_children())
    if (name == "lm_head") head_params = trainable_indices(*zero, *cell);
  if (head_params.empty()) return head(x);
  return distributed::sharded_forward(zero, std::move(head_params), std::move(head), x);
}

}  // namespace

Tensor zero3_lora_loss(models::Llama& model,
                       const std::shared_ptr<distributed::ZeroOptimizer>& zero,
                       const Tensor& input_ids, const Tensor& attention_mask, const Tensor& labels,
                       double weight, bool has_targets) {
  // The output layer: under LoRA frozen (an adapter on lm_head is trained through ZeRO too).
  models::Llama* m = &model;
  return lora_walk(model, zero, input_ids, attention_mask,
                   [m, labels, weight, has_targets](const Tensor& h) {
                     Tensor logits = m->head(h);
                     return has_targets ? ops::mul(models::causal_lm_loss(logits, labels), weight)
                                        : ops::mul(ops::sum(logits), 0.0);
                   });
}

Tensor zero3_tensor_parallel_lora_loss(models::Llama& model,
                                       const distributed::TensorParallelPlan& plan,
                                       const std::shared_ptr<distributed::ZeroOptimizer>& zero,
                                       const Tensor& input_ids, const Tensor& attention_mask,
                                       const Tensor& labels, double weight, bool has_targets) {
  // The output layer vocabulary-parallel and frozen (parallelize_llama refuses an adapter on it).
  models::Llama* m = &model;
  return lora_walk(
      model, zero, input_ids, attention_mask,
      [m, plan, labels, weight, has_targets](const Tensor& h) {
        if (has_targets)
          return ops::mul(distributed::tensor_parallel_head_loss(*m, plan, h, labels), weight);
        Tensor whole = plan.tp.sequence_parallel
                           ? distributed::gather_sequence(h, 1, plan.tp.group)
                           : distributed::copy_to_tensor_parallel(h, plan.tp.group);
        return ops::mul(ops::sum(ops::linear(whole, m->head_parameters().front())), 0.0);
      });
}

}  // namespace zenith::finetune::detail
