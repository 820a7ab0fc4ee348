// Graph mode against eager (PYNATIVE) mode: one training step (forward, loss, backward,
// Momentum update; AdamW for the LLaMA rows) per workload, both modes in one process on the same
// batches, timed alternately (eager step, graph step, ...) so that load from other processes hits
// both alike.
//
//   graph_vs_eager [--threads N] [--warmup W] [--steps S] [--workloads a,b] [--check]
//                  [--profile STEPS] [--no-update-in-backward] [--json]
//
// The Momentum/AdamW updates run in the backward by default, as `zenith train --mode graph` runs
// a step of one micro-batch (nothing reads .grad after it); --no-update-in-backward keeps them in
// the update phase.
//
// Per workload: step time (median and min over S steps) per mode, the ratio eager / graph
// (> 1: graph mode is faster) and the time it saves per step, the ratio of CPU time per step
// (steadier than wall time on shared cores; meaningful with --threads 1), GFLOP/s on the conv and
// matmul FLOPs and their % of the sgemm peak (measured beside the workload, with the memory
// bandwidth, a STREAM triad, that tells the host's slow phases apart), the step's peak memory
// per mode (bytes the allocator hands out during a step, plus graph mode's arena) and their ratio,
// and the capture's log line; what graph mode holds at its peak (intermediates by producing op and
// role, the planned buffers' peak beside the arena). --check also runs 20 steps in each mode from
// equal weights and reports the largest difference of the losses and the weights (graph mode must
// equal eager to 1e-5). --profile prints each mode's op summary (self time per op) over that many
// more steps.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_machine.h"
#include "core/allocator.h"
#include "core/trace_range.h"
#include "llm_common.h"
#include "zenith/zenith.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using namespace zenith;

struct Workload {
  std::string name, model;
  int64_t channels, image, batch;  // llama: image is the sequence length
  int default_steps;
};

const std::vector<Workload> kWorkloads = {
    {"seedcnn-fmnist-b64", "seedcnn", 1, 28, 64, 30},
    {"seedcnn-cifar-b64", "seedcnn", 3, 32, 64, 30},
    {"seedcnn-cifar-b8", "seedcnn", 3, 32, 8, 60},
    {"resnet18-cifar-b8", "resnet18", 3, 32, 8, 8},
    {"llama15m-s256-b8", "llama", 0, 256, 8, 8},  // 8 steps: 4 gave a median that moved
    {"llama15m-s64-b2", "llama", 0, 64, 2, 20},
};

// stories15M's shape (bench/llm's "15m"), with tied embeddings.
models::LlamaConfig stories15m_config() {
  models::LlamaConfig c = bench::llm_shape("15m");
  c.tie_word_embeddings = true;
  return c;
}

// Training FLOPs of one sequence of t tokens: 6 per linear weight per token (forward, the two
// backward GEMMs; the tied embedding counts once, as the lm_head), attention's QK^T and AV at
// 12 T D per layer per token (causal masking not subtracted).
double llama_train_flops(const models::LlamaConfig& c, int64_t t) {
  const double d = double(c.hidden_size), ff = double(c.intermediate_size);
  const double per_layer = d * double(c.q_dim()) * 2 + d * double(c.kv_dim()) * 2 + 3 * d * ff;
  const double linear = double(c.num_hidden_layers) * per_layer + d * double(c.vocab_size);
  const double attention = double(c.num_hidden_layers) * 12.0 * double(t) * double(c.q_dim());
  return double(t) * (6.0 * linear + attention);
}

struct Trainer {
  nn::CellPtr net;
  nn::LossPtr loss_fn;
  nn::OptimizerPtr opt;
  std::unique_ptr<graph::StepCompiler> compiler;
  std::string capture_line;
  Trainer(const Workload& w, bool graph_mode, bool update_in_backward = false) {
    manual_seed(0);
    if (w.model == "llama") {
      net = std::make_shared<models::Llama>(stories15m_config());
      opt = nn::AdamW(net->trainable_params(), 1e-3);
    } else {
      net = models::create(w.model, w.channels, w.image, 10);
      loss_fn = nn::SoftmaxCrossEntropyWithLogits(true);
      opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
    }
    net->set_train(true);
    if (!graph_mode) return;
    std::vector<std::pair<std::string, Tensor>> state = net->named_parameters();
    for (auto& b : net->named_buffers()) state.push_back(b);
    for (auto& [k, v] : opt->state_dict()) state.push_back({"optimizer." + k, v});
    compiler = std::make_unique<graph::StepCompiler>(
        state, opt.get(),
        graph::Options{.update_in_backward = update_in_backward,
                       .log = [this](const std::string& l) {
                         if (capture_line.empty()) capture_line = l;
                       }});
  }
  // One step as Model::train runs it: zero grads, forward + loss, a host read of the loss,
  // backward, update; its phases marked as Model::train marks them (--profile's phase split).
  double step(const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    graph::StepRun run = compiler ? compiler->begin({x, y}) : graph::StepRun::eager();
    Tensor loss = run.phase([&] {
      core::TraceRange range(core::Range::forward);
      Tensor out = net->forward(x);
      return std::vector<Tensor>{loss_fn ? (*loss_fn)(out, y) : models::causal_lm_loss(out, y)};
    })[0];
    const double value = loss.item();
    run.phase([&] {
      core::TraceRange range(core::Range::backward);
      loss.backward();
      return std::vector<Tensor>{};
    });
    run.phase([&] {
      core::TraceRange range(core::Range::optimizer);
      opt->step();
      return std::vector<Tensor>{};
    });
    run.finish();
    return value;
  }
};

double seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

using bench::process_cpu_seconds;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Bytes handed out during one step (activations, gradients, temporaries) above what was live
// before it, the parameters and optimizer state; graph mode: plus its arena, which stays
// allocated between steps.
double step_peak_mb(Trainer& t, const Tensor& x, const Tensor& y) {
  t.opt->zero_grad();  // the last step's gradients go first, as the step would free them
  const size_t base = core::allocator_stats().live_bytes;
  core::reset_peak_live_bytes();
  t.step(x, y);
  const size_t peak = core::allocator_stats().peak_live_bytes;
  const size_t arena = t.compiler ? t.compiler->arena_bytes() : 0;
  return double(peak - std::min(peak, base) + arena) / 1e6;
}

double max_weight_diff(const Trainer& a, const Trainer& b) {
  auto sa = a.net->state_dict(), sb = b.net->state_dict();
  double d = 0;
  for (auto& [name, t] : sa) {
    auto x = t.to_double_vector(), y = sb.at(name).to_double_vector();
    for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  }
  return d;
}

// --profile: the op summary of `steps` steps of one mode (ops by self time).
std::string profile_steps(Trainer& t, const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                          int steps) {
  profiler::Profiler prof;
  for (int i = 0; i < steps; ++i) {
    core::TraceRange step_range(core::Range::step);
    t.step(xs[size_t(i) % xs.size()], ys[size_t(i) % ys.size()]);
  }
  prof.stop();
  // Self time by op and input shapes: which GEMM shapes cost the most.
  std::map<std::string, std::pair<int, double>> by_shape;
  for (const auto& t : prof.recording().threads)
    for (const auto& op : t.ops) {
      auto& [calls, ms] = by_shape[std::string(op.name) + " " + op.shapes];
      ++calls;
      ms += op.self_us / 1e3 / steps;
    }
  std::vector<std::pair<double, std::string>> rows;
  for (auto& [k, v] : by_shape)
    rows.push_back({v.second, k + " x" + std::to_string(v.first / steps)});
  std::sort(rows.rbegin(), rows.rend());
  std::ostringstream os;
  os << prof.summary().table(40) << "  ms per step by op and input shapes:\n";
  for (size_t i = 0; i < rows.size() && i < 30; ++i)
    os << "  " << std::fixed << std::setprecision(2) << std::setw(8) << rows[i].first << "  "
       << rows[i].second << "\n";
  return os.str();
}

// The sgemm peak now: the best of two measurements (the process's first sgemm calls run slower,
// which made the % of peak read high).
double sgemm_peak_now(int threads) {
  double peak = 0;
  for (int i = 0; i < 2; ++i)
    peak = std::max(peak, bench::sgemm_peak_gflops(threads, 2048, /*cpu_time=*/threads == 1));
  context::set_num_threads(threads);
  return peak;
}

