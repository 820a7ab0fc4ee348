// Tensor, sequence and pipeline parallelism on a small LLaMA (distributed::ParallelLlama), on
// ranks forked on this host. Two tables:
//
//   modes     per mode, the step time and tokens/s of 2 ranks x 1 thread against one process x 2
//             threads and 2-rank DDP on the same global batch; each rank's model-state bytes
//             (weights, gradients, AdamW's two moments) against 16Ψ/degree, its allocator peak,
//             the bytes it sent per step in each mesh group against what the implementation's
//             collectives must move, the seconds its collectives took, and the seconds it was
//             blocked waiting for each group's collectives (a blocking call's whole duration,
//             an async one's wait) with their share of its step (the slowest rank's step, the
//             largest rank's memory, rank 0's traffic and blocked time; every rank's blocked
//             time in blocked_seconds_per_step_by_rank).
//   pipeline  GPipe and 1F1B over 2 stages at m = 4 and 8 micro-batches: each stage's measured
//             bubble (1 - its forward/backward seconds, timed from clock readings around each
//             micro-batch's work, / the step's seconds) beside (p-1)/(m+p-1), its activation
//             peak, micro-batches in flight and the seconds it was blocked on its links.
//
// ZeRO's modes: bench/zero. On one host the ranks share the cores: these modes buy memory per
// rank, not speed. --json prints the JSON that scripts/perf_report.py renders.
//
//   model_parallel [--hidden 256] [--layers 4] [--vocab 2048] [--batch 4] [--seq 64]
//                  [--steps 3] [--json]
#include <chrono>
#include <cstdio>
#include <optional>

#include "bench_ranks.h"
#include "core/allocator.h"
#include "distributed/parallelize_llama_train.h"

using Clock = std::chrono::steady_clock;
using namespace zenith;
using bench::RankArgs;
using distributed::MeshDim;

