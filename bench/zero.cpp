// ZeRO's memory and traffic per rank on a small LLaMA: for one process, DDP and ZeRO stages 1-3
// on R forked ranks (127.0.0.1, file store), each rank's model-state bytes after a step against
// the ZeRO formulas (float32 AdamW: one process 16Ψ, stage 1 8Ψ + 8Ψ/R, stage 2 4Ψ + 12Ψ/R,
// stage 3 16Ψ/R), its allocator peak during a step, the bytes it sent per step against the
// ring's, the step time and the time it was blocked in communication (rank 0's; each rank's in
// blocked_seconds_per_step_by_rank). On one host ranks share the cores: ZeRO buys memory, not
// speed.
//
//   zero [--ranks 2] [--hidden 256] [--layers 4] [--vocab 2048] [--batch 4] [--seq 64]
//        [--steps 3] [--json]
#include <chrono>
#include <cstdio>

#include "bench_ranks.h"
#include "core/allocator.h"
#include "distributed/mesh.h"
#include "distributed/zero_llama.h"

using Clock = std::chrono::steady_clock;
using namespace zenith;
using bench::RankArgs;

namespace {

// One configuration on this rank: stage -1 one process, 0 DDP, 1-3 ZeRO.
nlohmann::json run(const RankArgs& a, int stage, int world) {
  context::set_num_threads(1);
  manual_seed(1);
  models::Llama model(bench::small_llama(a));
  const double psi = double(model.num_parameters(true));
  const int64_t rows = world > 1 ? a.batch / world : a.batch;
  Tensor ids = Tensor::randint(0, a.vocab, {rows, a.seq});
  std::shared_ptr<distributed::ZeroOptimizer> zero;
  std::shared_ptr<nn::DistributedDataParallelImpl> ddp;
  nn::OptimizerPtr opt;
  auto adamw = [](std::vector<Tensor> p) { return nn::AdamW(std::move(p), 1e-4); };
  if (stage >= 1)
    zero = std::make_shared<distributed::ZeroOptimizer>(model.trainable_params(), adamw,
                                                        distributed::ZeroOptions{.stage = stage});
  else
    opt = adamw(model.trainable_params());
  if (stage == 0)
    ddp = nn::DistributedDataParallel(std::shared_ptr<nn::Cell>(&model, [](auto*) {}));
  auto step = [&] {
    if (zero) {
      zero->zero_grad();
      Tensor logits = stage == 3 ? distributed::zero3_llama_logits(model, zero, ids)
                                 : model.forward({.input_ids = ids});
      models::causal_lm_loss(logits, ids).backward();
      zero->step();
    } else {
      opt->zero_grad();
      models::causal_lm_loss(model.forward({.input_ids = ids}), ids).backward();
      opt->step();
    }
  };
  step();  // warm-up: AdamW's states, the allocator's cache
  double seconds = 0;
  uint64_t sent = 0;
  double blocked = 0;
  size_t peak = 0;
  for (int s = 0; s < a.steps; ++s) {
    core::reset_peak_live_bytes();
    const auto before = world > 1 ? distributed::group_traffic({}) : distributed::GroupTraffic{};
    const auto start = Clock::now();
    step();
    seconds += std::chrono::duration<double>(Clock::now() - start).count();
    if (world > 1) {
      const distributed::GroupTraffic step_traffic = distributed::group_traffic({}) - before;
      sent += step_traffic.bytes_sent;
      blocked += step_traffic.blocked_seconds;
    }
    peak = std::max(peak, core::allocator_stats().peak_live_bytes);
  }
  // What the rank holds after a step, gradients included (as the formulas count them).
  uint64_t held = 0;
  if (zero) {
    held = zero->model_state_bytes().total();
  } else {
    for (const auto& p : model.trainable_params()) held += p.nbytes() + p.grad().nbytes();
    for (const auto& [name, t] : opt->state_dict())
      if (name != "step") held += t.nbytes();
  }
  const double n = world;
  const double formula = stage <= 0   ? 16 * psi
                         : stage == 1 ? 8 * psi + 8 * psi / n
                         : stage == 2 ? 4 * psi + 12 * psi / n
                                      : 16 * psi / n;
  const double ring = 4 * psi * (n - 1) / n;
  const double sent_formula = stage < 0 ? 0 : stage == 3 ? 3 * ring : 2 * ring;
  const char* names[] = {"one process", "DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  return {{"mode", names[stage + 1]},
          {"ranks", world},
          {"parameters", psi},
          {"model_state_bytes", held},
          {"model_state_formula", formula},
          {"model_state_vs_one_process", double(held) / (16 * psi)},
          {"peak_live_bytes", peak},
          {"sent_bytes_per_step", double(sent) / a.steps},
          {"sent_formula", sent_formula},
          {"step_seconds", seconds / a.steps},
          {"blocked_seconds_per_step", blocked / a.steps},
          {"blocked_share_of_step", seconds > 0 ? blocked / seconds : 0.0},
          {"tokens_per_second", double(a.batch * a.seq) / (seconds / a.steps)}};
}

}  // namespace

int main(int argc, char** argv) {
  const RankArgs a = bench::parse_rank_args(argc, argv, true);
  const double load_start = bench::load_average();
  const auto dir =
      std::filesystem::temp_directory_path() / ("bench_zero_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json rows = nlohmann::json::array();
  if (!a.json)
    std::printf("%-12s %5s %14s %14s %8s %14s %14s %14s %9s %9s %6s\n", "mode", "ranks",
                "state bytes", "formula", "vs one", "peak live", "sent/step", "ring formula",
                "step s", "blocked s", "blk %");
  for (int stage = -1; stage <= 3; ++stage) {
    const int world = stage < 0 ? 1 : a.ranks;
    const auto ranks = bench::fork_ranks(world, dir, "stage" + std::to_string(stage + 1),
                                         [&](int) { return run(a, stage, world); });
    auto j = ranks[0];
    j["blocked_seconds_per_step_by_rank"] = nlohmann::json::array();
    for (const auto& r : ranks)
      j["blocked_seconds_per_step_by_rank"].push_back(r["blocked_seconds_per_step"]);
    if (!a.json)
      std::printf("%-12s %5d %14.0f %14.0f %8.3f %14.0f %14.0f %14.0f %9.3f %9.4f %6.1f\n",
                  j["mode"].get<std::string>().c_str(), j["ranks"].get<int>(),
                  j["model_state_bytes"].get<double>(), j["model_state_formula"].get<double>(),
                  j["model_state_vs_one_process"].get<double>(), j["peak_live_bytes"].get<double>(),
                  j["sent_bytes_per_step"].get<double>(), j["sent_formula"].get<double>(),
                  j["step_seconds"].get<double>(), j["blocked_seconds_per_step"].get<double>(),
                  100 * j["blocked_share_of_step"].get<double>());
    rows.push_back(j);
  }
  std::filesystem::remove_all(dir);
  bench::print_result(a, 1, load_start, {{"modes", rows}});
  return 0;
}
