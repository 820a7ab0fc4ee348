// ZeRO-3 over the data dimension of a data 2 x tensor 2 mesh (FSDP2 + tensor parallel,
// torchtitan's "2D"): the tiny LLaMA rewritten by parallelize_llama over the tensor group, each
// rank's tensor shards split again by rows over its data group and gathered per module around
// its forward and backward (distributed::zero3_tensor_parallel_llama_loss). 20 SGD steps and 20
// clipped AdamW steps (also with sequence parallelism) equal one process with the whole batch
// (1e-5, 1e-4) and the same layout at ZeRO-1 (1e-6); a rank holds a quarter of one process's
// model state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "distributed/mesh.h"
#include "distributed/parallelize_llama.h"
#include "distributed/zero_llama.h"
#include "rank_runner.h"
#include "support/temp_dir.h"
#include "tiny_llama.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::ZeroOptimizer;
using test::expect;
using zenith::testing::TempDir;

using MakeOptimizer = std::function<nn::OptimizerPtr(std::vector<Tensor>)>;
using State = std::map<std::string, Tensor>;

constexpr int kSteps = 20;

// Step s's batch, [4, 8]; data rank d of 2 takes rows 2d, 2d + 1.
Tensor batch(int step) {
  manual_seed(400 + uint64_t(step));
  return Tensor::randint(0, 64, {4, 8});
}

