// The engine's insides, shared by engine.cpp (the API and the thread) and engine_step.cpp (one
// iteration: schedule, forward, sample, stream).
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "serve/llm/engine.h"
#include "serve/llm/kv_pool.h"
#include "serve/llm/sampling.h"
#include "serve/llm/step_costs.h"
#include "serve/llm/step_store.h"
#include "serve/llm/text_stream.h"

namespace zenith::serve::llm {

using Clock = std::chrono::steady_clock;

struct Sequence {
  uint64_t id = 0;
  SamplingParams params;
  std::function<void(const Event&)> on_event;
  std::shared_ptr<const AdapterWeights> adapter;  // null: the base model
  int64_t prompt_tokens = 0;
  std::vector<int64_t> tokens;         // prompt, then generated ids
  std::vector<int64_t> blocks;         // block table
  std::vector<uint64_t> block_hashes;  // chain hashes of the blocks published or looked up
  int64_t computed = 0;                // positions whose keys and values are in the blocks
  int64_t cached_tokens = -1;  // prefix-cache hit of the first admission (-1: not admitted yet)
  std::unique_ptr<RequestSampler> sampler;
  std::unique_ptr<TextStream> stream;
  std::vector<TokenLogprob> pending_logprobs;  // generated tokens not yet released with text
  std::vector<int64_t> pending_tokens;
  Clock::time_point arrived, scheduled, last_token;
  bool has_first_token = false, was_scheduled = false;
  int64_t generated() const { return int64_t(tokens.size()) - prompt_tokens; }
};

struct Engine::State {
  std::shared_ptr<models::Llama> model;
  std::shared_ptr<text::Tokenizer> tokenizer;
  EngineOptions options;
  int64_t max_model_len = 0;
  std::unique_ptr<KvPool> pool;

  mutable std::mutex mutex;  // guards the members below it and stats
  std::condition_variable wake;
  std::deque<std::unique_ptr<Sequence>> submitted;  // not yet seen by the engine thread
  std::set<uint64_t> cancelled;
  std::map<std::string, std::shared_ptr<const AdapterWeights>> adapters;
  uint64_t next_id = 1;
  uint64_t adapters_loaded = 0;
  uint64_t seed_state = 0;
  int64_t waiting_count = 0;  // submitted + waiting (for the queue bound)
  bool stopping = false;
  EngineStats stats;

  // Owned by the engine thread only: the step cost model behind options.max_step_cost.
  StepCosts step_costs;

  // ZENITH_ENGINE_TRACE=FILE: one JSON line a step (its start and end, its decode and prefill
  // tokens, each sampled token's sequence, prompt length and time, steady-clock microseconds:
  // CLOCK_MONOTONIC, Python's perf_counter), appended to FILE when the engine idles, never
  // during a stream. bench/serving.py splits a stream's gaps into the engine's and delivery's.
  std::string trace_path, trace, trace_tokens;
  void flush_trace();

  // Owned by the engine thread only.
  std::deque<std::unique_ptr<Sequence>> waiting;   // oldest first
  std::vector<std::unique_ptr<Sequence>> running;  // oldest first

  std::thread thread;

  void loop();
  // One iteration; false when there was nothing to do.
  bool step();
  // Ends `r` with `reason` (its remaining text released), frees its blocks, records stats.
  void finish(Sequence& r, const std::string& reason, const std::string& error = "");
  void free_blocks(Sequence& r);
  void update_gauges();
  // Samples r's next token from its row of logits and streams it; true when r finished.
  bool take_token(Sequence& r,
                  std::vector<float>& row_logits);  // running, waiting, KV usage into stats
};

}  // namespace zenith::serve::llm
