// ZeRO-3 on a tiny LLaMA over 2 ranks (distributed::zero3_llama_logits): every module's
// parameters (embedding, each decoder layer with its rotary context bound through
// sharded_forward, the final norm, the output layer) are gathered only around their own
// computation; 5 AdamW steps match one process with the combined batch, and between steps each
// rank holds half the model's parameters.
#include "distributed/zero_llama.h"

#include <gtest/gtest.h>

#include <cmath>

#include "distributed/mesh.h"
#include "distributed/parallelize_llama.h"
#include "rank_runner.h"
#include "support/temp_dir.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::ZeroOptimizer;
using test::expect;
using zenith::testing::TempDir;

constexpr int kSteps = 5;
constexpr int64_t kSequences = 4, kLength = 6;

models::LlamaConfig tiny_config() {
  models::LlamaConfig c;
  c.vocab_size = 37;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.max_position_embeddings = 64;
  return c;
}

Tensor ids_for(int step, int rank, int ranks) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kSequences * kLength; ++i) ids.push_back((i * 7 + step * 5 + i / 5) % 37);
  Tensor all = Tensor::from_vector(ids, {kSequences, kLength});
  const int64_t rows = kSequences / ranks;
  return all.narrow(0, rank * rows, rows).contiguous();
}

std::vector<double> flatten(const std::vector<Tensor>& ts) {
  std::vector<double> out;
  for (const auto& t : ts)
    for (double v : t.contiguous().to_double_vector()) out.push_back(v);
  return out;
}

