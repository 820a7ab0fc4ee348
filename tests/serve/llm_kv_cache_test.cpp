// The engine's KV cache dtype (EngineOptions::kv_cache_dtype, `zenith serve --kv-cache-dtype`):
// a bfloat16 / float16 pool holds twice the blocks in the same bytes, /metrics' KV usage counts
// against those blocks, a request's output stays bit-identical alone, batched, chunked, from the
// prefix cache and after preemption, and the pool refuses other dtypes by name.
#include <gtest/gtest.h>

#include <future>

#include "serve/llm/engine.h"
#include "serve/llm/kv_pool.h"
#include "serve/llm_test_util.h"
#include "zenith/error.h"
#include "zenith/llama.h"

namespace zenith::serve::llm {
namespace {

TEST(LlmEngineKvCache, HalfDtypesHoldTwiceTheBlocksInTheSameBytes) {
  const models::LlamaConfig c = demo_model()->config();
  const int64_t bytes = 8 << 20;
  const KvPool f32(c, bytes, 8);
  EXPECT_EQ(f32.dtype(), DType::f32);
  for (DType dtype : {DType::bf16, DType::f16}) {
    EXPECT_EQ(KvPool::bytes_per_block(c, 8, dtype) * 2, KvPool::bytes_per_block(c, 8));
    const KvPool half(c, bytes, 8, dtype);
    EXPECT_EQ(half.num_blocks(), 2 * f32.num_blocks()) << dtype_name(dtype);
    EXPECT_EQ(half.key_cache(0).dtype(), dtype);
    EXPECT_EQ(half.key_cache(0).shape(), (Shape{half.num_blocks(), c.num_key_value_heads, 8,
                                                c.head_dim}));  // [blocks, Hkv, P, D]
  }
  try {
    KvPool bad(c, bytes, 8, DType::i32);
    FAIL() << "an int32 KV pool was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "KV cache dtype must be float32, bfloat16 or float16, got int32"),
              std::string::npos)
        << e.what();
  }
}

// The engine's kv_blocks (and so /metrics' kv_cache_usage_perc = used / kv_blocks) with a
// bfloat16 pool: twice the f32 pool's blocks, and a running 20-token request (3 blocks of 8)
// uses 3 of them.
TEST(LlmEngineKvCache, Bfloat16PoolDoublesTheBlocksAndUsageCountsThem) {
  auto model = demo_model();
  const Engine f32(model, nullptr, {.kv_cache_bytes = 8 << 20, .block_size = 8});
  Engine engine(model, nullptr,
                {.kv_cache_bytes = 8 << 20, .block_size = 8, .kv_cache_dtype = DType::bf16});
  const int64_t blocks = engine.stats().kv_blocks;
  EXPECT_EQ(blocks, 2 * f32.stats().kv_blocks);
  // Held inside the request's second event: the stats are those after the step that sampled
  // its first token (20 prompt + 1 positions: 3 blocks).
  std::promise<void> reached, resume;
  std::shared_future<void> go = resume.get_future().share();
  int events = 0;
  Collected out;
  auto collect = out.callback();
  engine.submit(prompt_of(20, 4), greedy(4), [&, go](const Event& e) {
    if (++events == 2) {
      reached.set_value();
      go.wait();
    }
    collect(e);
  });
  reached.get_future().wait();
  const EngineStats during = engine.stats();
  resume.set_value();
  out.wait();
  EXPECT_EQ(during.running, 1);
  EXPECT_EQ(during.kv_cache_usage, 3.0 / double(blocks));
  EXPECT_EQ(engine.stats().kv_cache_usage, 0.0);  // finished: its blocks free or cached
}

// As BatchInvariantAloneBatchedChunkedCachedPreempted (llm_engine_test.cpp), over a bfloat16 pool.
TEST(LlmEngineKvCache, Bfloat16KvIsBatchInvariantAloneBatchedChunkedCachedPreempted) {
  auto model = demo_model();
  const std::vector<int64_t> target = prompt_of(40, 7);
  const DType kv = DType::bf16;
  auto solo = [&] {
    Engine engine(model, nullptr,
                  {.kv_cache_bytes = 8 << 20, .block_size = 8, .kv_cache_dtype = kv});
    return std::move(run_all(engine, {target}, greedy(16))[0]);
  }();
  ASSERT_EQ(solo->tokens.size(), 16u);
  {  // the pool's dtype is real: float32 keys and values give other log-probabilities
    Engine engine(model, nullptr, {.kv_cache_bytes = 8 << 20, .block_size = 8});
    EXPECT_FALSE(same_logprobs(run_all(engine, {target}, greedy(16))[0]->logprobs, solo->logprobs));
  }
  auto check = [&](const Collected& c, const char* how) {
    EXPECT_EQ(c.tokens, solo->tokens) << how;
    EXPECT_TRUE(same_logprobs(c.logprobs, solo->logprobs)) << how;
  };
  {
    Engine engine(model, nullptr,
                  {.kv_cache_bytes = 8 << 20,
                   .block_size = 8,
                   .kv_cache_dtype = kv,
                   .max_batched_tokens = 7});
    auto outs = run_all(engine, {prompt_of(9, 1), target, prompt_of(30, 2)}, greedy(16));
    check(*outs[1], "batched and chunked");
  }
  {
    Engine engine(model, nullptr,
                  {.kv_cache_bytes = 8 << 20, .block_size = 8, .kv_cache_dtype = kv});
    run_all(engine, {target}, greedy(16));
    auto second = run_all(engine, {target}, greedy(16));
    EXPECT_EQ(second[0]->last.cached_tokens, 32);
    check(*second[0], "from the prefix cache");
  }
  {
    const int64_t block_bytes = KvPool::bytes_per_block(model->config(), 8, kv);
    Engine engine(model, nullptr,
                  {.kv_cache_bytes = 12 * block_bytes,
                   .block_size = 8,
                   .kv_cache_dtype = kv,
                   .max_step_cost = 0,  // the whole budget a step: the pool runs out, by plan
                   .prefix_caching = false});
    EXPECT_EQ(engine.stats().kv_blocks, 12);
    auto outs = run_all(engine, {prompt_of(40, 3), target, prompt_of(40, 5)}, greedy(16));
    check(*outs[1], "after preemption");
    EXPECT_GT(engine.stats().preemptions, 0u);
  }
}

}  // namespace
}  // namespace zenith::serve::llm
