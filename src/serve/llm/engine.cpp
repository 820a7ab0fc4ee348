// The LLM engine's public face: submissions, cancellation, adapters and statistics under one
// mutex; the engine thread (engine_step.cpp) does the work.
#include "serve/llm/engine.h"

#include <cstdio>
#include <cstdlib>
#include <random>

#include "core/batch_invariant.h"
#include "core/time_slice.h"
#include "serve/llm/engine_state.h"
#include "zenith/autograd.h"
#include "zenith/context.h"
#include "zenith/error.h"
#include "zenith/gguf.h"
#include "zenith/hf.h"
#include "zenith/text.h"

namespace zenith::serve::llm {
namespace {

// vLLM's buckets (seconds), with finer ones at the low end for small models on a CPU.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0};
const std::vector<double> kItlBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                         0.15,  0.2,    0.3,   0.4,  0.5,   0.75, 1.0,   2.5};
const std::vector<double> kLatencyBuckets = {0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,  2.0,
                                             2.5,  5.0,  10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0};

Histogram histogram(const std::vector<double>& bounds) {
  Histogram h;
  h.bounds = bounds;
  h.counts.assign(bounds.size() + 1, 0);
  return h;
}

}  // namespace

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds.size() && value > bounds[i]) ++i;
  if (counts.size() < bounds.size() + 1) counts.resize(bounds.size() + 1);
  ++counts[i];
  sum += value;
  ++count;
}

Engine::Engine(std::shared_ptr<models::Llama> model, std::shared_ptr<text::Tokenizer> tokenizer,
               EngineOptions options)
    : state_(std::make_unique<State>()) {
  ZENITH_CHECK(model, "[llm engine] no model");
  State& s = *state_;
  s.model = std::move(model);
  s.tokenizer = std::move(tokenizer);
  s.options = std::move(options);
  const models::LlamaConfig& c = s.model->config();
  ZENITH_CHECK(
      s.options.max_batched_tokens > 0 && s.options.max_running > 0 && s.options.max_waiting >= 0,
      "[llm engine] max_batched_tokens and max_running must be positive");
  ZENITH_CHECK(s.options.max_step_cost == 0 || s.options.max_step_cost >= 1,
               "[llm engine] max_step_cost must be 0 (off) or at least 1, got ",
               s.options.max_step_cost);
  s.max_model_len = s.options.max_model_len > 0
                        ? std::min(s.options.max_model_len, c.max_position_embeddings)
                        : c.max_position_embeddings;
  if (s.options.eos_token_ids.empty() && s.tokenizer)
    for (int32_t id : s.tokenizer->eos_ids()) s.options.eos_token_ids.push_back(id);
  s.pool = std::make_unique<KvPool>(c, s.options.kv_cache_bytes, s.options.block_size,
                                    s.options.kv_cache_dtype);
  s.seed_state = std::random_device{}();
  s.stats.kv_blocks = s.pool->num_blocks();
  s.stats.block_size = s.pool->block_size();
  s.stats.time_to_first_token = histogram(kTtftBuckets);
  s.stats.inter_token_latency = histogram(kItlBuckets);
  s.stats.e2e_latency = histogram(kLatencyBuckets);
  s.stats.queue_time = histogram(kLatencyBuckets);
  s.model->set_train(false);
  if (const char* trace = std::getenv("ZENITH_ENGINE_TRACE")) s.trace_path = trace;
  // OpenMP's thread count is per thread: the engine's kernels run with its creator's.
  const int threads = context::get_num_threads();
  s.thread = std::thread([&s, threads] {
    context::set_num_threads(threads);
    // Its threads keep the cores busy while streams decode: a long slice lets the HTTP writer
    // that a sampled token wakes run at once (core/time_slice.h).
    core::use_long_time_slices();
    s.loop();
  });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

uint64_t Engine::submit(std::vector<int64_t> prompt, SamplingParams params,
                        std::function<void(const Event&)> on_event) {
  State& s = *state_;
  const models::LlamaConfig& c = s.model->config();
  if (prompt.empty()) throw RequestError("the prompt is empty", "prompt");
  for (int64_t id : prompt)
    if (id < 0 || id >= c.vocab_size)
      throw RequestError("prompt token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")",
                         "prompt");
  if (params.max_tokens < 1)
    throw RequestError("max_tokens must be at least 1, got " + std::to_string(params.max_tokens),
                       "max_tokens");
  const auto length = int64_t(prompt.size());
  if (length + params.max_tokens > s.max_model_len)
    throw RequestError("this model's maximum context length is " + std::to_string(s.max_model_len) +
                           " tokens; the request has " + std::to_string(length) +
                           " prompt tokens and max_tokens " + std::to_string(params.max_tokens),
                       "max_tokens");
  const int64_t bs = s.pool->block_size();
  if ((length + params.max_tokens + bs - 1) / bs > s.pool->num_blocks())
    throw RequestError("prompt + max_tokens (" + std::to_string(length + params.max_tokens) +
                           " tokens) exceed the KV cache (" +
                           std::to_string(s.pool->num_blocks() * bs) + " positions)",
                       "max_tokens");
  if (!params.stop.empty() && !s.tokenizer)
    throw RequestError("stop strings need the model's tokenizer", "stop");
  auto r = std::make_unique<Sequence>();
  r->prompt_tokens = length;
  r->tokens = std::move(prompt);
  r->on_event = std::move(on_event);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!params.adapter.empty()) {
    auto it = s.adapters.find(params.adapter);
    if (it == s.adapters.end())
      throw RequestError("the model '" + params.adapter + "' does not exist", "model", true);
    r->adapter = it->second;
  }
  if (s.waiting_count >= s.options.max_waiting)
    throw QueueFullError("the engine's queue is full (" + std::to_string(s.options.max_waiting) +
                         " requests waiting); retry later");
  uint64_t seed = params.seed ? *params.seed : (s.seed_state += 0x9E3779B97F4A7C15ULL);
  r->sampler = std::make_unique<RequestSampler>(params, seed);
  r->stream = std::make_unique<TextStream>(s.tokenizer.get(), r->tokens, params.stop);
  r->params = std::move(params);
  r->id = s.next_id++;
  r->arrived = Clock::now();
  const uint64_t id = r->id;
  s.submitted.push_back(std::move(r));
  ++s.waiting_count;
  s.wake.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->cancelled.insert(id);
  }
  state_->wake.notify_all();
}

