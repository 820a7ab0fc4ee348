// zenith finetune --zero 3 --eval-data's evaluation (finetune::detail::evaluate_zero3) walks the
// decoder as ZeRO-3's training forward does: each module's parameters gathered around its own
// forward and freed after. On 2 ranks it gives one process's eval loss, and while it runs a
// rank's allocator never holds more than its shards, one module gathered and the activations
// (never the whole model, which a gather of every parameter would add).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "rank_runner.h"
#include "support/temp_dir.h"
#include "train/finetune_zero.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using test::expect;
using zenith::testing::TempDir;

// Parameters dominate the activations of these short batches: a layer is 257 KiB, the model
// 1.3 MiB, the largest activation (the logits of 2 x 8 tokens) 32 KiB.
models::LlamaConfig config() {
  models::LlamaConfig c;
  c.vocab_size = 512;
  c.hidden_size = 64;
  c.intermediate_size = 256;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  return c;
}

// Five examples of 3 to 8 tokens, the first two of each a prompt (not learned): with batches
// of 2, rank 0 takes batches 0 and 2, rank 1 batch 1 and then a stand-in.
finetune::Data eval_data() {
  finetune::Data data;
  for (int e = 0; e < 5; ++e) {
    finetune::Example ex;
    for (int i = 0; i < 3 + (e * 3) % 6; ++i) {
      ex.ids.push_back((e * 37 + i * 11) % 512);
      ex.labels.push_back(i < 2 ? -100 : ex.ids.back());
    }
    data.examples.push_back(ex);
  }
  return data;
}

// Bytes of float32 parameters of the largest module ZeRO-3's walk gathers at once.
double largest_module_bytes(const models::LlamaConfig& c) {
  const double h = double(c.hidden_size), q = double(c.num_attention_heads * c.head_dim),
               kv = double(c.num_key_value_heads * c.head_dim);
  const double layer = h * q * 2 + h * kv * 2 + 3 * h * double(c.intermediate_size) + 2 * h;
  return 4 * std::max(layer, double(c.vocab_size) * h);
}

TEST(ZeroEval, LayerByLayerMatchesOneProcessAndHoldsOneModule) {
  TempDir dir("zero_eval");
  auto results = test::run_ranks(2, [&](int rank) {
    comm::init(test::rank_options(rank, 2, "file://" + dir.str()));
    context::set_num_threads(1);
    manual_seed(5);
    auto model = std::make_shared<models::Llama>(config());
    const finetune::Data data = eval_data();
    double whole = 0;
    for (const Tensor& p : model->trainable_params()) whole += double(p.nbytes());

    // One process: every weight whole. Its peak above what it held is the activations.
    size_t live = core::allocator_stats().live_bytes;
    core::reset_peak_live_bytes();
    const finetune::EvalRecord one = finetune::detail::evaluate_shared(*model, data, 2, 0, nullptr);
    const double activations = double(core::allocator_stats().peak_live_bytes - live);

    auto zero = std::make_shared<distributed::ZeroOptimizer>(
        model->trainable_params(),
        [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-3); },
        distributed::ZeroOptions{.stage = 3, .reduce = comm::ReduceOp::SUM});
    live = core::allocator_stats().live_bytes;  // this rank's shards, and nothing gathered
    core::reset_peak_live_bytes();
    const finetune::EvalRecord got =
        finetune::detail::evaluate_zero3(*model, zero, data, 2, 0, Ranks());
    const double above = double(core::allocator_stats().peak_live_bytes - live);

    expect(got.targets == one.targets && one.targets > 0, "targets ", got.targets, " vs ",
           one.targets);
    expect(std::abs(got.loss - one.loss) <= 1e-6, "rank ", rank, ": eval loss ", got.loss,
           " vs one process ", one.loss);
    expect(std::abs(got.perplexity - std::exp(one.loss)) <= 1e-5 * got.perplexity, "perplexity");
    // Shards + one module + the activations (with room for a gather's padding and the walk's
    // kept hidden state); the bound stays far below the whole model gathered.
    const double bound = 1.1 * largest_module_bytes(config()) + 1.5 * activations;
    expect(bound < 0.6 * whole, "the bound ", bound, " must tell one module from the model ",
           whole);
    expect(above <= bound, "rank ", rank, ": eval held ", above, " bytes above its shards; one ",
           "module is ", largest_module_bytes(config()), ", activations ", activations,
           ", the whole model ", whole);
    if (rank == 0)
      std::fprintf(stderr,
                   "eval loss %.9f (one process %.9f); held %.0f bytes above the shards, bound "
                   "%.0f, one module %.0f, whole model %.0f\n",
                   got.loss, one.loss, above, bound, largest_module_bytes(config()), whole);
    for (const auto& s : zero->shards())
      expect(!s.gathered, "a parameter stayed gathered after the evaluation");
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

}  // namespace
}  // namespace zenith
