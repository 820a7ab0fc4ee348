// The memory ZeRO-3 buys: a LLaMA whose training state (weights, gradients, AdamW's two moments:
// 16 bytes a parameter) does not fit one process's memory limit trains on 4 ranks under the same
// limit per rank. Each rank builds the model shape-only (distributed::hollow_llama) and holds
// only its rows of each parameter (llama_initial_rows: the one-process initialisation, bit for
// bit), so no rank ever holds the whole model. The limit is RLIMIT_AS, the address space a
// process may add to what it had when forked (the platform's fallback for a job's `memory`).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <fstream>

#include "distributed/mesh.h"
#include "distributed/zero_llama.h"
#include "rank_runner.h"
#include "support/peak_rss.h"
#include "support/temp_dir.h"
#include "zenith/zenith.h"

namespace zenith {
namespace {

namespace comm = communication;
using distributed::ZeroOptimizer;
using test::expect;
using zenith::testing::proc_status_bytes;
using zenith::testing::TempDir;

constexpr int kRanks = 4, kSteps = 2;
constexpr int64_t kLength = 16;

// 33.5M parameters: 16Ψ = 536 MB of training state in one process, 134 MB per rank at ZeRO-3.
models::LlamaConfig demo_config() {
  models::LlamaConfig c;
  c.vocab_size = 8000;
  c.hidden_size = 512;
  c.intermediate_size = 1376;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 8;
  c.head_dim = 64;
  c.max_position_embeddings = 64;
  return c;
}

// The address space a rank may add to its forked parent's: above ZeRO-3's 16Ψ/4 (134 MB) with
// a gathered module, activations and the communication threads, below one process's 16Ψ.
constexpr int64_t kBudget = int64_t(320) << 20;

// Sequences [kRanks, kLength] of step `step`; rank r of n takes its rows.
Tensor ids_for(int step, int rank, int ranks, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kRanks * kLength; ++i)
    ids.push_back((i * 7919 + step * 131 + i / 5) % vocab);
  Tensor all = Tensor::from_vector(ids, {kRanks, kLength});
  const int64_t rows = kRanks / ranks;
  return all.narrow(0, rank * rows, rows).contiguous();
}

void limit_address_space(int64_t budget) {
  const int64_t now = proc_status_bytes("VmSize:");
  expect(now > 0, "no VmSize in /proc/self/status");
  rlimit rl{rlim_t(now + budget), rlim_t(now + budget)};
  expect(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit(RLIMIT_AS) failed");
}

void write_numbers(const std::string& path, const std::vector<double>& values) {
  std::ofstream f(path);
  f.precision(17);
  for (double v : values) f << v << "\n";
}

std::vector<double> read_numbers(const std::string& path) {
  std::ifstream f(path);
  std::vector<double> out;
  for (double v; f >> v;) out.push_back(v);
  return out;
}

// One process: the whole model, the whole batch, AdamW. Writes its losses and peak RSS.
void train_one_process(const std::string& out) {
  context::set_num_threads(1);
  manual_seed(7);
  models::Llama model(demo_config());
  auto opt = nn::AdamW(model.trainable_params(), 1e-3);
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    Tensor ids = ids_for(s, 0, 1, model.config().vocab_size);
    opt->zero_grad();
    Tensor loss = models::causal_lm_loss(model.forward({.input_ids = ids}), ids);
    losses.push_back(loss.item());
    loss.backward();
    opt->step();
  }
  losses.push_back(double(proc_status_bytes("VmHWM:")));
  write_numbers(out, losses);
}

TEST(ZeroMemory, ShapeOnlyRowsEqualTheOneProcessInitialisation) {
  auto config = demo_config();
  config.vocab_size = 37;
  config.hidden_size = 16;
  config.intermediate_size = 24;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 4;
  manual_seed(3);
  models::Llama whole(config);
  const std::string after = default_generator().state();
  TempDir dir("zero_rows");
  whole.save_pretrained(dir.str());
  auto hollow = distributed::hollow_llama(config);
  for (const auto& [name, p] : hollow->named_parameters())
    EXPECT_EQ(p.impl().storage->nbytes(), 0u) << name << " holds data";
  for (int ranks : {1, 3, 5}) {  // 5: some parameters' last chunks are empty (16 rows)
    std::vector<distributed::LlamaRows> drawn, read;
    for (int r = 0; r < ranks; ++r) {
      manual_seed(3);
      drawn.push_back(distributed::llama_initial_rows(config, r, ranks));
      EXPECT_EQ(default_generator().state(), after) << "rank " << r << " of " << ranks;
      read.push_back(distributed::llama_pretrained_rows(dir.str(), r, ranks));
    }
    for (const auto& [name, p] : whole.named_parameters()) {
      for (auto* rows : {&drawn, &read}) {
        std::vector<Tensor> parts;
        for (auto& rank_rows : *rows) parts.push_back(rank_rows.at(name));
        Tensor joined = ops::cat(parts, 0);
        ASSERT_EQ(joined.shape(), p.shape()) << name;
        EXPECT_EQ(joined.to_double_vector(), p.contiguous().to_double_vector())
            << name << " on " << ranks << " ranks (" << (rows == &drawn ? "drawn" : "read") << ")";
      }
    }
  }
}

TEST(ZeroMemory, ModelOneProcessCannotHoldTrainsOnFourRanksAtStageThree) {
  TempDir dir("zero_memory");
  const std::string reference = dir.str() + "/one_process.txt";
  // The reference, without a limit, in its own process (the test process stays small: its
  // address space is what the limited processes start from).
  auto one = test::run_ranks(
      1, [&](int) { train_one_process(reference); }, 120);
  ASSERT_TRUE(one[0].ok()) << test::describe(one);
  const std::vector<double> want = read_numbers(reference);
  ASSERT_EQ(want.size(), size_t(kSteps + 1));

  // The same under the per-rank limit: out of memory, saying how much it tried to allocate.
  auto limited = test::run_ranks(
      1,
      [&](int) {
        limit_address_space(kBudget);
        train_one_process(dir.str() + "/limited.txt");
      },
      120);
  ASSERT_FALSE(limited[0].ok()) << "one process trained within the limit";
  EXPECT_TRUE(test::contains(limited[0].message, "out of memory allocating") &&
              test::contains(limited[0].message, "address-space limit (RLIMIT_AS)"))
      << limited[0].message;
  std::fprintf(stderr, "one process under the limit: %s\n", limited[0].message.c_str());

  // ZeRO-3 on 4 ranks, each under the limit, each with a quarter of the batch.
  auto ranks = test::run_ranks(
      kRanks,
      [&](int rank) {
        limit_address_space(kBudget);
        context::set_num_threads(1);
        comm::init(test::rank_options(rank, kRanks, "file://" + dir.str()));
        const models::LlamaConfig config = demo_config();
        manual_seed(7);
        auto model = distributed::hollow_llama(config);
        auto rows = distributed::llama_initial_rows(config, rank, kRanks);
        auto zero = std::make_shared<ZeroOptimizer>(
            model->trainable_params(),
            [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-3); },
            distributed::ZeroOptions{
                .stage = 3, .rows_of = distributed::llama_rows_of(*model, std::move(rows))});
        std::vector<double> losses;
        for (int s = 0; s < kSteps; ++s) {
          Tensor ids = ids_for(s, rank, kRanks, config.vocab_size);
          zero->zero_grad();
          Tensor loss =
              models::causal_lm_loss(distributed::zero3_llama_logits(*model, zero, ids), ids);
          Tensor global = loss.detach().reshape({1}).clone();
          comm::all_reduce(global, comm::ReduceOp::AVG);
          losses.push_back(global.to_double_vector()[0]);
          loss.backward();
          zero->step();
        }
        const auto state = zero->model_state_bytes();
        losses.push_back(double(proc_status_bytes("VmHWM:")));
        losses.push_back(double(state.total()));
        write_numbers(dir.str() + "/rank" + std::to_string(rank) + ".txt", losses);
        comm::release();
      },
      180);
  ASSERT_TRUE(std::all_of(ranks.begin(), ranks.end(), [](auto& r) { return r.ok(); }))
      << test::describe(ranks);
  double psi = 0;
  for (const auto& p : models::expected_llama_parameters(demo_config()))
    psi += double(shape_numel(p.shape));
  const double mib = 1 << 20;
  std::fprintf(stderr, "one process: peak RSS %.0f MiB (16Ψ = %.0f MiB); limit +%lld MiB\n",
               want[kSteps] / mib, 16 * psi / mib, (long long)(kBudget >> 20));
  for (int r = 0; r < kRanks; ++r) {
    const auto got = read_numbers(dir.str() + "/rank" + std::to_string(r) + ".txt");
    ASSERT_EQ(got.size(), size_t(kSteps + 2));
    for (int s = 0; s < kSteps; ++s)
      EXPECT_NEAR(got[size_t(s)], want[size_t(s)], 1e-5 * want[size_t(s)])
          << "rank " << r << " step " << s;
    std::fprintf(stderr, "ZeRO-3 rank %d: peak RSS %.0f MiB, model state %.1f MiB\n", r,
                 got[kSteps] / mib, got[kSteps + 1] / mib);
  }
}

}  // namespace
}  // namespace zenith
