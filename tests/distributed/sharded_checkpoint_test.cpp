// Sharded checkpoints: ZeRO-3 state saved on 2 ranks loads on 4 ranks (another split of every
// parameter's rows, uneven ones included) and in one process; every re-saved tensor is
// bit-identical and the resumed run's next loss equals the uninterrupted run's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iomanip>

#include "distributed/zero_checkpoint.h"
#include "rank_runner.h"
#include "support/temp_dir.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::ShardedCheckpointReader;
using distributed::ZeroOptimizer;
using test::expect;
using zenith::testing::TempDir;

constexpr int64_t kBatch = 8;

struct Net {
  nn::CellPtr first, second, plain;
  std::vector<std::string> names;
};

Net make_net(uint64_t seed) {
  manual_seed(seed);
  Net n;
  n.first = nn::Dense(6, 5);
  n.second = nn::Dense(5, 3);
  n.plain = nn::SequentialCell({n.first, nn::ReLU(), n.second});
  for (const auto& [name, _] : n.plain->named_parameters()) n.names.push_back(name);
  return n;
}

std::pair<Tensor, Tensor> batch(int step, int rank, int ranks) {
  auto saved = default_generator().state();
  manual_seed(uint64_t(500 + step));
  Tensor x = Tensor::randn({kBatch, 6}), y = Tensor::randn({kBatch, 3});
  default_generator().set_state(saved);
  const int64_t rows = kBatch / ranks;
  return {x.narrow(0, rank * rows, rows).contiguous(), y.narrow(0, rank * rows, rows).contiguous()};
}

struct ZeroRun {
  Net net;
  std::shared_ptr<ZeroOptimizer> zero;
  nn::CellPtr model;
};

ZeroRun zero3(uint64_t seed) {
  ZeroRun r{make_net(seed), nullptr, nullptr};
  r.zero = std::make_shared<ZeroOptimizer>(
      r.net.plain->trainable_params(),
      [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-2); },
      distributed::ZeroOptions{.stage = 3, .broadcast_initial = seed == 1});
  r.model = nn::SequentialCell({distributed::fully_shard(r.net.first, r.zero), nn::ReLU(),
                                distributed::fully_shard(r.net.second, r.zero)});
  return r;
}

// The global batch's loss at `step` (the mean of the ranks' equal-sized means).
double loss_at(const nn::CellPtr& model, int step, int rank, int ranks) {
  auto [x, y] = batch(step, rank, ranks);
  NoGradGuard no_grad;
  Tensor loss = ops::mse_loss(model->forward(x), y).reshape({1}).to(DType::f64);
  if (ranks > 1) comm::all_reduce(loss, comm::ReduceOp::AVG);
  return loss.to_double_vector()[0];
}

void write_number(const std::string& path, double v) {
  std::ofstream(path) << std::setprecision(17) << v;
}
double read_number(const std::string& path) {
  double v = 0;
  std::ifstream(path) >> v;
  return v;
}

TEST(ShardedCheckpoint, ZeroThreeOnTwoRanksLoadsOnFourAndInOneProcess) {
  TempDir dir("sharded");
  const std::string a = dir.str() + "/two", b = dir.str() + "/four", c = dir.str() + "/one";
  // 2 ranks: 3 steps, save, then the 4th step's loss of the uninterrupted run.
  auto two = test::run_ranks(2, [&](int rank) {
    comm::init(test::rank_options(rank, 2, "file://" + dir.str() + "/store2"));
    ZeroRun r = zero3(1);
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(s, rank, 2);
      r.zero->zero_grad();
      ops::mse_loss(r.model->forward(x), y).backward();
      r.zero->step();
    }
    distributed::save_zero_checkpoint(a, *r.zero, r.net.names);
    const double next = loss_at(r.model, 3, rank, 2);
    if (rank == 0) write_number(dir.str() + "/loss2", next);
    comm::release();
  });
  for (const auto& r : two) ASSERT_TRUE(r.ok()) << test::describe(two);
  // 4 ranks, other initial weights: load, check the next loss, save again.
  auto four = test::run_ranks(4, [&](int rank) {
    comm::init(test::rank_options(rank, 4, "file://" + dir.str() + "/store4"));
    ZeroRun r = zero3(uint64_t(77 + rank));
    distributed::load_zero_checkpoint(a, *r.zero, r.net.names);
    expect(r.zero->inner().step_count() == 3, "step count ", r.zero->inner().step_count());
    const double next = loss_at(r.model, 3, rank, 4);
    if (rank == 0) write_number(dir.str() + "/loss4", next);
    distributed::save_zero_checkpoint(b, *r.zero, r.net.names);
    comm::release();
  });
  for (const auto& r : four) ASSERT_TRUE(r.ok()) << test::describe(four);
  const double uninterrupted = read_number(dir.str() + "/loss2");
  ASSERT_GT(uninterrupted, 0.1);  // written, and a real loss
  EXPECT_NEAR(read_number(dir.str() + "/loss4"), uninterrupted, 1e-6 * uninterrupted);
  // One process: every tensor whole, saved as a checkpoint of one rank.
  auto one = test::run_ranks(1, [&](int) {
    comm::init(test::rank_options(0, 1, ""));
    ShardedCheckpointReader reader(b);
    std::vector<distributed::ShardedTensor> pieces;
    for (const auto& name : reader.names())
      pieces.push_back({name, reader.global_shape(name), {}, reader.read_full(name)});
    // The plain model takes the parameters and gives the same next loss.
    Net net = make_net(5);
    nn::StateDict state;
    for (const auto& name : net.names) state[name] = reader.read_full(name);
    net.plain->load_state_dict(state);
    write_number(dir.str() + "/loss1", loss_at(net.plain, 3, 0, 1));
    distributed::save_sharded(c, pieces);
    comm::release();
  });
  ASSERT_TRUE(one[0].ok()) << test::describe(one);
  EXPECT_NEAR(read_number(dir.str() + "/loss1"), uninterrupted, 1e-6 * uninterrupted);
  std::printf("next loss: uninterrupted %.9g, resumed on 4 ranks %.9g, in one process %.9g\n",
              uninterrupted, read_number(dir.str() + "/loss4"), read_number(dir.str() + "/loss1"));

  ShardedCheckpointReader ra(a), rb(b), rc(c);
  ASSERT_EQ(ra.names(), rb.names());
  ASSERT_EQ(ra.names(), rc.names());
  // 4 parameters, 2 AdamW slots each, the step.
  EXPECT_EQ(ra.names().size(), 4u * 3 + 1);
  for (const auto& name : ra.names()) {
    const auto full = ra.read_full(name);
    EXPECT_EQ(rb.read_full(name).to_double_vector(), full.to_double_vector()) << name;
    EXPECT_EQ(rc.read_full(name).to_double_vector(), full.to_double_vector()) << name;
  }
  // Rows were really split: 5 rows over 4 ranks are 2, 2, 1 and an empty last shard.
  const auto meta = nlohmann::json::parse(std::ifstream(b + "/metadata.json"));
  EXPECT_EQ(meta["ranks"], 4);
  EXPECT_EQ(meta["tensors"]["0.weight"]["pieces"].size(), 3u) << meta.dump();
  EXPECT_EQ(meta["tensors"]["optimizer.step"]["pieces"].size(), 1u);  // replicated: once
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(std::filesystem::exists(b + "/shard-" + std::to_string(r) + ".safetensors"));
  // A missing block is a clear error, not garbage.
  std::filesystem::remove(c + "/metadata.json");
  EXPECT_THROW(ShardedCheckpointReader{c}, Error);
}

}  // namespace
}  // namespace zenith
