// One engine iteration: take in submissions and cancellations, schedule (running sequences
// first, oldest first, then waiting ones while the token budget lasts; a prompt that does not
// fit the budget is prefilled in chunks over several steps; while sequences decode, a step's
// prefill tokens are capped by the measured step cost), make room in the KV pool by
// preempting the youngest sequences, run one packed forward pass, publish full blocks to the
// prefix cache, sample and stream.
#include <algorithm>

#include "serve/llm/constraint.h"
#include "serve/llm/engine_state.h"

namespace zenith::serve::llm {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

long long micros(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

struct Chunk {
  Sequence* request;
  int64_t start, count;
  bool logits;  // the chunk ends at the last known token: its last row is sampled
};

}  // namespace

void Engine::State::free_blocks(Sequence& r) {
  for (int64_t b : r.blocks) pool->release(b);
  r.blocks.clear();
  r.block_hashes.clear();
  r.computed = 0;
}

void Engine::State::finish(Sequence& r, const std::string& reason, const std::string& error) {
  Event e;
  int64_t released = 0;
  e.text = r.stream->take(true, &released);
  released = std::min<int64_t>(released, int64_t(r.pending_tokens.size()));
  e.tokens.assign(r.pending_tokens.begin(), r.pending_tokens.begin() + released);
  if (r.params.logprobs)
    e.logprobs.assign(r.pending_logprobs.begin(),
                      r.pending_logprobs.begin() +
                          std::min<int64_t>(released, int64_t(r.pending_logprobs.size())));
  e.finished = true;
  e.finish_reason = reason;
  if (reason == "stop") e.stop = r.stream->stop_matched();
  e.error = error;
  e.prompt_tokens = r.prompt_tokens;
  e.completion_tokens = r.generated();
  e.cached_tokens = std::max<int64_t>(0, r.cached_tokens);
  free_blocks(r);
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++stats.finished[reason];
    stats.kv_cache_usage = double(pool->used()) / double(pool->num_blocks());
    if (reason != "abort" || r.has_first_token)
      stats.e2e_latency.observe(seconds(Clock::now() - r.arrived));
  }
  try {
    if (r.on_event) r.on_event(e);
  } catch (...) {  // a callback's failure is its caller's business, never the engine's
  }
}

