// The LLM serving engine: one thread owns the model and a paged KV pool and runs iterations —
// admit waiting requests under a token budget (long prompts prefilled in chunks), one packed
// forward pass over every running sequence, sample, stream, free what finished or was cancelled.
// Full KV blocks are shared between requests through a hash chain (prefix caching); when the
// pool is full the youngest request is preempted and later recomputed. With batch_invariant on,
// the kernels reduce each row in an order independent of the batch, so a request's tokens and
// logits at temperature 0 do not depend on what it ran with.
//
//   Engine engine(model, tokenizer, {.kv_cache_bytes = 64 << 20});
//   uint64_t id = engine.submit(prompt_ids, {.max_tokens = 32, .temperature = 0},
//                               [](const Event& e) { std::cout << e.text; });
//   engine.cancel(id);   // frees its slot and blocks within one engine step
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "zenith/llama.h"

namespace zenith::text {
class Tokenizer;
}

namespace zenith::serve::llm {

class TokenConstraint;  // serve/llm/constraint.h: grammar state of one sequence (may be null)

struct SamplingParams {
  int64_t max_tokens = 16;       // tokens generated at most (the context may end it sooner)
  double temperature = 1.0;      // 0: greedy
  double top_p = 1.0;            // 1: off
  int64_t top_k = 0;             // 0: off
  std::optional<uint64_t> seed;  // none: drawn from the engine's own sequence
  double presence_penalty = 0, frequency_penalty = 0;  // OpenAI's, on generated tokens
  double repetition_penalty = 1.0;                     // HF's, on prompt and generated tokens
  std::vector<std::string> stop;                       // stop strings: never part of the text
  std::vector<int64_t> stop_token_ids;  // extra ids that end generation (besides eos)
  bool ignore_eos = false;
  bool logprobs = false;                        // each generated token's log-probability
  int top_logprobs = 0;                         // and this many of the most likely tokens (0..20)
  std::shared_ptr<TokenConstraint> constraint;  // JSON schema / tools; null: free text
  std::string adapter;  // a LoRA adapter added with add_adapter; "": the base model
};

// One generated token's log-probability (a log-softmax of the model's raw logits, before
// penalties and temperature) and the most likely alternatives, best first.
struct TokenLogprob {
  int64_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int64_t, float>> top;
};

// What a request's callback receives (on the engine thread: it must return quickly): an event
// per sampled token, the last with finished = true. Text is only emitted once it can no longer
// become part of a stop string (nor of an incomplete UTF-8 character): a token whose text is
// held back gives an event with empty text and no tokens, released with a later one.
struct Event {
  std::string text;                    // new text since the previous event
  std::vector<int64_t> tokens;         // the ids whose text this event completes
  std::vector<TokenLogprob> logprobs;  // for tokens whose text is emitted (with logprobs on)
  bool finished = false;
  // "stop" (eos, a stop token or string), "length" (max_tokens or the context), "abort"
  // (cancelled or the engine shut down), "error" (see error).
  std::string finish_reason;
  std::string stop;  // the stop string that ended it, if one did
  std::string error;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// submit() when max_waiting requests already wait: the HTTP layer answers 429.
struct QueueFullError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A request the engine cannot run (too long for the context, unknown adapter, bad settings):
// the HTTP layer answers 400 (404 for an unknown adapter: see unknown_adapter).
struct RequestError : std::runtime_error {
  RequestError(const std::string& message, std::string param, bool unknown_adapter = false)
      : std::runtime_error(message), param(std::move(param)), unknown_adapter(unknown_adapter) {}
  std::string param;  // the OpenAI request field at fault ("max_tokens", "model", ...)
  bool unknown_adapter;
};

struct EngineOptions {
  int64_t kv_cache_bytes = 256ll << 20;  // the KV pool's size (K and V, every layer)
  int64_t block_size = 16;               // positions per KV block
  // The KV pool's element: f32, or bf16 / f16 (half the bytes per position, so twice the tokens
  // in kv_cache_bytes; attention widens them exactly as it reads, computing in float32).
  DType kv_cache_dtype = DType::f32;
  // Tokens per engine step: the chunked-prefill budget. A step with a full chunk takes about
  // budget / running-streams times a decode step, so a small budget keeps streams' inter-token
  // latency even while a long prompt is prefilled; a large one prefills faster.
  int64_t max_batched_tokens = 64;
  // While any sequence decodes, a step's prefill tokens are capped so that the step takes at
  // most this many times a decode-only step, less what the longest-waiting stream's gap already
  // took (medians of recent steps per prefill count: step_costs.h), which keeps running
  // streams' inter-token latency even while a long prompt arrives. Nothing decoding: the full
  // budget. 0: always the full budget.
  double max_step_cost = 2.0;
  int64_t max_running = 64;   // sequences per step
  int64_t max_waiting = 256;  // queued requests; more: QueueFullError
  bool prefix_caching = true;
  bool batch_invariant = true;  // row-order-independent kernels (see the header comment)
  // Ids that end generation; empty: the tokenizer's eos ids (generation_config.json's list).
  std::vector<int64_t> eos_token_ids;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
};

// A histogram as Prometheus exposes it: counts[i] observations <= bounds[i] (not cumulative;
// the last entry counts those above every bound).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  uint64_t count = 0;
  void observe(double value);
};

// For /metrics (vLLM's names: num_requests_running, kv_cache_usage_perc, ...).
struct EngineStats {
  int64_t running = 0, waiting = 0;
  double kv_cache_usage = 0;  // used blocks / all blocks, 0..1
  int64_t kv_blocks = 0, block_size = 0;
  // Prompt tokens of requests that got their first token (cached ones included), tokens
  // generated (eos included).
  uint64_t prompt_tokens = 0, generation_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // in tokens, as vLLM counts them
  uint64_t steps = 0;
  std::map<std::string, uint64_t> finished;                                     // by finish_reason
  Histogram time_to_first_token, inter_token_latency, e2e_latency, queue_time;  // seconds
};

class Engine {
 public:
  // `tokenizer` may be null: events then carry ids and no text, and stop strings are refused.
  Engine(std::shared_ptr<models::Llama> model, std::shared_ptr<text::Tokenizer> tokenizer,
         EngineOptions options = {});
  ~Engine();  // finishes every request with "abort" and joins the engine thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; `on_event` runs on the engine thread. Throws QueueFullError or
  // RequestError (prompt + max_tokens over the context, an empty prompt, bad ids or settings).
  uint64_t submit(std::vector<int64_t> prompt, SamplingParams params,
                  std::function<void(const Event&)> on_event);
  // Ends a request ("abort"); its blocks are freed within one engine step. Unknown ids: no-op.
  void cancel(uint64_t id);

  // A PEFT adapter directory under `name` (replacing one of that name); requests naming it
  // run in the same batches as the others. Errors name the directory and the tensor.
  void add_adapter(const std::string& name, const std::string& dir);
  // Requests already running with it finish with it. Returns false for an unknown name.
  bool remove_adapter(const std::string& name);
  std::vector<std::string> adapters() const;

  EngineStats stats() const;
  const models::LlamaConfig& config() const;
  int64_t max_model_len() const;
  const std::shared_ptr<text::Tokenizer>& tokenizer() const;
  const std::vector<int64_t>& eos_token_ids() const;

  struct State;  // serve/llm/engine_state.h

 private:
  std::unique_ptr<State> state_;
};

}  // namespace zenith::serve::llm