json run_workload(const Workload& w, int warmup, int steps, bool check, int profile, int threads,
                  bool in_backward) {
  manual_seed(1);
  const int batches = 4;
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < batches; ++i) {
    if (w.model == "llama") {  // next-token prediction on random ids
      xs.push_back(Tensor::randint(0, stories15m_config().vocab_size, {w.batch, w.image}));
      ys.push_back(xs.back());
      continue;
    }
    xs.push_back(Tensor::randn({w.batch, w.channels, w.image, w.image}));
    ys.push_back(Tensor::randint(0, 10, {w.batch}));
  }
  Trainer eager(w, false), graphed(w, true, in_backward);
  for (int i = 0; i < warmup; ++i) {  // graph: the capture, the replay that plans memory, ...
    eager.step(xs[size_t(i % batches)], ys[size_t(i % batches)]);
    graphed.step(xs[size_t(i % batches)], ys[size_t(i % batches)]);
  }
  // The % of peak divides by the sgemm peak measured just before and just after the timed
  // steps, the higher of the two: a shared host's speed moves over minutes, so a peak from the
  // start of a long run can be another phase's.
  const double peak_before = sgemm_peak_now(threads);
  const double stream_before = bench::stream_triad_gbps(threads);
  context::set_num_threads(threads);
  std::vector<double> te, tg, ce, cg;
  for (int i = 0; i < steps; ++i) {
    const Tensor& x = xs[size_t(i % batches)];
    const Tensor& y = ys[size_t(i % batches)];
    auto t0 = Clock::now();
    double c0 = process_cpu_seconds();
    eager.step(x, y);
    te.push_back(seconds(t0));
    ce.push_back(process_cpu_seconds() - c0);
    t0 = Clock::now();
    c0 = process_cpu_seconds();
    graphed.step(x, y);
    tg.push_back(seconds(t0));
    cg.push_back(process_cpu_seconds() - c0);
  }
  const double peak = std::max(peak_before, sgemm_peak_now(threads));
  const double stream_after = bench::stream_triad_gbps(threads);
  context::set_num_threads(threads);
  if (profile > 0) {
    std::cerr << w.name << " eager:\n" << profile_steps(eager, xs, ys, profile) << "\n";
    std::cerr << w.name << " graph:\n" << profile_steps(graphed, xs, ys, profile) << "\n";
  }
  const double mem_e = step_peak_mb(eager, xs[0], ys[0]);
  const double mem_g = step_peak_mb(graphed, xs[0], ys[0]);
  const double me = median_of(te), mg = median_of(tg);
  const double flops =
      double(w.batch) * (w.model == "llama"
                             ? llama_train_flops(stories15m_config(), w.image)
                             : bench::train_flops_per_image(w.model, w.channels, w.image));
  // With one thread, the % of peak comes from CPU times (the step's and the sgemm's), which
  // load from other processes does not inflate; with more, from wall times.
  const bool cpu = threads == 1;
  const double ge = flops / (cpu ? median_of(ce) : me) / 1e9;
  const double gg = flops / (cpu ? median_of(cg) : mg) / 1e9;
  json r = {{"batch", w.batch},
            {"steps", steps},
            {"eager_median_ms", me * 1e3},
            {"eager_min_ms", *std::min_element(te.begin(), te.end()) * 1e3},
            {"graph_median_ms", mg * 1e3},
            {"graph_min_ms", *std::min_element(tg.begin(), tg.end()) * 1e3},
            {"ratio", me / mg},
            {"eager_cpu_median_ms", median_of(ce) * 1e3},
            {"graph_cpu_median_ms", median_of(cg) * 1e3},
            {"cpu_ratio", median_of(ce) / median_of(cg)},
            {"saved_ms_per_step", (me - mg) * 1e3},
            {"eager_gflops", ge},
            {"graph_gflops", gg},
            {"sgemm_peak_gflops", peak},
            {"stream_gbps_before", stream_before},
            {"stream_gbps_after", stream_after},
            {"stream_gbps", std::min(stream_before, stream_after)},
            {"eager_pct_of_peak", 100.0 * ge / peak},
            {"graph_pct_of_peak", 100.0 * gg / peak},
            {"eager_step_peak_mb", mem_e},
            {"graph_step_peak_mb", mem_g},
            {"memory_ratio", mem_g / mem_e},
            {"graph_arena_mb", double(graphed.compiler->arena_bytes()) / 1e6},
            {"graph_planned_peak_mb", double(graphed.compiler->planned_peak_bytes()) / 1e6},
            {"captures", graphed.compiler->captures()},
            {"replays", graphed.compiler->replays()},
            {"capture", graphed.capture_line}};
  if (const graph::CaptureReport* c = graphed.compiler->last_capture()) {
    json live = json::array();
    for (const graph::LiveGroup& g : c->live_at_peak)
      live.push_back(
          {{"op", g.op}, {"role", g.role}, {"mb", double(g.bytes) / 1e6}, {"buffers", g.buffers}});
    r["graph_activations_mb"] = double(c->activations_after) / 1e6;
    r["graph_peak_op"] = c->peak_op;
    r["graph_live_at_peak"] = live;
  }
  if (check) {
    Trainer a(w, false), b(w, true, in_backward);
    double loss_diff = 0;
    for (int i = 0; i < 20; ++i) {
      const double la = a.step(xs[size_t(i % batches)], ys[size_t(i % batches)]);
      const double lb = b.step(xs[size_t(i % batches)], ys[size_t(i % batches)]);
      loss_diff = std::max(loss_diff, std::abs(la - lb));
    }
    r["check_steps"] = 20;
    r["check_max_loss_diff"] = loss_diff;
    r["check_max_weight_diff"] = max_weight_diff(a, b);
  }
  return r;
}

