// The LLM engine's request handling on the demo model: stop strings held back and never
// emitted, eos ids, cancellation freeing blocks, the bounded queue, and multi-LoRA (requests
// naming different adapters in one batch, each equal to the offline merged model).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <mutex>
#include <thread>

#include "serve/llm/kv_pool.h"
#include "serve/llm_test_util.h"
#include "support/temp_dir.h"
#include "zenith/autograd.h"
#include "zenith/context.h"
#include "zenith/hf.h"
#include "zenith/ops.h"
#include "zenith/text.h"

namespace zenith::serve::llm {
namespace {

// The demo model's prompt for the text-stream tests: it continues with several words.
std::vector<int64_t> story_prompt(const text::Tokenizer& tokenizer) {
  std::vector<int64_t> prompt;
  for (int32_t id : tokenizer.encode("Once upon a time, there was a little")) prompt.push_back(id);
  return prompt;
}

TEST(LlmEngineRequests, StopStringsAreHeldBackAndNeverEmitted) {
  auto tokenizer = text::Tokenizer::from_dir(demo_dir());
  Engine engine(demo_model(), tokenizer, {.kv_cache_bytes = 8 << 20, .block_size = 8});
  const std::vector<int64_t> prompt = story_prompt(*tokenizer);
  SamplingParams p = greedy(40);
  p.ignore_eos = true;
  auto free_run = std::move(run_all(engine, {prompt}, p)[0]);
  const std::string full = free_run->text;
  ASSERT_GT(full.size(), 30u) << full;
  const std::string stop = full.substr(full.size() / 2, 7);  // likely spans tokens
  p.stop = {"never-appears", stop};
  auto stopped = std::move(run_all(engine, {prompt}, p)[0]);
  EXPECT_EQ(stopped->text, full.substr(0, full.find(stop)));
  EXPECT_EQ(stopped->last.finish_reason, "stop");
  EXPECT_EQ(stopped->last.stop, stop);
  // Released tokens are a prefix of the free run's, their logprobs with them.
  ASSERT_LE(stopped->tokens.size(), free_run->tokens.size());
  EXPECT_TRUE(std::equal(stopped->tokens.begin(), stopped->tokens.end(), free_run->tokens.begin()));
  EXPECT_EQ(stopped->logprobs.size(), stopped->tokens.size());
}

// Every sampled token gives an event, also one whose whole text is held back (it could begin a
// stop string): empty text then, so a stream shows each step's progress.
TEST(LlmEngineRequests, ATokenWhoseTextIsHeldBackStillGivesAnEvent) {
  auto tokenizer = text::Tokenizer::from_dir(demo_dir());
  Engine engine(demo_model(), tokenizer, {.kv_cache_bytes = 8 << 20, .block_size = 8});
  const std::vector<int64_t> prompt = story_prompt(*tokenizer);
  SamplingParams p = greedy(24);
  p.ignore_eos = true;
  auto free_run = std::move(run_all(engine, {prompt}, p)[0]);
  const auto& pieces = free_run->pieces;
  ASSERT_EQ(pieces.size(), 24u);  // one event a token
  EXPECT_EQ(free_run->last.completion_tokens, 24);
  // A stop string from the start of token k's text into token k + 1's, found nowhere earlier.
  size_t k = 1, at = pieces[0].size();
  std::string stop;
  for (; k + 2 < pieces.size(); at += pieces[k++].size()) {
    if (pieces[k].empty() || pieces[k + 1].empty()) continue;
    stop = pieces[k] + pieces[k + 1].substr(0, 1);
    if (free_run->text.find(stop) == at) break;
  }
  ASSERT_LT(k + 2, pieces.size()) << free_run->text;
  p.stop = {stop};
  auto stopped = std::move(run_all(engine, {prompt}, p)[0]);
  EXPECT_EQ(stopped->text, free_run->text.substr(0, at));
  ASSERT_EQ(stopped->pieces.size(), k + 2);  // tokens 0..k+1, the last finishing
  EXPECT_EQ(stopped->pieces[k], "");         // token k: all of its text held back
  EXPECT_EQ(stopped->last.finish_reason, "stop");
}

TEST(LlmEngineRequests, EosIdsEndGeneration) {
  auto model = demo_model();
  const std::vector<int64_t> prompt = prompt_of(10, 4);
  std::vector<int64_t> free_tokens;
  {
    Engine engine(model, nullptr, {.kv_cache_bytes = 8 << 20});
    free_tokens = run_all(engine, {prompt}, greedy(8))[0]->tokens;
  }
  ASSERT_EQ(free_tokens.size(), 8u);
  const int64_t eos = free_tokens[3];
  const auto first =
      size_t(std::find(free_tokens.begin(), free_tokens.end(), eos) - free_tokens.begin());
  Engine engine(model, nullptr, {.kv_cache_bytes = 8 << 20, .eos_token_ids = {eos}});
  auto out = run_all(engine, {prompt}, greedy(8));
  EXPECT_EQ(out[0]->last.finish_reason, "stop");
  EXPECT_EQ(out[0]->last.completion_tokens, int64_t(first) + 1);  // the eos counts
  EXPECT_EQ(out[0]->tokens,
            std::vector<int64_t>(free_tokens.begin(), free_tokens.begin() + long(first)));
}

TEST(LlmEngineRequests, CancelFreesBlocksAndTheQueueIsBounded) {
  Engine engine(demo_model(), nullptr,
                {.kv_cache_bytes = 8 << 20, .block_size = 8, .max_running = 1, .max_waiting = 1});
  SamplingParams p = greedy(200);
  p.ignore_eos = true;
  Collected a, b;
  const uint64_t ida = engine.submit(prompt_of(20, 1), p, a.callback());
  while (engine.stats().running < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const uint64_t idb = engine.submit(prompt_of(20, 2), p, b.callback());  // waits: max_running 1
  EXPECT_THROW(engine.submit(prompt_of(20, 3), p, [](const Event&) {}), QueueFullError);
  engine.cancel(idb);
  engine.cancel(ida);
  a.wait();
  b.wait();
  EXPECT_EQ(a.last.finish_reason, "abort");
  EXPECT_EQ(b.last.finish_reason, "abort");
  EXPECT_LT(a.last.completion_tokens, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.finished.at("abort"), 2u);
  // Too long for the context: a RequestError naming max_tokens.
  try {
    engine.submit(prompt_of(100, 1), greedy(200), [](const Event&) {});
    ADD_FAILURE() << "no error";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.param, "max_tokens");
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
}

TEST(LlmEngineRequests, ChunkedPrefillNeverSkipsARunningStream) {
  Engine engine(demo_model(), nullptr,
                {.kv_cache_bytes = 8 << 20, .block_size = 8, .max_batched_tokens = 8});
  std::mutex mutex;
  std::vector<uint64_t> a_steps;  // the engine step count at each of A's tokens
  uint64_t b_first_step = 0;
  SamplingParams pa = greedy(40);
  pa.ignore_eos = true;
  Collected a, b;
  auto a_callback = a.callback();
  engine.submit(prompt_of(4, 1), pa, [&](const Event& e) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      a_steps.push_back(engine.stats().steps);
    }
    a_callback(e);
  });
  while (engine.stats().generation_tokens < 3)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const uint64_t submitted_at = engine.stats().steps;
  auto b_callback = b.callback();
  engine.submit(prompt_of(64, 2), greedy(2), [&](const Event& e) {  // 8 steps of prefill
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (b_first_step == 0) b_first_step = engine.stats().steps;
    }
    b_callback(e);
  });
  a.wait();
  b.wait();
  // In chunks within the budget: 64 tokens take at least 8 steps from the one that took B in
  // (at the earliest step submitted_at + 1; a callback sees the steps completed before its own).
  EXPECT_GE(b_first_step, submitted_at + 7);
  for (size_t i = 1; i < a_steps.size(); ++i)
    EXPECT_EQ(a_steps[i], a_steps[i - 1] + 1) << "A missed a step at its token " << i;
}

