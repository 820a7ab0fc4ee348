// ops::paged_attention (src/ops/paged_attention.cpp) against a float64 reference over random
// block tables (shuffled block ids, partial last blocks, grouped-query heads, sequences of
// different lengths, decode steps and chunked prefill), bfloat16 / float16 caches (against the
// reference of their rounded values, and bit-identical to a float32 cache holding those values),
// batch invariance (a token's output bit-identical alone, batched, in another order and on 1 or
// 2 threads), its errors, and its backward refusing by name.
#include <cstring>
#include <functional>

#include "support/op_check.h"
#include "support/paged_case.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

Tensor run(const PagedCase& c, DType dtype) {
  return ops::paged_attention(c.q.to(dtype), c.k.to(dtype), c.v.to(dtype), c.table, c.seq, c.pos);
}

// The cache a float32 q reads: float64 test data as float32, bfloat16 / float16 as they are.
Tensor f32_cache(const Tensor& x) { return x.dtype() == DType::f64 ? x.to(DType::f32) : x; }

// Token t of the call alone (its own seq and pos entries, the same caches and table).
Tensor alone(const PagedCase& c, int64_t t) {
  const Tensor q = c.q.to(DType::f32).slice(2, t, t + 1);
  return ops::paged_attention(q, f32_cache(c.k), f32_cache(c.v), c.table, c.seq.slice(0, t, t + 1),
                              c.pos.slice(0, t, t + 1));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && std::memcmp(x.data<float>(), y.data<float>(), x.nbytes()) == 0;
}

struct Shapes {
  int64_t heads, kv_heads, d, block_size;
  std::vector<int64_t> lengths, chunks;
};

const std::vector<Shapes> kShapes = {
    {8, 2, 20, 4, {1, 7, 16, 33}, {1, 7, 1, 5}},  // GQA, D not a multiple of 8, partial blocks
    {4, 4, 64, 16, {40, 3}, {1, 1}},              // two decode steps
    {6, 3, 32, 8, {70}, {70}},                    // a whole prefill
    {2, 1, 16, 5, {1}, {1}},                      // the first token of a sequence
};

TEST(PagedAttention, MatchesFloat64ReferenceOverRandomBlockTables) {
  NoGradGuard no_grad;
  uint32_t seed = 1;
  for (const Shapes& s : kShapes) {
    const PagedCase c =
        paged_case(s.heads, s.kv_heads, s.d, s.block_size, s.lengths, s.chunks, seed++);
    const Tensor want = paged_reference(c);
    EXPECT_TRUE(all_close(run(c, DType::f64), want, 1e-12, 1e-12)) << "float64, case " << seed;
    const Tensor got = run(c, DType::f32);
    EXPECT_EQ(got.dtype(), DType::f32);
    EXPECT_TRUE(all_close(got, want, 1e-5, 1e-6)) << "float32, case " << seed;
  }
}

// The caches rounded to bfloat16 / float16: the kernel widens them exactly, so its float32 result
// is within float32 arithmetic (1e-5) of the float64 reference over the rounded values, equals a
// float32 cache holding those values bit for bit (same arithmetic, same order), and is the same
// for each token alone and batched.
TEST(PagedAttention, HalfCachesMatchTheirRoundedValuesAndAreBatchInvariant) {
  NoGradGuard no_grad;
  uint32_t seed = 20;
  for (DType dtype : {DType::bf16, DType::f16})
    for (const Shapes& s : kShapes) {
      PagedCase c = paged_case(s.heads, s.kv_heads, s.d, s.block_size, s.lengths, s.chunks, seed++);
      const Tensor unrounded = paged_reference(c);
      c.k = c.k.to(dtype);
      c.v = c.v.to(dtype);
      const Tensor q = c.q.to(DType::f32);
      const Tensor got = ops::paged_attention(q, c.k, c.v, c.table, c.seq, c.pos);
      EXPECT_EQ(got.dtype(), DType::f32);
      EXPECT_TRUE(all_close(got, paged_reference(c), 1e-5, 1e-6))
          << dtype_name(dtype) << ", case " << seed;
      // The rounding is real: the float32 cache's answer is out of that tolerance.
      EXPECT_FALSE(all_close(got, unrounded, 1e-5, 1e-6)) << dtype_name(dtype);
      const Tensor as_f32 =
          ops::paged_attention(q, c.k.to(DType::f32), c.v.to(DType::f32), c.table, c.seq, c.pos);
      EXPECT_TRUE(same_bits(got, as_f32)) << dtype_name(dtype) << ", case " << seed;
      for (int64_t t = 0; t < q.size(2); ++t)
        ASSERT_TRUE(same_bits(alone(c, t), got.slice(2, t, t + 1)))
            << dtype_name(dtype) << " token " << t;
    }
}