void Engine::add_adapter(const std::string& name, const std::string& dir) {
  ZENITH_CHECK(!name.empty(), "[llm engine] an adapter needs a name");
  const models::LlamaConfig& c = state_->model->config();
  io::LoraAdapter adapter = models::read_lora_adapter(dir, c);  // a PEFT directory or a GGUF file
  models::check_lora_adapter(c, adapter, dir);
  auto weights = std::make_shared<AdapterWeights>();
  weights->name = name;
  weights->scaling = adapter.config.scaling();
  for (auto& [path, w] : adapter.modules) {
    ZENITH_CHECK(path != "lm_head" || !c.tie_word_embeddings, "[llm engine] ", dir,
                 ": adapts lm_head, which a model with tied embeddings does not have");
    weights->modules.emplace(
        path, std::make_pair(w.A.to(DType::f32).contiguous(), w.B.to(DType::f32).contiguous()));
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  weights->cache_key = name + "#" + std::to_string(++state_->adapters_loaded);
  state_->adapters[name] = std::move(weights);
}

bool Engine::remove_adapter(const std::string& name) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->adapters.erase(name) > 0;
}

std::vector<std::string> Engine::adapters() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::string> out;
  for (const auto& [name, w] : state_->adapters) out.push_back(name);
  return out;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

const models::LlamaConfig& Engine::config() const { return state_->model->config(); }
int64_t Engine::max_model_len() const { return state_->max_model_len; }
const std::shared_ptr<text::Tokenizer>& Engine::tokenizer() const { return state_->tokenizer; }
const std::vector<int64_t>& Engine::eos_token_ids() const { return state_->options.eos_token_ids; }

void Engine::State::loop() {
  core::BatchInvariantScope invariant(options.batch_invariant);
  NoGradGuard no_grad;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] {
        return stopping || !submitted.empty() || !cancelled.empty() || !waiting.empty() ||
               !running.empty();
      });
      if (stopping) break;
    }
    try {
      step();
      if (running.empty() && waiting.empty()) flush_trace();
    } catch (const std::exception& e) {
      // A failed forward pass ends every request in it; the engine goes on.
      for (auto& r : running) finish(*r, "error", e.what());
      running.clear();
    }
  }
  std::deque<std::unique_ptr<Sequence>> rest;
  {
    std::lock_guard<std::mutex> lock(mutex);
    rest.swap(submitted);
  }
  for (auto& r : rest) finish(*r, "abort");
  for (auto& r : waiting) finish(*r, "abort");
  for (auto& r : running) finish(*r, "abort");
  waiting.clear();
  running.clear();
  flush_trace();
}

void Engine::State::flush_trace() {
  if (trace.empty()) return;
  if (std::FILE* f = std::fopen(trace_path.c_str(), "a")) {
    std::fwrite(trace.data(), 1, trace.size(), f);
    std::fclose(f);
  }
  trace.clear();
}

}  // namespace zenith::serve::llm
