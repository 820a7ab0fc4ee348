// zenith against PyTorch, side by side: one training step (forward, backward, Momentum step)
// per workload, both frameworks on the same thread count, each in its own child process so its
// peak resident memory (VmHWM) is its own. Also times a large sgemm for the machine's peak.
//
//   vs_pytorch [--threads N] [--warmup W] [--steps S] [--repeats R] [--workloads a,b] [--json]
//              [--profile] [--no-pytorch] [--python /usr/bin/python3]
//
// Workloads: seedcnn-fmnist-b64, seedcnn-cifar-b64, resnet18-cifar-b32. The table shows img/s,
// the ratio zenith / PyTorch, GFLOP/s achieved on the conv and matmul FLOPs of forward +
// backward (counted analytically), and peak memory. --profile adds zenith's time per op.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "core/dispatch.h"
#include "zenith/zenith.h"

namespace {

using nlohmann::json;
using namespace zenith;
using namespace zenith::bench;

struct Workload {
  std::string name, model;
  int64_t channels, image, batch;
  int default_steps;
};

const std::vector<Workload> kWorkloads = {
    {"seedcnn-fmnist-b64", "seedcnn", 1, 28, 64, 20},
    {"seedcnn-cifar-b64", "seedcnn", 3, 32, 64, 20},
    {"resnet18-cifar-b32", "resnet18", 3, 32, 32, 6},
};

double train_flops_per_image(const Workload& w) {
  return bench::train_flops_per_image(w.model, w.channels, w.image);
}

// ---- per-op profile: time between consecutive dispatch callbacks is charged to the op that
// just finished (its kernel plus the framework glue that led to it).
struct Profile {
  std::map<std::string, std::pair<double, int64_t>> per_op;  // this step: seconds, calls
  std::vector<std::map<std::string, std::pair<double, int64_t>>> steps;
  Clock::time_point last;
  bool active = false;
};

void observe(void* user, const dispatch::OpEvent& event) {
  if (event.decomposed) return;  // its ops were seen one by one
  auto* p = static_cast<Profile*>(user);
  auto now = Clock::now();
  if (p->active) {
    auto& e = p->per_op[op_name(event.op)];
    e.first += std::chrono::duration<double>(now - p->last).count();
    e.second += 1;
  }
  p->last = now;
}

// ---- the zenith child: builds the workload, times steps, prints one JSON line.
int run_zenith_child(const Workload& w, int threads, int warmup, int steps, bool profile) {
  context::set_num_threads(threads);
  manual_seed(0);
  auto net = models::create(w.model, w.channels, w.image, 10);
  net->set_train(true);
  Tensor x = Tensor::randn({w.batch, w.channels, w.image, w.image});
  Tensor y = Tensor::randint(0, 10, {w.batch});
  auto loss_fn = nn::SoftmaxCrossEntropyWithLogits(true);
  auto opt = nn::Momentum(net->trainable_params(), 0.01, 0.9);
  auto step = [&] {
    Tensor loss = loss_fn->forward(net->forward(x), y);
    loss.backward();
    opt->step();
    opt->zero_grad();
  };
  for (int i = 0; i < warmup; ++i) step();
  Profile prof;
  int obs = profile ? dispatch::add_observer(observe, &prof) : 0;
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    auto t0 = Clock::now();
    prof.last = t0;
    prof.active = profile;
    step();
    auto t1 = Clock::now();
    if (profile) {  // time after the last op of the step (freeing the graph, ...)
      auto& e = prof.per_op["(after last op)"];
      e.first += std::chrono::duration<double>(t1 - prof.last).count();
      e.second += 1;
    }
    prof.active = false;
    if (profile) prof.steps.push_back(std::move(prof.per_op)), prof.per_op.clear();
    times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  if (profile) dispatch::remove_observer(obs);
  double median = median_of(times);
  json out = {{"img_s", double(w.batch) / median},
              {"median_ms", median * 1e3},
              {"vmhwm_kb", vmhwm_kb()},
              {"threads", context::get_num_threads()}};
  std::vector<double> ms;
  for (double t : times) ms.push_back(t * 1e3);
  out["steps_ms"] = ms;
  if (profile) {
    // Averages over the steps no slower than the median: other processes on shared cores
    // stretch some steps, and those would blur where a typical step's time goes.
    json p = json::object();
    std::map<std::string, std::pair<double, int64_t>> sum;
    int used = 0;
    for (size_t i = 0; i < times.size(); ++i) {
      if (times[i] > median) continue;
      ++used;
      for (auto& [op, e] : prof.steps[i]) {
        sum[op].first += e.first;
        sum[op].second += e.second;
      }
    }
    for (auto& [op, e] : sum)
      p[op] = {{"ms_per_step", e.first * 1e3 / used}, {"calls_per_step", e.second / used}};
    out["profile"] = p;
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

void print_profile(const std::string& workload, const json& profile, double step_ms) {
  std::vector<std::pair<double, std::string>> rows;
  for (auto& [op, e] : profile.items()) rows.push_back({e["ms_per_step"].get<double>(), op});
  std::sort(rows.rbegin(), rows.rend());
  std::cout << "\nzenith time per op, " << workload
            << " (ms per step, mean over the steps at or below the median; step median "
            << std::fixed << std::setprecision(1) << step_ms << " ms)\n";
  for (auto& [ms, op] : rows) {
    if (ms < 0.005 * step_ms) continue;
    std::cout << "  " << std::left << std::setw(32) << op << std::right << std::setw(9)
              << std::setprecision(2) << ms << "  " << std::setw(5) << std::setprecision(1)
              << 100.0 * ms / step_ms << "%  x" << profile[op]["calls_per_step"].get<int64_t>()
              << "\n";
  }
}

int usage() {
  std::cerr << "usage: vs_pytorch [--threads N] [--warmup W] [--steps S] [--repeats R] "
               "[--workloads a,b] "
               "[--json] [--profile] [--no-pytorch] [--python PATH]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, warmup = 3, steps = 0, repeats = 1;
  bool as_json = false, profile = false, with_pytorch = true;
  std::string python = "/usr/bin/python3", only, child;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--steps")
      steps = std::atoi(next().c_str());
    else if (a == "--repeats")
      repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--workloads")
      only = next();
    else if (a == "--json")
      as_json = true;
    else if (a == "--profile")
      profile = true;
    else if (a == "--no-pytorch")
      with_pytorch = false;
    else if (a == "--python")
      python = next();
    else if (a == "--child-zenith")
      child = next();
    else
      return usage();
  }
  if (threads <= 0) threads = bench::default_threads();

  std::vector<Workload> selected;
  for (auto& w : kWorkloads)
    if (only.empty() || ("," + only + ",").find("," + w.name + ",") != std::string::npos)
      selected.push_back(w);
  if (!child.empty()) {
    for (auto& w : kWorkloads)
      if (w.name == child)
        return run_zenith_child(w, threads, warmup, steps > 0 ? steps : w.default_steps, profile);
    std::cerr << "vs_pytorch: unknown workload " << child << "\n";
    return 2;
  }
  if (selected.empty()) return usage();

  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string script = (std::filesystem::path(__FILE__).parent_path() / "vs_pytorch.py").string();
  std::string env = "OMP_NUM_THREADS=" + std::to_string(threads) +
                    " ZENITH_NUM_THREADS=" + std::to_string(threads) + " ";
  double peak = sgemm_peak_gflops(threads);

  json results = json::object();
  std::map<std::string, json> profiles;
  for (auto& w : selected) {
    int n = steps > 0 ? steps : w.default_steps;
    std::string common = " --threads " + std::to_string(threads) + " --warmup " +
                         std::to_string(warmup) + " --steps " + std::to_string(n);
    // Alternate the frameworks `repeats` times and keep each one's fastest run: on shared
    // cores, other processes slow some runs down, never speed them up.
    json z, t;
    auto faster = [](const json& best, const json& run) {
      return best.is_null() ||
             (!run.is_null() && run["img_s"].get<double>() > best["img_s"].get<double>());
    };
    for (int rep = 0; rep < repeats; ++rep) {
      json zr = run_child(env + quote(self) + " --child-zenith " + w.name + common +
                          (profile ? " --profile" : ""));
      if (faster(z, zr)) z = zr;
      if (!with_pytorch) continue;
      json tr =
          run_child(env + quote(python) + " " + quote(script) + " --workload " + w.name + common);
      if (faster(t, tr)) t = tr;
    }
    double flops = train_flops_per_image(w);
    json r = {{"zenith_img_s", z.is_null() ? json(nullptr) : z["img_s"]},
              {"pytorch_img_s", t.is_null() ? json(nullptr) : t["img_s"]},
              {"ratio", (z.is_null() || t.is_null())
                            ? json(nullptr)
                            : json(z["img_s"].get<double>() / t["img_s"].get<double>())},
              {"train_gflop_per_img", flops / 1e9},
              {"sgemm_peak_gflops", peak},
              {"isa", bench::cpu_isa()},
              {"onednn_isa", bench::onednn_isa()},
              {"avx2_fast_paths", cpu::use_avx2_fast_paths()},
              {"threads", threads}};
    if (!z.is_null()) {
      r["zenith_gflops"] = z["img_s"].get<double>() * flops / 1e9;
      r["zenith_peak_mb"] = z["vmhwm_kb"].get<double>() / 1024.0;
      r["zenith_median_ms"] = z["median_ms"];
      if (z.contains("profile")) profiles[w.name] = z;
    }
    if (!t.is_null()) {
      r["pytorch_gflops"] = t["img_s"].get<double>() * flops / 1e9;
      r["pytorch_peak_mb"] = t["vmhwm_kb"].get<double>() / 1024.0;
      r["pytorch_median_ms"] = t["median_ms"];
    }
    results[w.name] = r;
  }

  if (as_json) {
    std::cout << results.dump(2) << std::endl;
    return 0;
  }
  auto num = [](const json& v, int prec) {
    std::ostringstream os;
    if (v.is_null()) return std::string("-");
    os << std::fixed << std::setprecision(prec) << v.get<double>();
    return os.str();
  };
  std::cout << "zenith vs PyTorch: training step (forward + backward + Momentum), " << threads
            << " thread(s), median of the timed steps after " << warmup << " warmup"
            << (repeats > 1 ? ", fastest of " + std::to_string(repeats) + " alternating runs" : "")
            << "\n"
            << "ISA: " << bench::isa_line() << "; sgemm peak (dnnl_sgemm 2048^3): " << std::fixed
            << std::setprecision(1) << peak << " GFLOP/s\n\n";
  std::cout << std::left << std::setw(20) << "workload" << std::right << std::setw(12)
            << "zenith img/s" << std::setw(13) << "torch img/s" << std::setw(8) << "ratio"
            << std::setw(12) << "zenith GF/s" << std::setw(11) << "torch GF/s" << std::setw(8)
            << "% peak" << std::setw(11) << "zenith MB" << std::setw(10) << "torch MB"
            << "\n";
  for (auto& w : selected) {
    const json& r = results[w.name];
    json zg = r.value("zenith_gflops", json(nullptr));
    std::cout << std::left << std::setw(20) << w.name << std::right << std::setw(12)
              << num(r["zenith_img_s"], 1) << std::setw(13) << num(r["pytorch_img_s"], 1)
              << std::setw(8) << num(r["ratio"], 2) << std::setw(12) << num(zg, 1) << std::setw(11)
              << num(r.value("pytorch_gflops", json(nullptr)), 1) << std::setw(8)
              << (zg.is_null() ? std::string("-") : num(json(100.0 * zg.get<double>() / peak), 1))
              << std::setw(11) << num(r.value("zenith_peak_mb", json(nullptr)), 0) << std::setw(10)
              << num(r.value("pytorch_peak_mb", json(nullptr)), 0) << "\n";
  }
  for (auto& [name, z] : profiles) print_profile(name, z["profile"], z["median_ms"].get<double>());
  return 0;
}
