// ZeRO stages 1, 2 and 3 on 2 forked ranks against DDP (the same math in another layout) and
// against one process with the combined batch: 20 SGD and 20 AdamW steps of a small MLP whose
// rows split unevenly (7 and 3 rows over 2 ranks), the gradient norm, and model-state bytes per
// rank against the ZeRO formulas.
#include "distributed/zero.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/allocator.h"
#include "distributed/mesh.h"
#include "rank_runner.h"
#include "support/temp_dir.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::MeshDim;
using distributed::ZeroOptimizer;
using test::expect;
using zenith::testing::TempDir;

constexpr int kSteps = 20;
constexpr int64_t kGlobalBatch = 8;

struct Mlp {
  nn::CellPtr first, second, net;
};

// Linear 5 -> 7, tanh, linear 7 -> 3: the same initial weights in every process.
Mlp make_mlp() {
  manual_seed(42);
  Mlp m;
  m.first = nn::Dense(5, 7);
  m.second = nn::Dense(7, 3);
  m.net = nn::SequentialCell({m.first, nn::Tanh(), m.second});
  return m;
}

// Step s's global batch; rank r of n takes its rows.
std::pair<Tensor, Tensor> batch(int step, int rank, int n) {
  auto saved = default_generator().state();
  manual_seed(uint64_t(1000 + step));
  Tensor x = Tensor::randn({kGlobalBatch, 5});
  Tensor y = Tensor::randn({kGlobalBatch, 3});
  default_generator().set_state(saved);
  const int64_t rows = kGlobalBatch / n;
  return {x.narrow(0, rank * rows, rows).contiguous(), y.narrow(0, rank * rows, rows).contiguous()};
}

nn::OptimizerPtr make_optimizer(bool adamw, std::vector<Tensor> params) {
  return adamw ? nn::AdamW(std::move(params), 1e-2, 0.9, 0.999, 1e-8, 0.01)
               : nn::SGD(std::move(params), 0.1, 0.9);
}

std::vector<double> flatten(const std::vector<Tensor>& params) {
  std::vector<double> out;
  for (const auto& p : params)
    for (double v : p.contiguous().to_double_vector()) out.push_back(v);
  return out;
}

double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  expect(a.size() == b.size(), "sizes differ: ", a.size(), " vs ", b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / scale;
}

double global_grad_norm(const std::vector<Tensor>& params) {
  double sum = 0;
  for (const auto& p : params)
    for (double v : p.grad().to_double_vector()) sum += v * v;
  return std::sqrt(sum);
}

// One process, the whole batch: the parameters after kSteps, and the first step's gradient norm.
std::vector<double> train_single(bool adamw, double* first_norm) {
  Mlp m = make_mlp();
  auto opt = make_optimizer(adamw, m.net->trainable_params());
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = batch(s, 0, 1);
    opt->zero_grad();
    ops::mse_loss(m.net->forward(x), y).backward();
    if (s == 0) *first_norm = global_grad_norm(m.net->trainable_params());
    opt->step();
  }
  return flatten(m.net->trainable_params());
}

// This rank's place in the data-parallel dimension.
struct DataParallel {
  comm::Group group;  // default: the world
  int rank = 0, size = 1;
};

std::vector<double> train_ddp(bool adamw, const DataParallel& dp) {
  Mlp m = make_mlp();
  auto ddp = nn::DistributedDataParallel(m.net, {.group = dp.group});
  auto opt = make_optimizer(adamw, ddp->trainable_params());
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = batch(s, dp.rank, dp.size);
    opt->zero_grad();
    ops::mse_loss(ddp->forward(x), y).backward();
    opt->step();
  }
  return flatten(m.net->trainable_params());
}

// The parameters of every stage, whole (stage 3 gathers them for the comparison).
std::vector<double> full_params(ZeroOptimizer& zero) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < zero.shards().size(); ++i) {
    zero.gather(i);
    out.push_back(zero.shards()[i].param.clone());
    zero.release(i);
  }
  return flatten(out);
}