// max_step_cost 1: while a stream decodes, a step prefills at most one prompt token (the cost
// cap's floor), so the stream's steps stay decode-sized; alone, a prompt takes the whole budget.
TEST(LlmEngineRequests, WhileAStreamDecodesPrefillIsCappedByTheStepCost) {
  const EngineOptions options = {
      .kv_cache_bytes = 8 << 20, .block_size = 8, .max_batched_tokens = 16, .max_step_cost = 1};
  auto model = demo_model();
  const std::vector<int64_t> prompt = prompt_of(12, 2);
  std::vector<int64_t> solo;
  {
    Engine engine(model, nullptr, options);
    uint64_t first_step = ~0ull;
    Collected b;
    auto b_callback = b.callback();
    engine.submit(prompt, greedy(4), [&](const Event& e) {
      if (first_step == ~0ull) first_step = engine.stats().steps;
      b_callback(e);
    });
    b.wait();
    EXPECT_EQ(first_step, 0u) << "a lone prompt within the budget is prefilled in one step";
    solo = b.tokens;
  }
  Engine engine(model, nullptr, options);
  std::mutex mutex;
  std::vector<uint64_t> a_steps;
  uint64_t b_first_step = 0;
  SamplingParams pa = greedy(40);
  pa.ignore_eos = true;
  Collected a, b;
  auto a_callback = a.callback();
  // A's third token holds the engine thread until B is submitted: a test thread the host
  // deschedules would otherwise submit B after A had run through its 40 tokens (seen at load
  // 6-9: "A ran through B's prefill").
  std::promise<void> a_third, b_submitted;
  std::shared_future<void> b_in = b_submitted.get_future().share();
  engine.submit(prompt_of(4, 1), pa, [&](const Event& e) {
    size_t seen;
    {
      std::lock_guard<std::mutex> lock(mutex);
      a_steps.push_back(engine.stats().steps);
      seen = a_steps.size();
    }
    a_callback(e);
    if (seen == 3) {
      a_third.set_value();
      b_in.wait_for(std::chrono::seconds(30));
    }
  });
  a_third.get_future().wait();
  const uint64_t submitted_at = engine.stats().steps;
  auto b_callback = b.callback();
  engine.submit(prompt, greedy(4), [&](const Event& e) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (b_first_step == 0) b_first_step = engine.stats().steps;
    }
    b_callback(e);
  });
  b_submitted.set_value();
  a.wait();
  b.wait();
  ASSERT_GT(a_steps.back(), b_first_step) << "A ran through B's prefill";
  EXPECT_GE(b_first_step, submitted_at + 11);  // 12 prompt tokens, one a step
  for (size_t i = 1; i < a_steps.size(); ++i)
    EXPECT_EQ(a_steps[i], a_steps[i - 1] + 1) << "A missed a step at its token " << i;
  EXPECT_EQ(b.tokens, solo);  // batch invariance: prefilled a token at a time, the same output
}