bool Engine::State::step() {
  const int64_t bs = pool->block_size();
  const auto began = Clock::now();
  // ---- intake
  std::set<uint64_t> cancels;
  {
    std::lock_guard<std::mutex> lock(mutex);
    while (!submitted.empty()) {
      waiting.push_back(std::move(submitted.front()));
      submitted.pop_front();
    }
    cancels.swap(cancelled);
  }
  for (uint64_t id : cancels) {
    auto w = std::find_if(waiting.begin(), waiting.end(), [&](auto& r) { return r->id == id; });
    if (w != waiting.end()) {
      finish(**w, "abort");
      waiting.erase(w);
      std::lock_guard<std::mutex> lock(mutex);
      --waiting_count;
    }
    auto r = std::find_if(running.begin(), running.end(), [&](auto& x) { return x->id == id; });
    if (r != running.end()) {
      finish(**r, "abort");
      running.erase(r);
    }
  }

  // ---- schedule
  int64_t budget = options.max_batched_tokens;
  // Prompt tokens this step may prefill: while a sequence decodes, as many as keep the step
  // within max_step_cost decode steps, less what the longest-waiting stream's gap already took
  // (its next token waits for the whole step).
  bool decoding = false;
  Clock::duration waited{};
  for (const auto& r : running) {
    if (int64_t(r->tokens.size()) - r->computed != 1) continue;
    decoding = true;
    if (r->has_first_token) waited = std::max(waited, began - r->last_token);
  }
  int64_t prefill_left =
      decoding ? step_costs.prefill_cap(budget, options.max_step_cost, seconds(waited)) : budget;
  std::vector<Chunk> chunks;
  auto grow = [&](Sequence& r, int64_t end) {
    while (int64_t(r.blocks.size()) * bs < end) {
      const int64_t b = pool->allocate();
      if (b < 0) return false;
      r.blocks.push_back(b);
    }
    return true;
  };
  uint64_t preempted = 0;
  auto preempt_youngest = [&] {
    std::unique_ptr<Sequence> victim = std::move(running.back());
    running.pop_back();
    free_blocks(*victim);
    // Back to the queue in age order, ahead of younger waiting requests.
    auto at =
        std::find_if(waiting.begin(), waiting.end(), [&](auto& w) { return w->id > victim->id; });
    waiting.insert(at, std::move(victim));
    ++preempted;
    std::lock_guard<std::mutex> lock(mutex);
    ++waiting_count;
  };
  for (size_t i = 0; i < running.size() && budget > 0; ++i) {
    Sequence& r = *running[i];
    const int64_t left = int64_t(r.tokens.size()) - r.computed;
    const int64_t take = std::min(left, left > 1 ? std::min(budget, prefill_left) : budget);
    if (take == 0) continue;  // a prompt in chunks, over this step's prefill share
    if (left > 1) prefill_left -= take;
    bool fits = true;
    while (!(fits = grow(r, r.computed + take)) && i + 1 < running.size()) preempt_youngest();
    if (!fits) {  // r is the youngest left: it waits (the oldest always fits: see submit)
      if (i > 0) preempt_youngest();
      break;
    }
    chunks.push_back({&r, r.computed, take, r.computed + take == int64_t(r.tokens.size())});
    budget -= take;
  }
  while (!waiting.empty() && budget > 0 && prefill_left > 0 &&
         int64_t(running.size()) < options.max_running && preempted == 0) {
    Sequence& r = *waiting.front();
    const auto length = int64_t(r.tokens.size());
    if (r.blocks.empty() &&
        options.prefix_caching) {  // take the cached prefix (not the last token)
      uint64_t parent = 0;
      for (int64_t b = 0; (b + 1) * bs < length; ++b) {
        const int64_t* p = r.tokens.data() + b * bs;
        const uint64_t h = KvPool::chain_hash(parent, p, bs, r.adapter ? r.adapter->cache_key : "");
        auto hit = pool->lookup(h, std::vector<int64_t>(p, p + bs));
        if (!hit) break;
        r.blocks.push_back(*hit);
        r.block_hashes.push_back(h);
        parent = h;
      }
      r.computed = int64_t(r.blocks.size()) * bs;
      std::lock_guard<std::mutex> lock(mutex);
      stats.prefix_cache_queries += uint64_t(length);
      stats.prefix_cache_hits += uint64_t(r.computed);
    }
    if (r.cached_tokens < 0) r.cached_tokens = r.computed;
    const int64_t take = std::min({length - r.computed, budget, prefill_left});
    if (!grow(r, r.computed + take)) {
      free_blocks(r);
      break;
    }
    chunks.push_back({&r, r.computed, take, r.computed + take == length});
    budget -= take;
    prefill_left -= take;
    if (!r.was_scheduled) {
      r.was_scheduled = true;
      std::lock_guard<std::mutex> lock(mutex);
      stats.queue_time.observe(seconds(Clock::now() - r.arrived));
    }
    auto at = std::find_if(running.begin(), running.end(), [&](auto& x) { return x->id > r.id; });
    running.insert(at, std::move(waiting.front()));
    waiting.pop_front();
    std::lock_guard<std::mutex> lock(mutex);
    --waiting_count;
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    stats.preemptions += preempted;
  }
  if (chunks.empty()) {
    update_gauges();
    return false;
  }

  int64_t decodes = 0, prefill_tokens = 0;  // for the step cost model
  for (const Chunk& c : chunks)
    (c.count == 1 && c.start >= c.request->prompt_tokens ? decodes : prefill_tokens) += c.count;

  // ---- one packed forward pass
  std::vector<int64_t> ids, positions, rows;
  std::vector<StepSequence> sequences;
  int64_t row = 0;
  for (const Chunk& c : chunks) {
    Sequence& r = *c.request;
    for (int64_t t = 0; t < c.count; ++t) {
      ids.push_back(r.tokens[size_t(c.start + t)]);
      positions.push_back(c.start + t);
    }
    if (c.logits) rows.push_back(row + c.count - 1);
    sequences.push_back({row, c.count, c.start, &r.blocks, r.adapter.get()});
    row += c.count;
  }
  const bool any_logits = !rows.empty();
  if (!any_logits) rows.push_back(row - 1);  // keys and values only: one row of logits, unused
  StepStore store(*pool, std::move(sequences), model->config().num_attention_heads);
  models::LlamaInput in;
  in.input_ids = Tensor::from_vector(ids, {1, row});
  in.position_ids = Tensor::from_vector(positions, {1, row});
  in.logit_rows = Tensor::from_vector(rows, {int64_t(rows.size())});
  store.set_logit_rows(rows);
  in.store = &store;
  const Tensor logits = model->forward(in).contiguous();
  const int64_t vocab = logits.size(2);

  // ---- bookkeeping: computed positions, full blocks into the prefix cache
  for (const Chunk& c : chunks) {
    Sequence& r = *c.request;
    r.computed += c.count;
    if (!options.prefix_caching) continue;
    for (auto b = int64_t(r.block_hashes.size()); (b + 1) * bs <= r.computed; ++b) {
      const int64_t* p = r.tokens.data() + b * bs;
      const uint64_t h = KvPool::chain_hash(b == 0 ? 0 : r.block_hashes[size_t(b - 1)], p, bs,
                                            r.adapter ? r.adapter->cache_key : "");
      pool->publish(r.blocks[size_t(b)], h, std::vector<int64_t>(p, p + bs));
      r.block_hashes.push_back(h);
    }
  }

  // ---- sample and stream
  std::set<Sequence*> done;
  const float* pl = logits.data<float>();
  int64_t k = 0;
  uint64_t generated = 0;
  for (const Chunk& c : chunks) {
    if (!c.logits || !any_logits) continue;
    Sequence& r = *c.request;
    std::vector<float> row_logits(pl + k * vocab, pl + (k + 1) * vocab);
    ++k;
    ++generated;
    try {
      if (take_token(r, row_logits)) done.insert(&r);
    } catch (const std::exception& e) {  // its grammar refused the token, say: it alone ends
      finish(r, "error", e.what());
      done.insert(&r);
    }
  }
  std::erase_if(running, [&](const auto& r) { return done.count(r.get()) > 0; });
  const auto ended = Clock::now();
  step_costs.observe(seconds(ended - began), decodes, prefill_tokens);
  if (!trace_path.empty()) {
    trace +=
        "{\"start_us\":" + std::to_string(micros(began)) +
        ",\"end_us\":" + std::to_string(micros(ended)) + ",\"decodes\":" + std::to_string(decodes) +
        ",\"prefill\":" + std::to_string(prefill_tokens) + ",\"tokens\":[" + trace_tokens + "]}\n";
    trace_tokens.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    stats.generation_tokens += generated;
    ++stats.steps;
  }
  update_gauges();
  return true;
}