TEST(PagedAttention, TokenOutputIsTheSameAloneBatchedReorderedAndThreaded) {
  NoGradGuard no_grad;
  const PagedCase c = paged_case(8, 2, 64, 4, {9, 130, 2, 61}, {3, 2, 2, 61}, 7);
  const Tensor batched = run(c, DType::f32);
  const int64_t n = c.q.size(2);
  for (int64_t t = 0; t < n; ++t)
    ASSERT_TRUE(same_bits(alone(c, t), batched.slice(2, t, t + 1))) << "token " << t;
  // The tokens in reverse order: each row the same bits.
  std::vector<int64_t> rev(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) rev[size_t(t)] = n - 1 - t;
  const Tensor index = Tensor::from_vector(rev, {n});
  const Tensor reversed = ops::paged_attention(
      ops::index_select(c.q.to(DType::f32), 2, index), c.k.to(DType::f32), c.v.to(DType::f32),
      c.table, ops::index_select(c.seq, 0, index), ops::index_select(c.pos, 0, index));
  EXPECT_TRUE(same_bits(ops::index_select(reversed, 2, index), batched));
  const int threads = context::get_num_threads();
  context::set_num_threads(1);
  const Tensor serial = run(c, DType::f32);
  context::set_num_threads(2);
  const Tensor two = run(c, DType::f32);
  context::set_num_threads(threads);
  EXPECT_TRUE(same_bits(serial, batched));
  EXPECT_TRUE(same_bits(two, batched));
}

TEST(PagedAttention, ErrorsNameTheOperandAndIndex) {
  NoGradGuard no_grad;
  PagedCase c = paged_case(4, 2, 8, 4, {6}, {2}, 3);
  const auto message = [&](const PagedCase& x) {
    try {
      run(x, DType::f32);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  PagedCase bad = c;
  bad.table = Tensor::from_vector(std::vector<int64_t>{0, 99}, {1, 2}).to(DType::i32);
  EXPECT_NE(message(bad).find("block_table[0, 1] = 99 is not one of the cache's"),
            std::string::npos)
      << message(bad);
  bad = c;
  bad.pos = Tensor::from_vector(std::vector<int64_t>{4, 100}, {2}).to(DType::i32);
  EXPECT_NE(message(bad).find("positions[1] = 100 is outside"), std::string::npos);
  bad = c;
  bad.seq = Tensor::from_vector(std::vector<int64_t>{0, 1}, {2}).to(DType::i32);
  EXPECT_NE(message(bad).find("seq_of_token[1] = 1 is not a row of block_table"),
            std::string::npos);
  bad = c;
  bad.seq = Tensor::from_vector(std::vector<int64_t>{0, 0}, {2});
  EXPECT_NE(message(bad).find("seq_of_token must be an int32 tensor"), std::string::npos);
  bad = c;
  bad.q = c.q.slice(1, 0, 3);
  EXPECT_NE(message(bad).find("does not fit caches"), std::string::npos);
  const auto thrown = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const Tensor kb = c.k.to(DType::bf16), vb = c.v.to(DType::bf16);
  const std::string mixed = thrown([&] {
    ops::paged_attention(c.q.to(DType::f32), kb, c.v.to(DType::f32), c.table, c.seq, c.pos);
  });
  EXPECT_NE(mixed.find("the caches must have q's dtype float32 (or both bfloat16 / float16 "
                       "under a float32 q), got bfloat16 and float32"),
            std::string::npos)
      << mixed;
  const std::string under_f64 =
      thrown([&] { ops::paged_attention(c.q, kb, vb, c.table, c.seq, c.pos); });
  EXPECT_NE(under_f64.find("the caches must have q's dtype float64"), std::string::npos)
      << under_f64;
  const std::string half_q =
      thrown([&] { ops::paged_attention(c.q.to(DType::bf16), kb, vb, c.table, c.seq, c.pos); });
  EXPECT_NE(half_q.find("q must be float32 (or float64, the reference), got bfloat16"),
            std::string::npos)
      << half_q;
}

TEST(PagedAttention, BackwardRefusesByName) {
  const PagedCase c = paged_case(2, 1, 8, 4, {5}, {5}, 4);
  const Tensor q = c.q.to(DType::f32).requires_grad_();
  const Tensor out =
      ops::paged_attention(q, c.k.to(DType::f32), c.v.to(DType::f32), c.table, c.seq, c.pos);
  try {
    ops::sum(out).backward();
    FAIL() << "backward through paged_attention did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[paged_attention] is inference-only"), std::string::npos)
        << e.what();
  }
}

}  // namespace