TEST(LlmEngineRequests, TheEngineThreadComputesWithItsCreatorsThreadCount) {
  const int before = context::get_num_threads();
  context::set_num_threads(1);
  int seen = 0;
  {
    Engine engine(demo_model(), nullptr, {.kv_cache_bytes = 8 << 20});
    Collected c;
    auto callback = c.callback();
    engine.submit(prompt_of(5, 1), greedy(2), [&](const Event& e) {
      if (e.finished) seen = context::get_num_threads();
      callback(e);
    });
    c.wait();
  }
  context::set_num_threads(before);
  EXPECT_EQ(seen, 1);
}

TEST(LlmEngineRequests, MultiLoraEqualsMergedModels) {
  auto base = demo_model();
  testing::TempDir tmp("llm_lora");
  const std::string dir = tmp / "adapter";
  {
    io::LoraAdapter adapter;
    adapter.config.r = 4;
    adapter.config.lora_alpha = 8;
    adapter.config.target_modules = {"q_proj", "v_proj", "down_proj"};
    for (const auto& [path, layer] : base->linear_layers()) {
      if (!adapter.config.targets(path)) continue;
      const Shape w = {layer->out_features(), layer->in_features()};
      adapter.modules[path] = {ops::mul(Tensor::randn({4, w[1]}), 0.1),
                               ops::mul(Tensor::randn({w[0], 4}), 0.1)};
    }
    io::save_lora_adapter(dir, adapter);
  }
  auto merged = models::Llama::from_pretrained(demo_dir(), DType::f32);
  models::load_lora(*merged, dir);
  models::merge_lora(*merged);

  Engine engine(base, nullptr, {.kv_cache_bytes = 8 << 20, .block_size = 8});
  engine.add_adapter("tuned", dir);
  EXPECT_EQ(engine.adapters(), std::vector<std::string>{"tuned"});
  const std::vector<int64_t> prompt = prompt_of(15, 6);
  SamplingParams plain = greedy(10), tuned = greedy(10);
  tuned.adapter = "tuned";
  std::vector<std::unique_ptr<Collected>> outs;
  for (const SamplingParams* p : {&plain, &tuned, &plain, &tuned}) {
    outs.push_back(std::make_unique<Collected>());
    engine.submit(prompt, *p, outs.back()->callback());
  }
  for (auto& c : outs) c->wait();
  models::GenerationConfig g;
  g.max_new_tokens = 10;
  g.temperature = 0;
  const auto want_base = models::generate(*base, prompt, g).tokens;
  const auto want_tuned = models::generate(*merged, prompt, g).tokens;
  ASSERT_NE(want_base, want_tuned);
  EXPECT_EQ(outs[0]->tokens, want_base);
  EXPECT_EQ(outs[1]->tokens, want_tuned);
  EXPECT_EQ(outs[2]->tokens, want_base);
  EXPECT_EQ(outs[3]->tokens, want_tuned);
  {  // logits: the first token's log-probabilities against the merged model's
    NoGradGuard no_grad;
    const auto len = int64_t(prompt.size());
    const Tensor logits = merged->forward(Tensor::from_vector(prompt, {1, len}));
    const Tensor lsm = ops::log_softmax(logits.slice(1, len - 1, len).reshape({-1}), 0);
    for (const auto& [id, v] : outs[1]->logprobs[0].top)
      EXPECT_NEAR(v, lsm.slice(0, id, id + 1).item(), 1e-4);
  }
  EXPECT_TRUE(engine.remove_adapter("tuned"));
  try {
    engine.submit(prompt, tuned, [](const Event&) {});
    ADD_FAILURE() << "no error";
  } catch (const RequestError& e) {
    EXPECT_TRUE(e.unknown_adapter);
    EXPECT_EQ(e.param, "model");
  }
}

}  // namespace
}  // namespace zenith::serve::llm