bool Engine::State::take_token(Sequence& r, std::vector<float>& row_logits) {
  TokenLogprob lp;
  const int64_t token = r.sampler->next(row_logits, r.tokens, r.params.logprobs ? &lp : nullptr);
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!r.has_first_token) {
      stats.time_to_first_token.observe(seconds(now - r.arrived));
      stats.prompt_tokens += uint64_t(r.prompt_tokens);
    } else {
      stats.inter_token_latency.observe(seconds(now - r.last_token));
    }
  }
  r.has_first_token = true;
  r.last_token = now;
  if (!trace_path.empty())  // [sequence, prompt tokens, time]
    trace_tokens += std::string(trace_tokens.empty() ? "" : ",") + "[" + std::to_string(r.id) +
                    "," + std::to_string(r.prompt_tokens) + "," + std::to_string(micros(now)) + "]";
  r.tokens.push_back(token);
  const auto& eos = options.eos_token_ids;
  const auto& stops = r.params.stop_token_ids;
  if ((!r.params.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) ||
      std::find(stops.begin(), stops.end(), token) != stops.end()) {
    finish(r, "stop");
    return true;
  }
  r.sampler->accept(token);
  r.pending_tokens.push_back(token);
  if (r.params.logprobs) r.pending_logprobs.push_back(lp);
  bool stopped = r.stream->add(token);
  if (r.params.constraint) {
    r.params.constraint->accept(token);
    stopped = stopped || r.params.constraint->done();
  }
  if (stopped) {
    finish(r, "stop");
  } else if (r.generated() >= r.params.max_tokens || int64_t(r.tokens.size()) >= max_model_len) {
    finish(r, "length");
  } else {
    Event e;
    int64_t released = 0;
    // An event per sampled token, also while its text is held back (empty text, no tokens):
    // a client sees each step's progress, as vLLM streams a chunk per step.
    e.text = r.stream->take(false, &released);
    e.tokens.assign(r.pending_tokens.begin(), r.pending_tokens.begin() + released);
    r.pending_tokens.erase(r.pending_tokens.begin(), r.pending_tokens.begin() + released);
    if (r.params.logprobs) {
      e.logprobs.assign(r.pending_logprobs.begin(), r.pending_logprobs.begin() + released);
      r.pending_logprobs.erase(r.pending_logprobs.begin(), r.pending_logprobs.begin() + released);
    }
    e.prompt_tokens = r.prompt_tokens;
    e.completion_tokens = r.generated();
    e.cached_tokens = std::max<int64_t>(0, r.cached_tokens);
    try {
      if (r.on_event) r.on_event(e);
    } catch (...) {
    }
    return false;
  }
  return true;
}

void Engine::State::update_gauges() {
  std::lock_guard<std::mutex> lock(mutex);
  stats.running = int64_t(running.size());
  stats.waiting = waiting_count;
  stats.kv_cache_usage = double(pool->used()) / double(pool->num_blocks());
}

}  // namespace zenith::serve::llm