// stage 4 here: stage 2 reducing at step() (ZeroOptions::reduce_in_backward false).
std::vector<double> train_zero(bool adamw, int stage, const DataParallel& dp, double* first_norm) {
  const bool at_step = stage == 4;
  if (at_step) stage = 2;
  Mlp m = make_mlp();
  auto zero = std::make_shared<ZeroOptimizer>(
      m.net->trainable_params(),
      [adamw](std::vector<Tensor> p) { return make_optimizer(adamw, std::move(p)); },
      distributed::ZeroOptions{.stage = stage, .group = dp.group, .reduce_in_backward = !at_step});
  nn::CellPtr net = m.net;
  if (stage == 3)
    net = nn::SequentialCell({distributed::fully_shard(m.first, zero), nn::Tanh(),
                              distributed::fully_shard(m.second, zero)});
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = batch(s, dp.rank, dp.size);
    zero->zero_grad();
    ops::mse_loss(net->forward(x), y).backward();
    if (s == 0) *first_norm = zero->grad_norm();
    zero->step();
  }
  if (stage == 3)
    for (const auto& sh : zero->shards())
      expect(sh.param.storage()->nbytes() == 0, "stage 3 kept a gathered parameter");
  return full_params(*zero);
}

// Every stage against DDP over the same group and one process with the global batch, for each
// optimizer, on `world` ranks arranged as `shape` (ZeRO and DDP over its data dimension).
void check_equivalence(int world, distributed::MeshShape shape, std::vector<bool> optimizers) {
  TempDir dir("zero");
  auto results = test::run_ranks(
      world,
      [&](int rank) {
        context::set_num_threads(1);
        comm::init(test::rank_options(rank, world, "file://" + dir.str()));
        auto mesh = distributed::DeviceMesh::create(shape);
        const DataParallel dp{mesh.data_group(), mesh.data_rank(), mesh.degree(MeshDim::data)};
        for (bool adamw : optimizers) {
          const char* name = adamw ? "AdamW" : "SGD";
          double single_norm = 0;
          auto single = train_single(adamw, &single_norm);
          auto ddp = train_ddp(adamw, dp);
          expect(relative_difference(ddp, single) < (adamw ? 1e-4 : 1e-5), name, " DDP vs one");
          for (int stage : {1, 2, 3, 4}) {
            double norm = 0;
            auto zero = train_zero(adamw, stage, dp, &norm);
            const std::string label = stage == 4 ? "2 reducing at step()" : std::to_string(stage);
            const double vs_ddp = relative_difference(zero, ddp);
            const double vs_single = relative_difference(zero, single);
            expect(vs_ddp < 1e-6, name, " ZeRO-", label, " vs DDP: ", vs_ddp);
            expect(vs_single < (adamw ? 1e-4 : 1e-5), name, " ZeRO-", label,
                   " vs one: ", vs_single);
            expect(std::fabs(norm - single_norm) < 1e-5 * single_norm, name, " ZeRO-", label,
                   " gradient norm ", norm, ", one process ", single_norm);
            // The parameters moved: the comparison is not of initial weights.
            expect(relative_difference(zero, flatten(make_mlp().net->trainable_params())) > 1e-3,
                   name, " ZeRO-", label, " did not train");
            if (rank == 0)
              std::fprintf(stderr,
                           "%s, %s: ZeRO-%s vs DDP %.3g, vs one process %.3g, norm %.9g/%.9g\n",
                           mesh.layout().describe().c_str(), name, label.c_str(), vs_ddp, vs_single,
                           norm, single_norm);
          }
        }
        comm::release();
      },
      120);
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

TEST(Zero, StagesOneTwoThreeMatchDdpAndOneProcessOnTwoRanks) {
  check_equivalence(2, {}, {false, true});
}

// ZeRO over the data dimension of a data 2 x tensor 2 mesh: each data group is two ranks.
TEST(Zero, StagesMatchOverTheDataGroupOfATwoByTwoMesh) {
  check_equivalence(4, {.data = 2, .tensor = 2}, {true});
}

// 4 data ranks: 3 rows split 1, 1, 1 and an empty last shard.
TEST(Zero, StagesMatchWithEmptyLastShardsOnFourRanks) { check_equivalence(4, {}, {false}); }

// Model-state bytes per rank (float32, AdamW: K = 8 bytes of state per parameter) after a step,
// before zero_grad, against the ZeRO paper's formulas; and the bytes each step sent.
TEST(Zero, ModelStateBytesPerRankFollowTheFormulas) {
  TempDir dir("zero");
  const int n = 2;
  auto results = test::run_ranks(
      n,
      [&](int rank) {
        context::set_num_threads(1);
        comm::init(test::rank_options(rank, n, "file://" + dir.str()));
        const double psi = 2.0 * (256 * 256 + 256);
        const double expected[4] = {16 * psi, 8 * psi + 8 * psi / n, 4 * psi + 12 * psi / n,
                                    16 * psi / n};
        // Bytes sent per step: ring reduce-scatter and all-gather move (n-1)/n of 4Ψ each; stage
        // 1 all-reduces (both); stage 3 gathers twice (forward, and backward's recompute).
        const double ring = 4 * psi * (n - 1) / n;
        const double sent[4] = {0, 2 * ring, 2 * ring, 3 * ring};
        for (int stage : {1, 2, 3}) {
          const size_t live_before = core::allocator_stats().live_bytes;
          manual_seed(3);
          auto first = nn::Dense(256, 256), second = nn::Dense(256, 256);
          nn::CellPtr net = nn::SequentialCell({first, nn::Tanh(), second});
          auto zero = std::make_shared<ZeroOptimizer>(
              net->trainable_params(),
              [](std::vector<Tensor> p) { return make_optimizer(true, std::move(p)); },
              distributed::ZeroOptions{.stage = stage});
          if (stage == 3)
            net = nn::SequentialCell({distributed::fully_shard(first, zero), nn::Tanh(),
                                      distributed::fully_shard(second, zero)});
          Tensor x = Tensor::randn({4, 256}), y = Tensor::randn({4, 256});
          ops::mse_loss(net->forward(x), y).backward();  // warm-up: AdamW's states exist after
          zero->step();
          zero->zero_grad();
          const auto traffic_before = distributed::group_traffic({});
          ops::mse_loss(net->forward(x), y).backward();
          zero->step();
          const auto traffic = distributed::group_traffic({});
          const auto m = zero->model_state_bytes();
          const double held = double(m.total());
          const double live = double(core::allocator_stats().live_bytes - live_before);
          const double step_sent = double(traffic.bytes_sent - traffic_before.bytes_sent);
          if (rank == 0)
            std::fprintf(stderr,
                         "ZeRO-%d on %d ranks: params %llu, grads %llu, states %llu = %.0f bytes "
                         "(formula %.0f, %.3fx; allocator live %.0f); one process 16Ψ = %.0f; "
                         "sent per step %.0f (formula %.0f)\n",
                         stage, n, (unsigned long long)m.params, (unsigned long long)m.grads,
                         (unsigned long long)m.optimizer_states, held, expected[stage],
                         held / expected[stage], live, 16 * psi, step_sent, sent[stage]);
          expect(std::fabs(held / expected[stage] - 1) < 0.05, "ZeRO-", stage, " holds ", held,
                 " bytes, formula ", expected[stage]);
          expect(std::fabs(live / expected[stage] - 1) < 0.05, "ZeRO-", stage,
                 " allocator live bytes ", live, ", formula ", expected[stage]);
          expect(std::fabs(step_sent / sent[stage] - 1) < 0.05, "ZeRO-", stage, " sent ", step_sent,
                 " bytes in a step, formula ", sent[stage]);
        }
        comm::release();
      },
      120);
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << test::describe(results);
}

}  // namespace
}  // namespace zenith
