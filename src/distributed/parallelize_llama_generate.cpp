// tensor_parallel_generate: KV-cache decoding on a tensor-parallel LLaMA (see the header).
#include "distributed/parallelize_llama_generate.h"

#include <algorithm>
#include <set>

#include "zenith/autograd.h"

namespace zenith::distributed {

models::GenerationResult tensor_parallel_generate(models::Llama& model,
                                                  const TensorParallelPlan& plan,
                                                  const std::vector<int64_t>& prompt,
                                                  const models::GenerationConfig& config,
                                                  const std::function<void(int64_t)>& on_token) {
  const models::LlamaConfig& c = model.config();
  ZENITH_CHECK(!plan.tp.sequence_parallel,
               "[tensor parallel] generate: the plan uses sequence parallelism, which splits the "
               "sequence over the group; decode with a plan without it");
  ZENITH_CHECK(!prompt.empty(), "[generate] the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    ZENITH_CHECK(prompt[i] >= 0 && prompt[i] < c.vocab_size, "[generate] prompt token id ",
                 prompt[i], " at position ", i, " is outside the model's vocabulary [0, ",
                 c.vocab_size, ")");
  const auto prompt_len = int64_t(prompt.size());
  const int64_t context = c.max_position_embeddings;
  ZENITH_CHECK(prompt_len < context, "[generate] the prompt has ", prompt_len,
               " tokens, but the model's context (max_position_embeddings in config.json) is ",
               context, " tokens, so nothing can follow it; shorten the prompt");
  ZENITH_CHECK(config.max_new_tokens >= 0, "[generate] max_new_tokens must be >= 0, got ",
               config.max_new_tokens);
  models::TokenSampler sampler(config);  // the same seed on every rank: the same draws
  models::GenerationResult result;
  const int64_t budget = std::min(config.max_new_tokens, context - prompt_len);
  result.stop_reason = budget < config.max_new_tokens ? "context" : "max_new_tokens";
  if (budget == 0) return result;

  NoGradGuard no_grad;
  const bool was_training = model.training();
  model.eval();
  // This rank's key/value heads only.
  models::LlamaConfig local = c;
  local.num_key_value_heads /= plan.degree();
  models::KVCache cache(local, 1, prompt_len + budget);
  std::vector<int64_t> history = prompt;
  models::LlamaInput input;
  input.input_ids = Tensor::from_vector(prompt, {1, prompt_len});
  input.cache = &cache;
  input.last_position_only = true;
  const auto logits = [&] {  // [1, 1, V]: the ranks' vocabulary rows in order
    Tensor mine = model.forward(input).to(DType::f32).contiguous();
    return plan.degree() > 1 ? all_gather_along(mine, 2, plan.tp.group) : mine;
  };
  const std::set<int64_t> eos(config.eos_token_ids.begin(), config.eos_token_ids.end());
  Tensor next = logits();
  for (int64_t step = 0; step < budget; ++step) {
    std::vector<float> row = next.to_float_vector();
    const int64_t id = sampler.next(row, history);
    result.tokens.push_back(id);
    history.push_back(id);
    if (on_token) on_token(id);
    if (eos.count(id)) {
      result.stop_reason = "eos";
      break;
    }
    if (step + 1 == budget) break;
    input.input_ids = Tensor::from_vector(std::vector<int64_t>{id}, {1, 1});
    next = logits();
  }
  model.train(was_training);
  return result;
}

}  // namespace zenith::distributed