namespace {

struct Mode {
  const char* name;
  int ranks, tensor, pipeline, micro;
  bool sp;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What the implementation's collectives move per step on one rank of the tensor group, bytes:
// act is one [B, T, H] float32 activation, a ring moves (n-1)/n of a block per all-gather or
// reduce-scatter, twice that per all-reduce. Without sequence parallel, per layer: the forward
// all-reduces of o and down, the backward all-reduce of each column-parallel input (q, k, v,
// gate, up); the vocab-parallel embedding's forward and the output layer's backward all-reduce;
// cross-entropy's three all-reduces of a float per token. With it, per layer: the forward
// all-gathers of the two gathered inputs and reduce-scatters of o and down, and in backward each
// column-parallel linear gathers its input again and reduce-scatters its input gradient, each
// row-parallel one gathers; the embedding and the output layer one of each; the norms' weight
// gradients all-reduced.
double tensor_sent_formula(const RankArgs& a, const Mode& m) {
  if (m.tensor == 1) return 0;
  const double n = m.tensor, f = (n - 1) / n;
  const double act = double(a.batch * a.seq * a.hidden) * 4, tokens = double(a.batch * a.seq);
  const double ce = 3 * 2 * f * tokens * 4;
  if (!m.sp) return double(a.layers) * 7 * 2 * f * act + 2 * 2 * f * act + ce;
  const double norms = 2 * f * double(2 * a.layers + 1) * double(a.hidden) * 4;
  return double(a.layers) * 16 * f * act + 4 * f * act + ce + norms;
}

nlohmann::json run_mode(const RankArgs& a, const Mode& m, int rank) {
  context::set_num_threads(m.ranks == 1 ? 2 : 1);
  manual_seed(1);
  auto model = std::make_shared<models::Llama>(bench::small_llama(a));
  const double psi = double(model->num_parameters(true));
  Tensor ids = Tensor::randint(0, a.vocab, {a.batch, a.seq});
  // Data parallel: each rank its half of the batch.
  const bool data = m.ranks > 1 && m.tensor * m.pipeline == 1;
  if (data) ids = ids.slice(0, rank * (a.batch / 2), (rank + 1) * (a.batch / 2)).contiguous();
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
  auto traffic = [&](MeshDim d) {
    return run ? run->mesh().traffic(d) : distributed::GroupTraffic{};
  };
  const distributed::GroupTraffic t0 = traffic(MeshDim::tensor), p0 = traffic(MeshDim::pipeline),
                                  d0 = traffic(MeshDim::data);
  double seconds = 0;
  size_t peak = 0;
  for (int s = 0; s < a.steps; ++s) {
    core::reset_peak_live_bytes();
    const auto start = Clock::now();
    step();
    seconds += seconds_since(start);
    peak = std::max(peak, core::allocator_stats().peak_live_bytes);
  }
  const distributed::GroupTraffic t = traffic(MeshDim::tensor) - t0,
                                  p = traffic(MeshDim::pipeline) - p0,
                                  d = traffic(MeshDim::data) - d0;
  const double blocked = t.blocked_seconds + p.blocked_seconds + d.blocked_seconds;
  uint64_t held = 0;
  for (const auto& w : params) held += w.nbytes() + (w.grad().defined() ? w.grad().nbytes() : 0);
  for (const auto& [name, t] : opt->state_dict())
    if (name != "step") held += t.nbytes();
  const double degree = double(m.tensor * m.pipeline), steps = a.steps;
  // Stage 0 sends each micro-batch's activation forward: one [B, T, H] float32 per step.
  const double pp_formula = m.pipeline > 1 ? double(a.batch * a.seq * a.hidden) * 4 : 0;
  const double dp_formula = data ? 4 * psi : 0;  // a 2-rank all-reduce of every gradient
  return {{"mode", m.name},
          {"ranks", m.ranks},
          {"threads_per_rank", m.ranks == 1 ? 2 : 1},
          {"parameters", psi},
          {"model_state_bytes", held},
          {"model_state_formula", 16 * psi / degree},
          {"model_state_vs_one_process", double(held) / (16 * psi)},
          {"peak_live_bytes", peak},
          {"tensor_sent_bytes_per_step", double(t.bytes_sent) / steps},
          {"tensor_sent_formula", tensor_sent_formula(a, m)},
          {"pipeline_sent_bytes_per_step", double(p.bytes_sent) / steps},
          {"pipeline_sent_formula", pp_formula},
          {"data_sent_bytes_per_step", double(d.bytes_sent) / steps},
          {"data_sent_formula", dp_formula},
          {"communication_seconds_per_step", (t.seconds + p.seconds + d.seconds) / steps},
          {"tensor_blocked_seconds_per_step", t.blocked_seconds / steps},
          {"pipeline_blocked_seconds_per_step", p.blocked_seconds / steps},
          {"data_blocked_seconds_per_step", d.blocked_seconds / steps},
          {"blocked_seconds_per_step", blocked / steps},
          {"blocked_share_of_step", seconds > 0 ? blocked / seconds : 0.0},
          {"step_seconds", seconds / steps},
          {"tokens_per_second", double(a.batch * a.seq) / (seconds / steps)}};
}

// One stage of a 2-stage pipeline of the whole model, `micro` micro-batches of one batch of 8.
nlohmann::json run_pipeline(const RankArgs& a, distributed::PipelineSchedule schedule, int micro) {
  context::set_num_threads(1);
  manual_seed(1);
  models::Llama model(bench::small_llama(a));
  Tensor ids = Tensor::randint(0, a.vocab, {8, a.seq});
  auto mesh = distributed::DeviceMesh::create({.pipeline = 2});
  distributed::LlamaPipeline pipe(model, mesh, {.micro_batches = micro, .schedule = schedule});
  pipe.step(ids, ids);  // warm the allocator's cache
  const distributed::GroupTraffic links = mesh.traffic(MeshDim::pipeline);
  double compute = 0, total = 0;
  int64_t peak = 0;
  int in_flight = 0;
  for (int s = 0; s < a.steps; ++s) {
    for (auto& p : pipe.parameters()) p.zero_grad();
    const distributed::PipelineStepStats st = pipe.step(ids, ids);
    compute += st.compute_seconds;
    total += st.step_seconds;
    peak = std::max(peak, st.peak_activation_bytes);
    in_flight = std::max(in_flight, st.max_in_flight);
  }
  return {{"stage", pipe.stage()},
          {"bubble", 1 - compute / total},
          {"compute_seconds_per_step", compute / a.steps},
          {"step_seconds", total / a.steps},
          {"blocked_seconds_per_step",
           (mesh.traffic(MeshDim::pipeline) - links).blocked_seconds / a.steps},
          {"peak_activation_bytes", peak},
          {"max_in_flight", in_flight}};
}

}  // namespace

int main(int argc, char** argv) {
  const RankArgs a = bench::parse_rank_args(argc, argv, false);
  const double load_start = bench::load_average();
  const Mode modes[] = {{"one process", 1, 1, 1, 1, false},
                        {"data 2 (DDP)", 2, 1, 1, 1, false},
                        {"tensor 2", 2, 2, 1, 1, false},
                        {"tensor 2 + SP", 2, 2, 1, 1, true},
                        {"pipeline 2 (1F1B, m 4)", 2, 1, 2, 4, false}};
  const auto dir =
      std::filesystem::temp_directory_path() / ("bench_mp_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json rows = nlohmann::json::array(), bubbles = nlohmann::json::array();
  if (!a.json)
    std::printf("%-23s %5s %12s %12s %7s %12s %11s %11s %11s %11s %8s %8s %8s %8s %6s %8s %9s\n",
                "mode", "ranks", "state bytes", "16Ψ/degree", "vs one", "peak live", "tp sent",
                "tp formula", "pp sent", "dp sent", "comm s", "tp blk s", "pp blk s", "dp blk s",
                "blk %", "step s", "tokens/s");
  int index = 0;
  for (const Mode& m : modes) {
    const auto ranks = bench::fork_ranks(m.ranks, dir, "mode" + std::to_string(index++),
                                         [&](int rank) { return run_mode(a, m, rank); });
    auto j = ranks[0];  // traffic: rank 0's; time and memory: the slowest and the largest rank's
    j["blocked_seconds_per_step_by_rank"] = nlohmann::json::array();
    for (const auto& r : ranks)
      j["blocked_seconds_per_step_by_rank"].push_back(r["blocked_seconds_per_step"]);
    for (const char* key : {"step_seconds", "model_state_bytes", "peak_live_bytes"})
      for (const auto& r : ranks) j[key] = std::max(j[key].get<double>(), r[key].get<double>());
    j["model_state_vs_one_process"] =
        j["model_state_bytes"].get<double>() / (16 * j["parameters"].get<double>());
    j["tokens_per_second"] = double(a.batch * a.seq) / j["step_seconds"].get<double>();
    if (!a.json)
      std::printf(
          "%-23s %5d %12.0f %12.0f %7.3f %12.0f %11.0f %11.0f %11.0f %11.0f %8.4f %8.4f %8.4f "
          "%8.4f "
          "%6.1f %8.4f %9.0f\n",
          m.name, m.ranks, j["model_state_bytes"].get<double>(),
          j["model_state_formula"].get<double>(), j["model_state_vs_one_process"].get<double>(),
          j["peak_live_bytes"].get<double>(), j["tensor_sent_bytes_per_step"].get<double>(),
          j["tensor_sent_formula"].get<double>(), j["pipeline_sent_bytes_per_step"].get<double>(),
          j["data_sent_bytes_per_step"].get<double>(),
          j["communication_seconds_per_step"].get<double>(),
          j["tensor_blocked_seconds_per_step"].get<double>(),
          j["pipeline_blocked_seconds_per_step"].get<double>(),
          j["data_blocked_seconds_per_step"].get<double>(),
          100 * j["blocked_share_of_step"].get<double>(), j["step_seconds"].get<double>(),
          j["tokens_per_second"].get<double>());
    rows.push_back(j);
  }
  if (!a.json)
    std::printf("\n%-9s %3s %3s %13s %13s %8s %8s %10s %10s %14s %14s\n", "schedule", "p", "m",
                "stage 0 idle", "stage 1 idle", "ideal", "step s", "s0 blk s", "s1 blk s",
                "stage 0 act B", "in flight");
  for (auto schedule :
       {distributed::PipelineSchedule::gpipe, distributed::PipelineSchedule::one_f_one_b})
    for (int micro : {4, 8}) {
      const std::string tag =
          std::string("pipe_") + distributed::schedule_name(schedule) + std::to_string(micro);
      auto stages =
          bench::fork_ranks(2, dir, tag, [&](int) { return run_pipeline(a, schedule, micro); });
      nlohmann::json j = {{"schedule", distributed::schedule_name(schedule)},
                          {"stages", 2},
                          {"micro_batches", micro},
                          {"batch", 8},
                          {"ideal_bubble", distributed::ideal_bubble(2, micro)},
                          {"per_stage", stages}};
      if (!a.json)
        std::printf("%-9s %3d %3d %13.3f %13.3f %8.3f %8.4f %10.4f %10.4f %14.0f %14d\n",
                    distributed::schedule_name(schedule), 2, micro,
                    stages[0]["bubble"].get<double>(), stages[1]["bubble"].get<double>(),
                    distributed::ideal_bubble(2, micro), stages[0]["step_seconds"].get<double>(),
                    stages[0]["blocked_seconds_per_step"].get<double>(),
                    stages[1]["blocked_seconds_per_step"].get<double>(),
                    stages[0]["peak_activation_bytes"].get<double>(),
                    stages[0]["max_in_flight"].get<int>());
      bubbles.push_back(j);
    }
  std::filesystem::remove_all(dir);
  bench::print_result(a, 2, load_start, {{"modes", rows}, {"pipeline", bubbles}});
  return 0;
}
