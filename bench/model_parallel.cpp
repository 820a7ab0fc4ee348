// Tensor, sequence and pipeline parallelism on a small LLaMA (distributed::ParallelLlama): per
// mode, the step time and tokens/s of 2 ranks x 1 thread against one process x 2 threads, each
// rank's model-state bytes (weights, gradients, AdamW's two moments) against 16Ψ/degree, its
// allocator peak, the bytes it sent per step in each mesh group and the seconds its collectives
// took, and the pipeline's ideal bubble (p-1)/(m+p-1). ZeRO's modes: bench/zero. On one host the
// ranks share the cores: these modes buy memory per rank, not speed.
//
//   model_parallel [--hidden 256] [--layers 4] [--vocab 2048] [--batch 4] [--seq 64]
//                  [--steps 3] [--json FILE]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/allocator.h"
#include "distributed/parallelize_llama_train.h"
#include "zenith/zenith.h"

namespace comm = zenith::communication;
using Clock = std::chrono::steady_clock;
using namespace zenith;

namespace {

struct Args {
  int64_t hidden = 256, layers = 4, vocab = 2048, batch = 4, seq = 64;
  int steps = 3;
  std::string json;
};

struct Mode {
  const char* name;
  int ranks, tensor, pipeline, micro;
  bool sp;
};

models::LlamaConfig config_of(const Args& a) {
  models::LlamaConfig c;
  c.vocab_size = a.vocab;
  c.hidden_size = a.hidden;
  c.intermediate_size = a.hidden * 8 / 3;
  c.num_hidden_layers = a.layers;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.head_dim = a.hidden / 4;
  c.max_position_embeddings = a.seq;
  return c;
}

nlohmann::json run(const Args& a, const Mode& m) {
  context::set_num_threads(m.ranks == 1 ? 2 : 1);
  manual_seed(1);
  auto model = std::make_shared<models::Llama>(config_of(a));
  const double psi = double(model->num_parameters(true));
  Tensor ids = Tensor::randint(0, a.vocab, {a.batch, a.seq});
  std::optional<distributed::ParallelLlama> run;
  std::vector<Tensor> params = model->trainable_params();
  if (m.ranks > 1) {
    run.emplace(model, distributed::ModelParallelOptions{.tensor = m.tensor,
                                                         .pipeline = m.pipeline,
                                                         .micro_batches = m.micro,
                                                         .sequence_parallel = m.sp});
    params = run->trainable_params();
  }
  auto opt = nn::AdamW(params, 1e-4);
  auto step = [&] {
    opt->zero_grad();
    if (run)
      run->forward_backward(ids, ids);
    else
      models::causal_lm_loss(model->forward({.input_ids = ids}), ids).backward();
    opt->step();
  };
  step();  // warm-up: AdamW's states, the allocator's cache
  using distributed::MeshDim;
  auto traffic = [&](MeshDim d) {
    return run ? run->mesh().traffic(d) : distributed::GroupTraffic{};
  };
  const auto t0 = traffic(MeshDim::tensor), p0 = traffic(MeshDim::pipeline);
  double seconds = 0;
  size_t peak = 0;
  for (int s = 0; s < a.steps; ++s) {
    core::reset_peak_live_bytes();
    const auto start = Clock::now();
    step();
    seconds += std::chrono::duration<double>(Clock::now() - start).count();
    peak = std::max(peak, core::allocator_stats().peak_live_bytes);
  }
  const auto t1 = traffic(MeshDim::tensor), p1 = traffic(MeshDim::pipeline);
  uint64_t held = 0;
  for (const auto& p : params) held += p.nbytes() + (p.grad().defined() ? p.grad().nbytes() : 0);
  for (const auto& [name, t] : opt->state_dict())
    if (name != "step") held += t.nbytes();
  const double degree = double(m.tensor * m.pipeline);
  return {{"mode", m.name},
          {"ranks", m.ranks},
          {"threads_per_rank", m.ranks == 1 ? 2 : 1},
          {"parameters", psi},
          {"model_state_bytes", held},
          {"model_state_formula", 16 * psi / degree},
          {"model_state_vs_one_process", double(held) / (16 * psi)},
          {"peak_live_bytes", peak},
          {"tensor_sent_bytes_per_step", double(t1.bytes_sent - t0.bytes_sent) / a.steps},
          {"pipeline_sent_bytes_per_step", double(p1.bytes_sent - p0.bytes_sent) / a.steps},
          {"communication_seconds_per_step",
           (t1.seconds - t0.seconds + p1.seconds - p0.seconds) / a.steps},
          {"ideal_bubble", m.pipeline > 1 ? distributed::ideal_bubble(m.pipeline, m.micro) : 0.0},
          {"step_seconds", seconds / a.steps},
          {"tokens_per_second", double(a.batch * a.seq) / (seconds / a.steps)}};
}

nlohmann::json fork_ranks(const Args& a, const Mode& m, int index, const std::string& dir) {
  const std::string store = "file://" + dir + "/store" + std::to_string(index);
  std::vector<pid_t> pids;
  for (int r = 0; r < m.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        if (m.ranks > 1) {
          comm::Options o;
          o.rank = r;
          o.size = m.ranks;
          o.store = store;
          o.prefix = "bench_mp";
          o.address = "127.0.0.1";
          o.timeout = std::chrono::seconds(300);
          comm::init(o);
        }
        auto j = run(a, m);
        if (r == 0) std::ofstream(dir + "/out" + std::to_string(index)) << j.dump();
        if (m.ranks > 1) comm::release();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 1;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) throw std::runtime_error("a rank failed");
  return nlohmann::json::parse(std::ifstream(dir + "/out" + std::to_string(index)));
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--hidden")
      a.hidden = std::stoll(v);
    else if (k == "--layers")
      a.layers = std::stoll(v);
    else if (k == "--vocab")
      a.vocab = std::stoll(v);
    else if (k == "--batch")
      a.batch = std::stoll(v);
    else if (k == "--seq")
      a.seq = std::stoll(v);
    else if (k == "--steps")
      a.steps = std::stoi(v);
    else if (k == "--json")
      a.json = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const Mode modes[] = {{"one process", 1, 1, 1, 1, false},
                        {"tensor 2", 2, 2, 1, 1, false},
                        {"tensor 2 + SP", 2, 2, 1, 1, true},
                        {"pipeline 2 (m 4)", 2, 1, 2, 4, false}};
  const auto dir =
      std::filesystem::temp_directory_path() / ("bench_mp_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-17s %5s %12s %12s %7s %12s %12s %12s %8s %7s %8s %9s\n", "mode", "ranks",
              "state bytes", "16Ψ/degree", "vs one", "peak live", "tp sent", "pp sent", "comm s",
              "bubble", "step s", "tokens/s");
  int index = 0;
  for (const Mode& m : modes) {
    auto j = fork_ranks(a, m, index++, dir.string());
    std::printf("%-17s %5d %12.0f %12.0f %7.3f %12.0f %12.0f %12.0f %8.4f %7.3f %8.4f %9.0f\n",
                m.name, m.ranks, j["model_state_bytes"].get<double>(),
                j["model_state_formula"].get<double>(),
                j["model_state_vs_one_process"].get<double>(), j["peak_live_bytes"].get<double>(),
                j["tensor_sent_bytes_per_step"].get<double>(),
                j["pipeline_sent_bytes_per_step"].get<double>(),
                j["communication_seconds_per_step"].get<double>(), j["ideal_bubble"].get<double>(),
                j["step_seconds"].get<double>(), j["tokens_per_second"].get<double>());
    rows.push_back(j);
  }
  std::filesystem::remove_all(dir);
  if (!a.json.empty()) std::ofstream(a.json) << rows.dump(1) << "\n";
  return 0;
}
