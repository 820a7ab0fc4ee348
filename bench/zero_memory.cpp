// Peak resident memory per rank of full fine-tuning with AdamW, one process against ZeRO stages
// 1-3 on R forked ranks (127.0.0.1, file store), on a LLaMA of ~110M parameters (hidden 768,
// 12 layers, vocabulary 32000, tied embeddings: Ψ = 109.5M). Each process's peak RSS (VmHWM,
// reset when it starts) is set against the ZeRO formulas for float32 weights, gradients and
// AdamW's two moments (one process 16Ψ, stage 1 8Ψ + 8Ψ/R, stage 2 4Ψ + 12Ψ/R, stage 3 16Ψ/R).
// ZeRO-3 runs twice: building the whole model on each rank and then sharding it, and building
// it shape-only with each rank drawing only its rows (distributed::hollow_llama), as the
// ZeroMemory test does; only the second keeps every rank under the formula's neighbourhood.
//
//   zero_memory [--ranks 4] [--hidden 768] [--layers 12] [--vocab 32000] [--seq 32]
//               [--steps 2] [--json FILE]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_machine.h"
#include "bench_ranks.h"
#include "core/allocator.h"
#include "distributed/zero_llama.h"
#include "zenith/zenith.h"

namespace comm = zenith::communication;
using Clock = std::chrono::steady_clock;
using namespace zenith;

namespace {

struct Args {
  int ranks = 4;
  int64_t hidden = 768, layers = 12, vocab = 32000, seq = 32;
  int steps = 2;
  std::string json;
};

models::LlamaConfig config_of(const Args& a) {
  models::LlamaConfig c;
  c.vocab_size = a.vocab;
  c.hidden_size = a.hidden;
  c.intermediate_size = a.hidden * 8 / 3;
  c.num_hidden_layers = a.layers;
  c.num_attention_heads = a.hidden / 64;
  c.num_key_value_heads = a.hidden / 64;
  c.head_dim = 64;
  c.max_position_embeddings = a.seq;
  c.tie_word_embeddings = true;
  return c;
}

int64_t status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key))) * 1024;
  return -1;
}

struct Mode {
  const char* name;
  int stage;    // 0: one process
  bool hollow;  // ZeRO-3 built shape-only
};

