// The LLM engine on the demo model: the packed forward through the paged KV pool against the
// model's own forward, greedy decoding against models::generate, and batch invariance — a
// request's tokens and log-probabilities bit-identical alone, batched, prefilled in chunks, from
// the prefix cache and after preemption.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "serve/llm/engine.h"
#include "serve/llm/kv_pool.h"
#include "serve/llm/step_store.h"
#include "serve/llm_test_util.h"
#include "zenith/autograd.h"
#include "zenith/llama.h"
#include "zenith/ops.h"
#include "zenith/quant.h"
#include "zenith/text.h"

namespace zenith::serve::llm {
namespace {

TEST(LlmEngine, PackedForwardEqualsEachSequence) {
  auto model = demo_model();
  NoGradGuard no_grad;
  KvPool pool(model->config(), 8 << 20, 4);
  // 180 tokens: enough attention work for the rows to be split over threads.
  const std::vector<std::vector<int64_t>> seqs = {prompt_of(5, 1), prompt_of(180, 2),
                                                  prompt_of(3, 3)};
  std::vector<std::vector<int64_t>> tables(seqs.size());
  std::vector<StepSequence> steps;
  std::vector<int64_t> ids, positions;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (size_t b = 0; b * 4 < seqs[s].size(); ++b) tables[s].push_back(pool.allocate());
    steps.push_back({int64_t(ids.size()), int64_t(seqs[s].size()), 0, &tables[s], nullptr});
    for (size_t i = 0; i < seqs[s].size(); ++i) {
      ids.push_back(seqs[s][i]);
      positions.push_back(int64_t(i));
    }
  }
  StepStore store(pool, steps, model->config().num_attention_heads);
  models::LlamaInput in;
  const auto n = int64_t(ids.size());
  in.input_ids = Tensor::from_vector(ids, {1, n});
  in.position_ids = Tensor::from_vector(positions, {1, n});
  in.store = &store;
  const Tensor packed = model->forward(in);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto len = int64_t(seqs[s].size());
    const Tensor want = model->forward(Tensor::from_vector(seqs[s], {1, len}));
    const Tensor got = packed.slice(1, steps[s].row, steps[s].row + len);
    EXPECT_LE(ops::max(ops::abs(ops::sub(got, want))).item(), 1e-5) << "sequence " << s;
  }
}

TEST(LlmEngine, GreedyEqualsGenerateAndLogprobsEqualLogSoftmax) {
  auto model = demo_model();
  Engine engine(model, nullptr, {.kv_cache_bytes = 8 << 20, .block_size = 8});
  const std::vector<std::vector<int64_t>> prompts = {prompt_of(7, 1), prompt_of(20, 2),
                                                     prompt_of(3, 3)};
  auto outs = run_all(engine, prompts, greedy(12));
  for (size_t i = 0; i < prompts.size(); ++i) {
    models::GenerationConfig config;
    config.max_new_tokens = 12;
    config.temperature = 0;
    const auto want = models::generate(*model, prompts[i], config).tokens;
    EXPECT_EQ(outs[i]->tokens, want) << "prompt " << i;
    EXPECT_EQ(outs[i]->last.finish_reason, "length");
    EXPECT_EQ(outs[i]->last.completion_tokens, 12);
    // The first token's logprob against an offline log-softmax of the prompt's last logits.
    NoGradGuard no_grad;
    const auto len = int64_t(prompts[i].size());
    const Tensor logits = model->forward(Tensor::from_vector(prompts[i], {1, len}));
    const Tensor lsm = ops::log_softmax(logits.slice(1, len - 1, len).reshape({-1}), 0);
    ASSERT_FALSE(outs[i]->logprobs.empty());
    const auto& lp = outs[i]->logprobs[0];
    EXPECT_NEAR(lp.logprob, lsm.slice(0, lp.token, lp.token + 1).item(), 1e-5);
    for (const auto& [id, v] : lp.top) EXPECT_NEAR(v, lsm.slice(0, id, id + 1).item(), 1e-5);
  }
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.finished.at("length"), 3u);
  EXPECT_EQ(stats.generation_tokens, 36u);
  EXPECT_EQ(stats.prompt_tokens, 30u);
  EXPECT_EQ(stats.time_to_first_token.count, 3u);
  EXPECT_EQ(stats.inter_token_latency.count, 33u);
}

