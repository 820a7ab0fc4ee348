// The pieces of the ZeRO-3 memory demonstration (zero_memory_test.cpp forks its ranks,
// slurm_zero_memory_test.cpp runs them with srun over two nodes through zero_memory_rank.cpp):
// a 33.5M LLaMA whose training state (16 bytes a parameter: 536 MB) does not fit one process's
// address-space limit, trained for 2 AdamW steps in one process or at ZeRO-3 on 4 ranks under
// the same limit per rank. Each ZeRO-3 rank builds the model shape-only
// (distributed::hollow_llama) and holds only its rows of each parameter.
#pragma once

#include <sys/resource.h>

#include <fstream>
#include <string>
#include <vector>

#include "distributed/zero_llama.h"
#include "support/peak_rss.h"
#include "zenith/zenith.h"

namespace zenith::zero_memory {

constexpr int kRanks = 4, kSteps = 2;
constexpr int64_t kLength = 16;

// 33.5M parameters: 16Ψ = 536 MB of training state in one process, 134 MB per rank at ZeRO-3.
inline models::LlamaConfig demo_config() {
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

// The address space a rank may add to what it had when the limit was set: above ZeRO-3's 16Ψ/4
// (134 MB) with a gathered module, activations and the communication threads, below one
// process's 16Ψ.
constexpr int64_t kBudget = int64_t(320) << 20;

// Sequences [kRanks, kLength] of step `step`; rank r of n takes its rows.
inline Tensor ids_for(int step, int rank, int ranks, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kRanks * kLength; ++i)
    ids.push_back((i * 7919 + step * 131 + i / 5) % vocab);
  Tensor all = Tensor::from_vector(ids, {kRanks, kLength});
  const int64_t rows = kRanks / ranks;
  return all.narrow(0, rank * rows, rows).contiguous();
}

// RLIMIT_AS = this process's address space now + budget (the platform's fallback for a job's
// `memory`).
inline void limit_address_space(int64_t budget) {
  const int64_t now = testing::proc_status_bytes("VmSize:");
  ZENITH_CHECK(now > 0, "no VmSize in /proc/self/status");
  rlimit rl{rlim_t(now + budget), rlim_t(now + budget)};
  ZENITH_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit(RLIMIT_AS) failed");
}

inline void write_numbers(const std::string& path, const std::vector<double>& values) {
  std::ofstream f(path);
  f.precision(17);
  for (double v : values) f << v << "\n";
}

inline std::vector<double> read_numbers(const std::string& path) {
  std::ifstream f(path);
  std::vector<double> out;
  for (double v; f >> v;) out.push_back(v);
  return out;
}

// One process: the whole model, the whole batch, AdamW. Writes its losses and peak RSS to out.
inline void train_one_process(const std::string& out) {
  context::set_num_threads(1);
  manual_seed(7);
  models::Llama model(demo_config());
  auto opt = nn::AdamW(model.trainable_params(), 1e-3);
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    Tensor ids = ids_for(s, 0, 1, model.config().vocab_size);
    opt->zero_grad();
    models::LlamaInput input;
    input.input_ids = ids;
    Tensor loss = models::causal_lm_loss(model.forward(input), ids);
    losses.push_back(loss.item());
    loss.backward();
    opt->step();
  }
  losses.push_back(double(testing::proc_status_bytes("VmHWM:")));
  write_numbers(out, losses);
}

// One ZeRO-3 rank of `options` (rank and size given, or from the environment: RANK, WORLD_SIZE,
// MASTER_ADDR as a launcher sets them) with its share of the batch. Writes the global losses,
// its peak RSS and its model-state bytes to out_dir/rank<R>.txt.
inline void train_zero3_rank(const communication::Options& options, const std::string& out_dir) {
  namespace comm = communication;
  context::set_num_threads(1);
  comm::init(options);
  const int rank = comm::get_rank(), ranks = comm::get_group_size();
  ZENITH_CHECK(kRanks % ranks == 0, "the demonstration splits ", kRanks, " sequences; cannot over ",
               ranks, " ranks");
  const models::LlamaConfig config = demo_config();
  manual_seed(7);
  auto model = distributed::hollow_llama(config);
  auto rows = distributed::llama_initial_rows(config, rank, ranks);
  auto zero = std::make_shared<distributed::ZeroOptimizer>(
      model->trainable_params(),
      [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-3); },
      distributed::ZeroOptions{.stage = 3,
                               .rows_of = distributed::llama_rows_of(*model, std::move(rows))});
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    Tensor ids = ids_for(s, rank, ranks, config.vocab_size);
    zero->zero_grad();
    Tensor loss = models::causal_lm_loss(distributed::zero3_llama_logits(*model, zero, ids), ids);
    Tensor global = loss.detach().reshape({1}).clone();
    comm::all_reduce(global, comm::ReduceOp::AVG);
    losses.push_back(global.to_double_vector()[0]);
    loss.backward();
    zero->step();
  }
  const auto state = zero->model_state_bytes();
  losses.push_back(double(testing::proc_status_bytes("VmHWM:")));
  losses.push_back(double(state.total()));
  write_numbers(out_dir + "/rank" + std::to_string(rank) + ".txt", losses);
  comm::release();
}

}  // namespace zenith::zero_memory