// max |a - b| / max |b|
double relative(const Tensor& a, const Tensor& b) {
  auto x = a.contiguous().to_double_vector(), y = b.contiguous().to_double_vector();
  expect(x.size() == y.size(), "sizes differ: ", x.size(), " vs ", y.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff / scale;
}

State cloned(const std::vector<std::pair<std::string, Tensor>>& named) {
  State out;
  for (const auto& [name, p] : named) out.emplace(name, p.detach().clone());
  return out;
}

// One process, the whole batch: the final weights and each step's gradient norm.
State one_process(const models::LlamaConfig& config, const MakeOptimizer& make, double clip,
                  std::vector<double>& norms) {
  manual_seed(16);
  models::Llama model(config);
  auto opt = make(model.trainable_params());
  for (int s = 0; s < kSteps; ++s) {
    Tensor ids = batch(s);
    opt->zero_grad();
    models::causal_lm_loss(model.forward({.input_ids = ids}), ids).backward();
    norms.push_back(nn::clip_grad_norm(model.trainable_params(), clip));
    opt->step();
  }
  return cloned(model.named_parameters());
}

struct Layout {
  State local;  // this rank's tensor shards, whole over the data group
  State full;   // the whole model, gathered as zenith finetune saves it
  distributed::ZeroMemory held;
  double live = 0;  // the allocator's live bytes of the run's model state
};

// Data 2 x tensor 2 at ZeRO `stage` over the data group: 20 steps, norms checked against `norms`.
Layout two_d(const models::LlamaConfig& config, const distributed::DeviceMesh& mesh, int stage,
             const MakeOptimizer& make, double clip, const std::vector<double>& norms,
             bool sequence_parallel) {
  const size_t live_before = core::allocator_stats().live_bytes;
  manual_seed(16);
  models::Llama model(config);
  auto plan = distributed::parallelize_llama(
      model, {.group = mesh.tensor_group(), .sequence_parallel = sequence_parallel});
  auto zero = std::make_shared<ZeroOptimizer>(
      model.trainable_params(), make,
      distributed::ZeroOptions{.stage = stage, .group = mesh.data_group()});
  distributed::ModelParallelNorm split{.group = mesh.tensor_group()};
  for (const auto& [name, p] : model.named_parameters())
    split.split.push_back(plan.sharded.count(name) > 0);
  Layout out;
  for (int s = 0; s < kSteps; ++s) {
    Tensor mine = batch(s).slice(0, 2 * mesh.data_rank(), 2 * mesh.data_rank() + 2).contiguous();
    zero->zero_grad();
    if (stage == 3) {
      distributed::zero3_tensor_parallel_llama_loss(model, plan, zero, mine, Tensor(), mine, 1.0,
                                                    true)
          .backward();
      distributed::zero3_tensor_parallel_sync_gradients(model, plan, *zero);
    } else {
      distributed::tensor_parallel_lm_loss(model, plan, {.input_ids = mine}, mine).backward();
      plan.sync_gradients(model);
    }
    const double norm = zero->clip_grad_norm(clip, split);
    expect(std::fabs(norm - norms[size_t(s)]) < 1e-5 * norms[size_t(s)], "ZeRO-", stage, " step ",
           s, " gradient norm ", norm, ", one process ", norms[size_t(s)]);
    zero->step();
  }
  out.held = zero->model_state_bytes();
  out.live = double(core::allocator_stats().live_bytes - live_before);
  // Every local parameter gathered over the data group, then the tensor shards over the tensor
  // group (as zenith finetune's end-of-run model).
  for (size_t i = 0; i < zero->shards().size(); ++i) zero->gather(i);
  out.local = cloned(model.named_parameters());
  out.full = distributed::tensor_parallel_full_state(model, plan);
  for (size_t i = 0; i < zero->shards().size(); ++i) zero->release(i);
  return out;
}

void train(bool tied, const MakeOptimizer& make, double clip, double tolerance, double states,
           bool sequence_parallel = false) {
  TempDir dir("zero_tp");
  const models::LlamaConfig config = test::tiny_llama_config(tied);
  auto results = test::run_ranks(4, [&](int rank) {
    context::set_num_threads(1);
    comm::init(test::rank_options(rank, 4, "file://" + dir.str()));
    auto mesh = distributed::DeviceMesh::create({.data = 2, .tensor = 2});
    std::vector<double> norms;
    const State want = one_process(config, make, clip, norms);
    const Layout one = two_d(config, mesh, 1, make, clip, norms, sequence_parallel);
    const Layout three = two_d(config, mesh, 3, make, clip, norms, sequence_parallel);
    double vs_one = 0, vs_zero1 = 0;
    for (const auto& [name, w] : want) {
      expect(three.full.count(name) > 0, "no ", name, " in the gathered model");
      vs_one = std::max(vs_one, relative(three.full.at(name), w));
    }
    for (const auto& [name, p] : three.local)
      vs_zero1 = std::max(vs_zero1, relative(p, one.local.at(name)));
    double psi = 0;
    for (const auto& [name, w] : want) psi += double(w.numel());
    const double whole = (8 + states) * psi;  // one process's model state
    const double held = double(three.held.total());
    if (rank == 0)
      std::fprintf(stderr,
                   "data 2 x tensor 2%s, ZeRO-3 (%s, %s): vs one process %.3g, vs ZeRO-1 %.3g; "
                   "model state per rank %.0f bytes (allocator live %.0f) = %.3fx one "
                   "process's %.0f\n",
                   sequence_parallel ? " + sequence parallel" : "", tied ? "tied" : "untied",
                   states > 0 ? "AdamW" : "SGD", vs_one, vs_zero1, held, three.live, held / whole,
                   whole);
    expect(vs_one < tolerance, "ZeRO-3 x tensor 2 vs one process: ", vs_one);
    expect(vs_zero1 < 1e-6, "ZeRO-3 vs ZeRO-1 on data 2 x tensor 2: ", vs_zero1);
    // A quarter, but for the norms' weights, whole on both tensor ranks (under 1% here).
    expect(std::fabs(held / (whole / 4) - 1) < 0.02, "ZeRO-3 holds ", held, " bytes, ", whole / 4,
           " expected");
    expect(std::fabs(three.live / held - 1) < 0.05, "allocator live bytes ", three.live,
           ", ZeRO-3 model state ", held);
    comm::release();
  });
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(ZeroTensorParallel, TwentySgdStepsMatchOneProcessAndZeroOne) {
  train(
      false, [](std::vector<Tensor> p) { return nn::SGD(std::move(p), 0.1); }, 1e9, 1e-5, 0);
}

TEST(ZeroTensorParallel, TwentyClippedAdamWStepsMatchOneProcessAndZeroOne) {
  train(
      true, [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-2); }, 1.0, 1e-4, 8);
}

// Sequence parallelism inside the tensor groups: the norms' weights, replicated, get partial
// gradients on each tensor rank, summed over the tensor group in their data-group shards.
TEST(ZeroTensorParallel, SequenceParallelAdamWStepsMatchOneProcessAndZeroOne) {
  train(
      false, [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-2); }, 1.0, 1e-4, 8,
      true);
}

}  // namespace
}  // namespace zenith