TEST(LlmEngine, BatchInvariantAloneBatchedChunkedCachedPreempted) {
  auto model = demo_model();
  const std::vector<int64_t> target = prompt_of(40, 7);
  auto solo = [&] {
    Engine engine(model, nullptr, {.kv_cache_bytes = 8 << 20, .block_size = 8});
    return std::move(run_all(engine, {target}, greedy(16))[0]);
  }();
  ASSERT_EQ(solo->tokens.size(), 16u);
  auto check = [&](const Collected& c, const char* how) {
    EXPECT_EQ(c.tokens, solo->tokens) << how;
    EXPECT_TRUE(same_logprobs(c.logprobs, solo->logprobs)) << how;
  };
  {  // batched with others, prefilled in chunks of at most 7 tokens a step
    Engine engine(model, nullptr,
                  {.kv_cache_bytes = 8 << 20, .block_size = 8, .max_batched_tokens = 7});
    auto outs = run_all(engine, {prompt_of(9, 1), target, prompt_of(30, 2)}, greedy(16));
    check(*outs[1], "batched and chunked");
  }
  {  // the second time from the prefix cache
    Engine engine(model, nullptr, {.kv_cache_bytes = 8 << 20, .block_size = 8});
    auto first = run_all(engine, {target}, greedy(16));
    auto second = run_all(engine, {target}, greedy(16));
    EXPECT_EQ(second[0]->last.cached_tokens, 32);  // 4 full blocks before the last token
    check(*second[0], "from the prefix cache");
    EXPECT_GE(engine.stats().prefix_cache_hits, 32u);
  }
  {  // a pool too small for both to finish: the younger is preempted and recomputed (the whole
     // budget a step, whatever the step costs: the second prompt is in while the first decodes)
    const int64_t block_bytes = KvPool::bytes_per_block(model->config(), 8);
    Engine engine(model, nullptr,
                  {.kv_cache_bytes = 12 * block_bytes,
                   .block_size = 8,
                   .max_step_cost = 0,
                   .prefix_caching = false});
    auto outs = run_all(engine, {prompt_of(40, 3), target, prompt_of(40, 5)}, greedy(16));
    check(*outs[1], "after preemption");
    EXPECT_GT(engine.stats().preemptions, 0u);
    EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);
  }
}

TEST(LlmEngine, KvPoolCachesReleasedPrefixesAndEvictsTheLeastRecent) {
  models::LlamaConfig c = demo_model()->config();
  KvPool pool(c, 3 * KvPool::bytes_per_block(c, 4), 4);
  ASSERT_EQ(pool.num_blocks(), 3);
  const std::vector<int64_t> t1 = {1, 2, 3, 4}, t2 = {5, 6, 7, 8};
  const uint64_t h1 = KvPool::chain_hash(0, t1.data(), 4, ""),
                 h2 = KvPool::chain_hash(h1, t2.data(), 4, "");
  EXPECT_NE(h1, KvPool::chain_hash(0, t1.data(), 4, "adapter#1"));
  const int64_t a = pool.allocate(), b = pool.allocate();
  pool.publish(a, h1, t1);
  pool.publish(b, h2, t2);
  pool.release(a);  // cached first, so evicted first
  pool.release(b);
  EXPECT_EQ(pool.available(), 3);
  EXPECT_EQ(pool.lookup(h2, t2), b);             // revived: in use again
  EXPECT_EQ(pool.lookup(h2, t1), std::nullopt);  // the same hash, other tokens: no hit
  EXPECT_EQ(pool.used(), 1);
  const int64_t fresh = pool.allocate(), evicted = pool.allocate();
  EXPECT_NE(fresh, a);
  EXPECT_EQ(evicted, a);  // the only cached block left
  EXPECT_EQ(pool.lookup(h1, t1), std::nullopt);
  EXPECT_EQ(pool.allocate(), -1);
}

TEST(LlmEngine, BatchInvariantWithBfloat16Weights) {
  auto model = models::Llama::from_pretrained(demo_dir());  // bfloat16 as stored
  ASSERT_EQ(model->weight_dtype(), DType::bf16);
  Engine engine(model, nullptr,
                {.kv_cache_bytes = 8 << 20, .block_size = 8, .max_batched_tokens = 5});
  auto alone = run_all(engine, {prompt_of(21, 5)}, greedy(8));
  auto batched = run_all(engine, {prompt_of(13, 1), prompt_of(21, 5), prompt_of(7, 2)}, greedy(8));
  EXPECT_EQ(alone[0]->tokens, batched[1]->tokens);
  EXPECT_TRUE(same_logprobs(alone[0]->logprobs, batched[1]->logprobs));
}

// The quantized kernels (8-row repacked weights where the rows allow): per-row accumulators.
TEST(LlmEngine, BatchInvariantWithQuantizedWeights) {
  for (QuantFormat f : {QuantFormat::q8_0, QuantFormat::q4_0}) {
    auto model = models::Llama::from_pretrained(demo_dir(), DType::f32);
    model->quantize(f);
    Engine engine(model, nullptr,
                  {.kv_cache_bytes = 8 << 20, .block_size = 8, .max_batched_tokens = 5});
    auto alone = run_all(engine, {prompt_of(21, 5)}, greedy(8));
    auto batched =
        run_all(engine, {prompt_of(13, 1), prompt_of(21, 5), prompt_of(7, 2)}, greedy(8));
    EXPECT_EQ(alone[0]->tokens, batched[1]->tokens) << quant_name(f);
    EXPECT_TRUE(same_logprobs(alone[0]->logprobs, batched[1]->logprobs)) << quant_name(f);
  }
}

TEST(LlmEngine, SeededSamplingIsReproducibleInABatch) {
  auto model = demo_model();
  SamplingParams p;
  p.max_tokens = 10;
  p.temperature = 0.9;
  p.top_p = 0.95;
  p.seed = 1234;
  Engine engine(model, nullptr, {.kv_cache_bytes = 8 << 20, .block_size = 8});
  auto alone = run_all(engine, {prompt_of(12, 9)}, p);
  auto batched = run_all(engine, {prompt_of(5, 1), prompt_of(12, 9), prompt_of(18, 2)}, p);
  EXPECT_EQ(alone[0]->tokens, batched[1]->tokens);
}

}  // namespace
}  // namespace zenith::serve::llm
