// Generation with a KV cache (greedy and sampling, HF's logits processors) and perplexity.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "models/llama_decode.h"
#include "zenith/autograd.h"
#include "zenith/llama.h"

namespace zenith::models {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

void check_ids(const std::vector<int64_t>& ids, int64_t vocab, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i)
    ZENITH_CHECK(ids[i] >= 0 && ids[i] < vocab, "[generate] ", what, " token id ", ids[i],
                 " at position ", i, " is outside the model's vocabulary [0, ", vocab, ")");
}

// softmax(logits) in double; -inf entries get 0.
std::vector<double> softmax(const std::vector<float>& logits) {
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(double(logits[i] - top));
  for (double& x : p) x /= sum;
  return p;
}

// Evaluation mode while alive (no LoRA dropout), then the mode the model had.
class EvalScope {
 public:
  explicit EvalScope(nn::Cell& cell) : cell_(cell), was_training_(cell.training()) {
    cell_.set_train(false);
  }
  ~EvalScope() { cell_.set_train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  nn::Cell& cell_;
  bool was_training_;
};

Tensor ids_tensor(const std::vector<int64_t>& ids, size_t begin, size_t end) {
  return Tensor::from_vector(
      std::vector<int64_t>(ids.begin() + long(begin), ids.begin() + long(end)),
      {1, int64_t(end - begin)});
}

}  // namespace

// ---- sampling

TokenSampler::TokenSampler(const GenerationConfig& config) : config_(config), state_(config.seed) {
  ZENITH_CHECK(config.temperature >= 0 && std::isfinite(config.temperature),
               "[generate] temperature must be >= 0 (0: greedy), got ", config.temperature);
  ZENITH_CHECK(config.top_k >= 0, "[generate] top_k must be >= 0 (0: off), got ", config.top_k);
  ZENITH_CHECK(config.top_p > 0 && config.top_p <= 1, "[generate] top_p must be in (0, 1], got ",
               config.top_p);
  ZENITH_CHECK(config.repetition_penalty > 0,
               "[generate] repetition_penalty must be > 0 (1: off), got ",
               config.repetition_penalty);
}

int64_t TokenSampler::next(std::vector<float>& logits, const std::vector<int64_t>& history) {
  ZENITH_CHECK(!logits.empty(), "[generate] no logits to sample from");
  const auto v = int64_t(logits.size());
  // RepetitionPenaltyLogitsProcessor: each id seen so far, once.
  if (config_.repetition_penalty != 1) {
    const auto penalty = float(config_.repetition_penalty);
    for (int64_t id : std::set<int64_t>(history.begin(), history.end())) {
      if (id < 0 || id >= v) continue;
      float& s = logits[size_t(id)];
      s = s < 0 ? s * penalty : s / penalty;
    }
  }
  if (config_.temperature == 0)  // greedy: the first maximum, as torch.argmax
    return std::max_element(logits.begin(), logits.end()) - logits.begin();
  // TemperatureLogitsWarper, TopKLogitsWarper (ties with the k-th kept), TopPLogitsWarper.
  const auto temperature = float(config_.temperature);
  for (float& s : logits) s /= temperature;
  if (config_.top_k > 0 && config_.top_k < v) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (config_.top_k - 1), sorted.end(),
                     std::greater<float>());
    const float kth = sorted[size_t(config_.top_k - 1)];
    for (float& s : logits)
      if (s < kth) s = kMinusInf;
  }
  if (config_.top_p < 1) {
    // Ascending; drop tokens while the cumulative probability stays <= 1 - top_p, never the last.
    std::vector<size_t> order(logits.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return logits[a] < logits[b]; });
    const std::vector<double> p = softmax(logits);
    double cumulative = 0;
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      cumulative += p[order[i]];
      if (cumulative > 1 - config_.top_p) break;
      logits[order[i]] = kMinusInf;
    }
  }
  const std::vector<double> p = softmax(logits);
  // splitmix64 -> uniform [0, 1) with 53 bits
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  const double u = double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  double cumulative = 0;
  int64_t last = 0;
  for (int64_t i = 0; i < v; ++i) {
    if (p[size_t(i)] == 0) continue;
    last = i;
    cumulative += p[size_t(i)];
    if (u < cumulative) return i;
  }
  return last;  // rounding left u above the total
}

// ---- generation