int usage() {
  std::cerr << "usage: graph_vs_eager [--threads N] [--warmup W] [--steps S] [--workloads a,b] "
               "[--check] [--profile STEPS] [--no-update-in-backward] [--json]\nworkloads:";
  for (auto& w : kWorkloads) std::cerr << " " << w.name;
  std::cerr << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, warmup = 3, steps = 0, profile = 0;
  bool as_json = false, check = false, in_backward = true;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::max(3, std::atoi(next().c_str()));
    else if (a == "--steps")
      steps = std::atoi(next().c_str());
    else if (a == "--workloads")
      only = next();
    else if (a == "--json")
      as_json = true;
    else if (a == "--check")
      check = true;
    else if (a == "--profile")
      profile = std::atoi(next().c_str());
    else if (a == "--update-in-backward")  // the default; kept for older command lines
      in_backward = true;
    else if (a == "--no-update-in-backward")
      in_backward = false;
    else
      return usage();
  }
  if (threads <= 0) threads = bench::default_threads();
  context::set_num_threads(threads);
  std::vector<Workload> selected;
  for (auto& w : kWorkloads)
    if (only.empty() || ("," + only + ",").find("," + w.name + ",") != std::string::npos)
      selected.push_back(w);
  if (selected.empty()) return usage();

  const double peak = sgemm_peak_now(threads);  // at the start; each workload measures its own
  json results = {{"isa", bench::cpu_isa()},
                  {"onednn_isa", bench::onednn_isa()},
                  {"avx2_fast_paths", cpu::use_avx2_fast_paths()},
                  {"sgemm_peak_gflops", peak},
                  {"threads", threads},
                  {"update_in_backward", in_backward},
                  {"workloads", json::object()}};
  for (auto& w : selected) {
    json r = run_workload(w, warmup, steps > 0 ? steps : w.default_steps, check, profile, threads,
                          in_backward);
    results["workloads"][w.name] = r;
    if (!as_json) std::cerr << w.name << ": " << r["capture"].get<std::string>() << "\n";
  }
  if (as_json) {
    std::cout << results.dump(2) << std::endl;
    return 0;
  }
  std::cout
      << "graph vs eager: training step (forward + backward + Momentum; AdamW for LLaMA), "
      << threads << " thread(s), median of alternating steps after " << warmup << " warmup\n"
      << "ISA: " << bench::isa_line() << "; sgemm peak (dnnl_sgemm 2048^3): " << std::fixed
      << std::setprecision(1) << peak
      << " GFLOP/s at the start; each row's % of peak is of its own (sgemm GF: the higher "
         "of the measurements just before and after its timed steps; DRAM GB/s: STREAM triad, "
         "the lower of the same two moments, low in the host's slow phases)\n\n";
  std::cout << std::left << std::setw(20) << "workload" << std::right << std::setw(10) << "eager ms"
            << std::setw(10) << "graph ms" << std::setw(8) << "ratio" << std::setw(10) << "saved ms"
            << std::setw(9) << "cpu x" << std::setw(9) << "eager %" << std::setw(9) << "graph %"
            << std::setw(10) << "sgemm GF" << std::setw(10) << "DRAM GB/s" << std::setw(10)
            << "eager MB" << std::setw(10) << "graph MB" << std::setw(8) << "mem x";
  if (check) std::cout << std::setw(12) << "max diff";
  std::cout << "\n";
  for (auto& w : selected) {
    const json& r = results["workloads"][w.name];
    auto f = [&](const char* k, int prec, int width) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(prec) << r[k].get<double>();
      std::cout << std::setw(width) << os.str();
    };
    std::cout << std::left << std::setw(20) << w.name << std::right;
    f("eager_median_ms", 1, 10);
    f("graph_median_ms", 1, 10);
    f("ratio", 2, 8);
    f("saved_ms_per_step", 1, 10);
    f("cpu_ratio", 2, 9);
    f("eager_pct_of_peak", 1, 9);
    f("graph_pct_of_peak", 1, 9);
    f("sgemm_peak_gflops", 1, 10);
    f("stream_gbps", 1, 10);
    f("eager_step_peak_mb", 1, 10);
    f("graph_step_peak_mb", 1, 10);
    f("memory_ratio", 2, 8);
    if (check) {
      std::ostringstream os;
      os << std::scientific << std::setprecision(1)
         << std::max(r["check_max_loss_diff"].get<double>(),
                     r["check_max_weight_diff"].get<double>());
      std::cout << std::setw(12) << os.str();
    }
    std::cout << "\n";
  }
  return 0;
}