// One mode on this rank: its losses, peak RSS and model-state bytes.
nlohmann::json run(const Args& a, const Mode& m, int rank, int world) {
  context::set_num_threads(1);
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS (the fork's inheritance)
  const int64_t start_rss = status_bytes("VmRSS:");
  core::reset_peak_live_bytes();
  const models::LlamaConfig config = config_of(a);
  manual_seed(1);
  std::shared_ptr<models::Llama> model;
  std::shared_ptr<distributed::ZeroOptimizer> zero;
  nn::OptimizerPtr opt;
  auto adamw = [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-4); };
  if (m.hollow) {
    model = distributed::hollow_llama(config);
    auto rows = distributed::llama_initial_rows(config, rank, world);
    zero = std::make_shared<distributed::ZeroOptimizer>(
        model->trainable_params(), adamw,
        distributed::ZeroOptions{.stage = 3,
                                 .rows_of = distributed::llama_rows_of(*model, std::move(rows))});
  } else {
    model = std::make_shared<models::Llama>(config);
    if (m.stage > 0)
      zero = std::make_shared<distributed::ZeroOptimizer>(
          model->trainable_params(), adamw, distributed::ZeroOptions{.stage = m.stage});
    else
      opt = adamw(model->trainable_params());
  }
  const int64_t rows = m.stage > 0 ? 1 : world;  // one sequence per rank, all of them in one
  std::vector<int64_t> ids_v;
  for (int64_t i = 0; i < world * a.seq; ++i) ids_v.push_back((i * 7919 + 13) % a.vocab);
  Tensor all = Tensor::from_vector(ids_v, {world, a.seq});
  Tensor ids = all.narrow(0, m.stage > 0 ? rank : 0, rows).contiguous();
  nlohmann::json losses = nlohmann::json::array();
  const auto t0 = Clock::now();
  for (int s = 0; s < a.steps; ++s) {
    Tensor loss;
    if (zero) {
      zero->zero_grad();
      Tensor logits =
          m.stage == 3 ? distributed::zero3_llama_logits(*model, zero, ids) : model->forward(ids);
      loss = models::causal_lm_loss(logits, ids);
    } else {
      opt->zero_grad();
      loss = models::causal_lm_loss(model->forward(ids), ids);
    }
    Tensor global = loss.detach().reshape({1}).clone();
    if (zero) comm::all_reduce(global, comm::ReduceOp::AVG);
    losses.push_back(global.to_double_vector()[0]);
    loss.backward();
    if (zero)
      zero->step();
    else
      opt->step();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  uint64_t state = 0;
  if (zero) {
    state = zero->model_state_bytes().total();
  } else {
    for (const auto& p : model->trainable_params()) state += 2 * uint64_t(p.nbytes());
    for (const auto& [n, t] : opt->state_dict())
      if (n != "step") state += uint64_t(t.nbytes());
  }
  const core::AllocatorStats alloc = core::allocator_stats();
  return {{"losses", losses},
          {"peak_live_bytes", alloc.peak_live_bytes},
          {"peak_held_bytes", alloc.peak_held_bytes},
          {"start_rss", start_rss},
          {"peak_rss", status_bytes("VmHWM:")},
          {"model_state_bytes", state},
          {"step_seconds", seconds / a.steps}};
}

// Runs `mode` in `world` forked processes (bench::fork_ranks; one process joins no group); their
// results, rank by rank.
std::vector<nlohmann::json> run_ranks(const Args& a, const Mode& m, int world) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("zero_memory_" + std::to_string(getpid()) + "_" + m.name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<nlohmann::json> out;
  try {
    out = bench::fork_ranks(
        world, dir, m.name, [&](int r) { return run(a, m, r, world); }, m.stage > 0,
        std::chrono::seconds(600));
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--ranks")
      a.ranks = std::stoi(v);
    else if (k == "--hidden")
      a.hidden = std::stoll(v);
    else if (k == "--layers")
      a.layers = std::stoll(v);
    else if (k == "--vocab")
      a.vocab = std::stoll(v);
    else if (k == "--seq")
      a.seq = std::stoll(v);
    else if (k == "--steps")
      a.steps = std::stoi(v);
    else if (k == "--json")
      a.json = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  double psi = 0;
  for (const auto& p : models::expected_llama_parameters(config_of(a)))
    psi += double(shape_numel(p.shape));
  const double n = a.ranks, mib = 1 << 20;
  const Mode modes[] = {{"one process", 0, false},
                        {"ZeRO-1", 1, false},
                        {"ZeRO-2", 2, false},
                        {"ZeRO-3, whole model built then sharded", 3, false},
                        {"ZeRO-3, built shape-only", 3, true}};
  nlohmann::json out;
  out["parameters"] = psi;
  out["ranks"] = a.ranks;
  out["seq"] = a.seq;
  out["steps"] = a.steps;
  out["modes"] = nlohmann::json::array();
  std::printf("Ψ = %.1fM parameters, %d ranks, %lld tokens per rank, %d AdamW steps\n", psi / 1e6,
              a.ranks, (long long)a.seq, a.steps);
  std::printf("%-40s %12s %12s %12s %12s %12s %12s\n", "mode", "formula MiB", "state MiB",
              "peak RSS MiB", "growth MiB", "live MiB", "held MiB");
  for (const Mode& m : modes) {
    const int world = m.stage > 0 ? a.ranks : 1;
    const double formula = m.stage == 0   ? 16 * psi
                           : m.stage == 1 ? 8 * psi + 8 * psi / n
                           : m.stage == 2 ? 4 * psi + 12 * psi / n
                                          : 16 * psi / n;
    const auto ranks = run_ranks(a, m, world);
    double peak_rss = 0, growth = 0, state = 0, step = 0, live = 0, held = 0;
    for (const auto& r : ranks) {
      peak_rss = std::max(peak_rss, r["peak_rss"].get<double>());
      growth = std::max(growth, r["peak_rss"].get<double>() - r["start_rss"].get<double>());
      state = std::max(state, r["model_state_bytes"].get<double>());
      step = std::max(step, r["step_seconds"].get<double>());
      live = std::max(live, r["peak_live_bytes"].get<double>());
      held = std::max(held, r["peak_held_bytes"].get<double>());
    }
    std::printf("%-40s %12.0f %12.0f %12.0f %12.0f %12.0f %12.0f\n", m.name, formula / mib,
                state / mib, peak_rss / mib, growth / mib, live / mib, held / mib);
    out["modes"].push_back({{"mode", m.name},
                            {"processes", world},
                            {"formula_bytes", formula},
                            {"model_state_bytes", state},
                            {"peak_rss_bytes", peak_rss},
                            {"peak_rss_growth_bytes", growth},
                            {"allocator_peak_live_bytes", live},
                            {"allocator_peak_held_bytes", held},
                            {"step_seconds", step},
                            {"losses", ranks[0]["losses"]}});
  }
  // Measured last: the ranks fork from a process that has not yet touched oneDNN's buffers.
  const double peak = bench::sgemm_peak_gflops(1);
  std::printf("%s\nsgemm peak %.1f GFLOP/s (1 thread)\n", bench::isa_line().c_str(), peak);
  out.update(bench::machine_json(1, peak));
  if (!a.json.empty()) std::ofstream(a.json) << out.dump(2) << "\n";
  return 0;
}