TEST(ZeroLlama, StageThreeOnTwoRanksMatchesOneProcess) {
  TempDir dir("zero_llama");
  auto results = test::run_ranks(2, [&](int rank) {
    context::set_num_threads(1);
    comm::init(test::rank_options(rank, 2, "file://" + dir.str()));
    // One process, the whole batch.
    manual_seed(11);
    models::Llama single(tiny_config());
    auto opt = nn::AdamW(single.trainable_params(), 1e-2);
    std::vector<double> single_losses;
    for (int s = 0; s < kSteps; ++s) {
      Tensor ids = ids_for(s, 0, 1);
      opt->zero_grad();
      Tensor loss = models::causal_lm_loss(single.forward({.input_ids = ids}), ids);
      single_losses.push_back(loss.item());
      loss.backward();
      opt->step();
    }
    // ZeRO-3 on 2 ranks, half the batch each.
    manual_seed(11);
    models::Llama model(tiny_config());
    const auto before = flatten(model.trainable_params());
    auto zero = std::make_shared<ZeroOptimizer>(
        model.trainable_params(),
        [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-2); },
        distributed::ZeroOptions{.stage = 3});
    const int64_t psi = model.num_parameters(true);
    const auto held = zero->model_state_bytes();
    expect(double(held.params) < 0.55 * double(psi) * 4, "stage 3 holds ", held.params,
           " parameter bytes of ", psi * 4);
    for (int s = 0; s < kSteps; ++s) {
      Tensor ids = ids_for(s, rank, 2);
      zero->zero_grad();
      Tensor loss = models::causal_lm_loss(distributed::zero3_llama_logits(model, zero, ids), ids);
      Tensor global = loss.detach().reshape({1}).clone();
      comm::all_reduce(global, comm::ReduceOp::AVG);
      const double l = global.to_double_vector()[0];
      expect(std::fabs(l - single_losses[size_t(s)]) < 1e-5 * single_losses[size_t(s)], "step ", s,
             " loss ", l, ", one process ", single_losses[size_t(s)]);
      loss.backward();
      zero->step();
    }
    std::vector<Tensor> params;
    for (size_t i = 0; i < zero->shards().size(); ++i) {
      zero->gather(i);
      params.push_back(zero->shards()[i].param.clone());
      zero->release(i);
    }
    const auto got = flatten(params), want = flatten(single.trainable_params());
    double diff = 0, scale = 0, moved = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff = std::max(diff, std::fabs(got[i] - want[i]));
      scale = std::max(scale, std::fabs(want[i]));
      moved = std::max(moved, std::fabs(want[i] - before[i]));
    }
    expect(moved > 1e-3, "the reference did not train");
    expect(diff / scale < 1e-4, "ZeRO-3 LLaMA vs one process: ", diff / scale);
    if (rank == 0)
      std::fprintf(stderr, "tiny LLaMA (%lld parameters) ZeRO-3 on 2 ranks vs one process: %.3g\n",
                   (long long)psi, diff / scale);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

// ZeRO over the data dimension of a data 2 x tensor 2 mesh, on a tensor-parallel model: each
// rank's tensor shards are split again by rows over its data group. 3 AdamW steps of stages 1
// and 2, clipped to norm 1 (the norm over both dimensions equal to one process's), equal one
// process with the combined batch.
TEST(ZeroLlama, DataTimesTensorParallelWithZeroOneAndTwoMatchesOneProcess) {
  TempDir dir("zero_tp");
  auto config = tiny_config();
  config.vocab_size = 38;  // the tensor degree divides it (ids stay below 37)
  auto results = test::run_ranks(4, [&](int rank) {
    context::set_num_threads(1);
    comm::init(test::rank_options(rank, 4, "file://" + dir.str()));
    auto mesh = distributed::DeviceMesh::create({.data = 2, .tensor = 2});
    manual_seed(11);
    models::Llama single(config);
    auto opt = nn::AdamW(single.trainable_params(), 1e-2);
    std::vector<double> single_norms;  // before clipping to 1
    for (int s = 0; s < 3; ++s) {
      Tensor ids = ids_for(s, 0, 1);
      opt->zero_grad();
      models::causal_lm_loss(single.forward({.input_ids = ids}), ids).backward();
      single_norms.push_back(nn::clip_grad_norm(single.trainable_params(), 1.0));
      opt->step();
    }
    for (int stage : {1, 2}) {
      manual_seed(11);
      models::Llama model(config);
      auto plan = distributed::parallelize_llama(model, {.group = mesh.tensor_group()});
      auto zero = std::make_shared<ZeroOptimizer>(
          model.trainable_params(),
          [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-2); },
          distributed::ZeroOptions{.stage = stage, .group = mesh.data_group()});
      // The norm over both dimensions: tensor shards' squares summed over the tensor group.
      distributed::ModelParallelNorm split{.group = mesh.tensor_group()};
      for (const auto& [name, p] : model.named_parameters())
        split.split.push_back(plan.sharded.count(name) > 0);
      for (int s = 0; s < 3; ++s) {
        Tensor ids = ids_for(s, mesh.data_rank(), 2);
        zero->zero_grad();
        distributed::tensor_parallel_lm_loss(model, plan, {.input_ids = ids}, ids).backward();
        plan.sync_gradients(model);
        const double norm = zero->clip_grad_norm(1.0, split);
        expect(std::fabs(norm - single_norms[size_t(s)]) < 1e-5 * single_norms[size_t(s)], "ZeRO-",
               stage, " step ", s, " gradient norm ", norm, ", one process ",
               single_norms[size_t(s)]);
        zero->step();
      }
      auto full = distributed::tensor_parallel_full_state(model, plan);
      double diff = 0, scale = 0;
      for (const auto& [name, p] : single.named_parameters()) {
        expect(full.count(name) > 0, "no ", name, " in the tensor-parallel state");
        auto a = full.at(name).contiguous().to_double_vector(),
             b = p.contiguous().to_double_vector();
        for (size_t i = 0; i < a.size(); ++i) {
          diff = std::max(diff, std::fabs(a[i] - b[i]));
          scale = std::max(scale, std::fabs(b[i]));
        }
      }
      expect(diff / scale < 1e-4, "data x tensor ZeRO-", stage, " vs one process: ", diff / scale);
      if (rank == 0)
        std::fprintf(stderr,
                     "data 2 x tensor 2, ZeRO-%d over the data group vs one process: %.3g\n", stage,
                     diff / scale);
    }
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

}  // namespace
}  // namespace zenith