int64_t generation_budget(const LlamaConfig& c, const std::vector<int64_t>& prompt,
                          const GenerationConfig& config) {
  ZENITH_CHECK(!prompt.empty(), "[generate] the prompt is empty");
  check_ids(prompt, c.vocab_size, "prompt");
  const auto prompt_len = int64_t(prompt.size());
  const int64_t context = c.max_position_embeddings;
  ZENITH_CHECK(prompt_len < context, "[generate] the prompt has ", prompt_len,
               " tokens, but the model's context (max_position_embeddings in config.json) is ",
               context, " tokens, so nothing can follow it; shorten the prompt");
  ZENITH_CHECK(config.max_new_tokens >= 0, "[generate] max_new_tokens must be >= 0, got ",
               config.max_new_tokens);
  TokenSampler check_settings(config);  // its constructor checks the sampling settings
  return std::min(config.max_new_tokens, context - prompt_len);
}

GenerationResult decode_tokens(const std::vector<int64_t>& prompt, int64_t budget,
                               const GenerationConfig& config,
                               const std::function<Tensor(const Tensor&)>& forward,
                               const std::function<void(int64_t)>& on_token) {
  TokenSampler sampler(config);
  GenerationResult result;
  result.stop_reason = budget < config.max_new_tokens ? "context" : "max_new_tokens";
  if (budget == 0) return result;
  std::vector<int64_t> history = prompt;
  Tensor logits = forward(ids_tensor(prompt, 0, prompt.size()));
  const std::set<int64_t> eos(config.eos_token_ids.begin(), config.eos_token_ids.end());
  for (int64_t step = 0; step < budget; ++step) {
    std::vector<float> row = logits.to_float_vector();  // [1, 1, V]
    const int64_t id = sampler.next(row, history);
    result.tokens.push_back(id);
    history.push_back(id);
    if (on_token) on_token(id);
    if (eos.count(id)) {
      result.stop_reason = "eos";
      break;
    }
    if (step + 1 == budget) break;
    logits = forward(Tensor::from_vector(std::vector<int64_t>{id}, {1, 1}));
  }
  return result;
}

GenerationResult generate(Llama& model, const std::vector<int64_t>& prompt,
                          const GenerationConfig& config,
                          const std::function<void(int64_t)>& on_token) {
  const int64_t budget = generation_budget(model.config(), prompt, config);
  if (budget == 0) return decode_tokens(prompt, budget, config, {}, on_token);
  NoGradGuard no_grad;
  EvalScope eval(model);
  KVCache cache(model.config(), 1, int64_t(prompt.size()) + budget);
  LlamaInput input;
  input.cache = &cache;
  input.last_position_only = true;
  const auto forward = [&](const Tensor& ids) {
    input.input_ids = ids;
    return model.forward(input);
  };
  return decode_tokens(prompt, budget, config, forward, on_token);
}

// ---- perplexity

PerplexityResult perplexity(Llama& model, const std::vector<int64_t>& ids, int64_t max_seq_len) {
  const LlamaConfig& c = model.config();
  const int64_t window = max_seq_len > 0 ? max_seq_len : c.max_position_embeddings;
  ZENITH_CHECK(window >= 2, "[perplexity] max_seq_len must be at least 2, got ", window);
  ZENITH_CHECK(window <= c.max_position_embeddings, "[perplexity] max_seq_len ", window,
               " is past the model's context (max_position_embeddings ", c.max_position_embeddings,
               ")");
  ZENITH_CHECK(ids.size() >= 2, "[perplexity] needs at least 2 tokens, got ", ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    ZENITH_CHECK(ids[i] >= 0 && ids[i] < c.vocab_size, "[perplexity] token id ", ids[i],
                 " at position ", i, " is outside the model's vocabulary [0, ", c.vocab_size, ")");
  NoGradGuard no_grad;
  EvalScope eval(model);
  double total = 0;
  int64_t count = 0;
  for (size_t start = 0; start + 1 < ids.size(); start += size_t(window - 1)) {
    const size_t end = std::min(start + size_t(window), ids.size());
    Tensor input = ids_tensor(ids, start, end);
    const auto predicted = int64_t(end - start - 1);
    total += causal_lm_loss(model.forward(input), input).item() * double(predicted);
    count += predicted;
  }
  const double nll = total / double(count);
  return {.nll = nll, .perplexity = std::exp(nll), .tokens = count};
}

}  // namespace zenith::models
