// The memory ZeRO-3 buys: a LLaMA whose training state (weights, gradients, AdamW's two moments:
// 16 bytes a parameter) does not fit one process's memory limit trains on 4 ranks under the same
// limit per rank. Each rank builds the model shape-only (distributed::hollow_llama) and holds
// only its rows of each parameter (llama_initial_rows: the one-process initialisation, bit for
// bit), so no rank ever holds the whole model. The limit is RLIMIT_AS, the address space a
// process may add to what it had when forked (the platform's fallback for a job's `memory`).
// The pieces are in zero_memory_demo.h; slurm_zero_memory_test.cpp runs the same over 2 nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "rank_runner.h"
#include "support/temp_dir.h"
#include "zero_memory_demo.h"

namespace zenith {
namespace {

using namespace zero_memory;
using zenith::testing::TempDir;

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
        train_zero3_rank(test::rank_options(rank, kRanks, "file://" + dir.str()), dir.str());
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
