// tensor_parallel_generate: KV-cache decoding on a tensor-parallel LLaMA (see the header).
#include "distributed/parallelize_llama_generate.h"

#include "models/llama_decode.h"
#include "zenith/autograd.h"

namespace zenith::distributed {

models::GenerationResult tensor_parallel_generate(models::Llama& model,
                                                  const TensorParallelPlan& plan,
                                                  const std::vector<int64_t>& prompt,
                                                  const models::GenerationConfig& config,
                                                  const std::function<void(int64_t)>& on_token) {
  ZENITH_CHECK(!plan.tp.sequence_parallel,
               "[tensor parallel] generate: the plan uses sequence parallelism, which splits the "
               "sequence over the group; decode with a plan without it");
  // The same checks, budget and loop as models::generate; the same seed on every rank gives the
  // same draws.
  const int64_t budget = models::generation_budget(model.config(), prompt, config);
  if (budget == 0) return models::decode_tokens(prompt, budget, config, {}, on_token);

  NoGradGuard no_grad;
  const bool was_training = model.training();
  model.eval();
  // This rank's key/value heads only.
  models::LlamaConfig local = model.config();
  local.num_key_value_heads /= plan.degree();
  models::KVCache cache(local, 1, int64_t(prompt.size()) + budget);
  models::LlamaInput input;
  input.cache = &cache;
  input.last_position_only = true;
  const auto forward = [&](const Tensor& ids) {  // [1, 1, V]: the ranks' vocabulary rows in order
    input.input_ids = ids;
    Tensor mine = model.forward(input).to(DType::f32).contiguous();
    return plan.degree() > 1 ? all_gather_along(mine, 2, plan.tp.group) : mine;
  };
  models::GenerationResult result =
      models::decode_tokens(prompt, budget, config, forward, on_token);
  model.train(was_training);
  return result;
}

}  // namespace zenith::distributed
