// zenith against PyTorch 1.13 eager (bench/llm_torch.py, the reference LLaMA of
// scripts/llama_reference.py) on LLaMA-shaped models with random float32 weights, each
// measurement in its own child process so its peak resident memory (VmHWM) is its own:
//   train-15m, train-110m   one training step (forward, HF's shifted loss, backward, AdamW lr 3e-4
//                           weight decay 0.1) on batch 8 x seq 256: tokens/s, % of the sgemm
//                           peak for 6 x non-embedding params + attention FLOPs per token
//   short-15m-b1/b2/b4      the same at seq 64, batch 1, 2, 4: per-op overhead dominates
//   gen-15m, gen-110m       batch 1 greedy decoding with a KV cache after a 16-token prompt:
//                           tokens/s and % of the memory-bandwidth limit (read bandwidth
//                           measured here / weight bytes read per token)
// Shapes: 15m = stories15M (dim 288, 6 layers, 6 heads, hidden 768, vocab 32000, untied head),
// 110m = stories110M (dim 768, 12 layers, 12 heads, hidden 2048).
//
//   llm [--threads N] [--repeats R] [--only a,b] [--steps S] [--warmup W] [--gen-tokens G]
//       [--json] [--no-pytorch] [--python /usr/bin/python3]
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <map>
#include <thread>

#include "bench_common.h"
#include "llm_common.h"
#include "zenith/zenith.h"

namespace {

using nlohmann::json;
using namespace zenith;
using namespace zenith::bench;

struct Measurement {
  std::string name, config, mode;
  int64_t batch, seq;
  int steps, warmup;  // defaults: a 110M training step takes ~20 s on 2 cores
};

const std::vector<Measurement> kMeasurements = {
    {"train-15m", "15m", "train", 8, 256, 5, 1},    {"train-110m", "110m", "train", 8, 256, 3, 1},
    {"short-15m-b1", "15m", "train", 1, 64, 10, 2}, {"short-15m-b2", "15m", "train", 2, 64, 10, 2},
    {"short-15m-b4", "15m", "train", 4, 64, 10, 2}, {"gen-15m", "15m", "generate", 1, 0, 3, 1},
    {"gen-110m", "110m", "generate", 1, 0, 3, 1},
};

json train_child(const Measurement& m, int steps, int warmup) {
  manual_seed(0);
  models::Llama model(llm_shape(m.config));
  model.train();
  auto opt = nn::AdamW(model.trainable_params(), 3e-4, 0.9, 0.999, 1e-8, 0.1);
  Tensor x = Tensor::randint(0, model.config().vocab_size, {m.batch, m.seq});
  auto step = [&] {
    opt->zero_grad();
    Tensor loss = models::causal_lm_loss(model.forward(x), x);
    loss.backward();
    opt->step();
  };
  std::vector<double> times;
  for (int i = 0; i < warmup + steps; ++i) {
    auto t0 = Clock::now();
    step();
    if (i >= warmup) times.push_back(seconds_since(t0));
  }
  const double median = median_of(times);
  json out = llm_counts(model, m.seq);
  out.update({{"batch", m.batch},
              {"seq", m.seq},
              {"tokens_s", double(m.batch * m.seq) / median},
              {"median_ms", median * 1e3}});
  for (double t : times) out["steps_ms"].push_back(t * 1e3);
  return out;
}

json generate_child(const Measurement& m, int runs, int warmup, int64_t gen_tokens) {
  constexpr int64_t kPromptLen = 16;
  manual_seed(0);
  models::Llama model(llm_shape(m.config));
  model.eval();
  NoGradGuard no_grad;
  Tensor prompt = Tensor::randint(0, model.config().vocab_size, {1, kPromptLen});
  std::vector<double> prefill, decode;
  for (int r = 0; r < warmup + runs; ++r) {
    models::KVCache cache(model.config(), 1, kPromptLen + gen_tokens + 1);
    models::LlamaInput in;
    in.cache = &cache;
    in.input_ids = prompt;
    in.last_position_only = true;
    auto t0 = Clock::now();
    Tensor token = ops::argmax(model.forward(in), -1);  // [1, 1]
    auto t1 = Clock::now();
    for (int64_t i = 0; i < gen_tokens; ++i) {
      in.input_ids = token;
      token = ops::argmax(model.forward(in), -1);
    }
    if (r < warmup) continue;
    prefill.push_back(std::chrono::duration<double>(t1 - t0).count());
    decode.push_back(seconds_since(t1));
  }
  const double median = median_of(decode);
  json out = llm_counts(model, kPromptLen + gen_tokens);
  out.update({{"batch", 1},
              {"prompt_len", kPromptLen},
              {"gen_tokens", gen_tokens},
              {"tokens_s", double(gen_tokens) / median},
              {"decode_ms", median * 1e3},
              {"prefill_ms", median_of(prefill) * 1e3}});
  return out;
}

int usage() {
  std::cerr << "usage: llm [--threads N] [--repeats R] [--only a,b] [--steps S] [--warmup W] "
               "[--gen-tokens G] [--json] [--no-pytorch] [--python PATH]\n  measurements:";
  for (const auto& m : kMeasurements) std::cerr << " " << m.name;
  std::cerr << "\n";
  return 2;
}

void print_table(const json& out) {
  std::cout << "ISA " << out["isa"].get<std::string>() << ", " << out["threads"] << " threads, "
            << "sgemm peak " << fixed(out["sgemm_peak_gflops"], 1) << " GFLOP/s, read bandwidth "
            << fixed(out["read_bandwidth_gbs"], 1) << " GB/s\n";
  std::cout << std::left << std::setw(14) << "measurement" << std::right << std::setw(11)
            << "zenith t/s" << std::setw(10) << "torch t/s" << std::setw(8) << "ratio"
            << std::setw(10) << "zenith %" << std::setw(9) << "torch %" << std::setw(11)
            << "zenith MB" << std::setw(10) << "torch MB"
            << "   (% of sgemm peak; gen: of the "
            << "bandwidth limit)\n";
  for (const auto& r : out["results"]) {
    std::cout << std::left << std::setw(14) << r["name"].get<std::string>() << std::right
              << std::setw(11) << cell(r["zenith_tokens_s"], 1) << std::setw(10)
              << cell(r["torch_tokens_s"], 1) << std::setw(8) << cell(r["ratio"], 2)
              << std::setw(10) << cell(r["zenith_pct"], 1) << std::setw(9)
              << cell(r["torch_pct"], 1) << std::setw(11) << cell(r["zenith_peak_mb"], 0)
              << std::setw(10) << cell(r["torch_peak_mb"], 0) << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, repeats = 1, steps = 0, warmup = -1;
  int64_t gen_tokens = 64;
  bool as_json = false, with_pytorch = true;
  std::string python = "/usr/bin/python3", only, child;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--repeats")
      repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--only")
      only = next();
    else if (a == "--steps")
      steps = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--gen-tokens")
      gen_tokens = std::atoll(next().c_str());
    else if (a == "--json")
      as_json = true;
    else if (a == "--no-pytorch")
      with_pytorch = false;
    else if (a == "--python")
      python = next();
    else if (a == "--child")
      child = next();
    else
      return usage();
  }
  if (threads <= 0) threads = bench::default_threads();
  std::vector<Measurement> selected;
  for (const auto& m : kMeasurements)
    if (child.empty()
            ? only.empty() || ("," + only + ",").find("," + m.name + ",") != std::string::npos
            : m.name == child)
      selected.push_back(m);
  if (selected.empty()) return usage();

  if (!child.empty()) {
    const Measurement& m = selected.front();
    const int n = steps > 0 ? steps : m.steps, w = warmup >= 0 ? warmup : m.warmup;
    json out = m.mode == "train" ? train_child(m, n, w) : generate_child(m, n, w, gen_tokens);
    out.update({{"config", m.config},
                {"mode", m.mode},
                {"vmhwm_kb", vmhwm_kb()},
                {"threads", omp_get_max_threads()}});
    std::cout << out.dump() << std::endl;
    return 0;
  }

  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string script = bench_script(self, "llm_torch.py");
  const std::string env = "OMP_NUM_THREADS=" + std::to_string(threads) +
                          " ZENITH_NUM_THREADS=" + std::to_string(threads) + " ";
  json out = {{"isa", cpu_isa()},
              {"threads", threads},
              {"sgemm_peak_gflops", sgemm_peak_gflops(threads)},
              {"read_bandwidth_gbs", read_bandwidth_gbs(threads)},
              {"results", json::array()}};
  const double peak = out["sgemm_peak_gflops"], bandwidth = out["read_bandwidth_gbs"];
  for (const auto& m : selected) {
    const int n = steps > 0 ? steps : m.steps, w = warmup >= 0 ? warmup : m.warmup;
    std::string common = " --threads " + std::to_string(threads) + " --steps " + std::to_string(n) +
                         " --warmup " + std::to_string(w);
    std::string torch_args = " --config " + m.config + " --mode " + m.mode + " --json";
    if (m.mode == "train")
      torch_args += " --batch " + std::to_string(m.batch) + " --seq " + std::to_string(m.seq);
    else
      torch_args += " --gen-tokens " + std::to_string(gen_tokens);
    // Alternate the two sides `repeats` times and keep each one's fastest run: on shared cores,
    // other processes slow runs down, never speed them up.
    json z, t;
    auto faster = [](const json& best, const json& run) {
      return best.is_null() || (!run.is_null() && run["tokens_s"] > best["tokens_s"]);
    };
    for (int rep = 0; rep < repeats; ++rep) {
      json zr = run_child(env + quote(self) + " --child " + m.name + common + " --gen-tokens " +
                          std::to_string(gen_tokens));
      if (faster(z, zr)) z = zr;
      if (!with_pytorch) continue;
      json tr = run_child(env + quote(python) + " " + quote(script) + torch_args + common);
      if (faster(t, tr)) t = tr;
    }
    // % of the sgemm peak (training) or of the bandwidth limit (generation).
    auto pct = [&](const json& r) -> json {
      if (r.is_null()) return nullptr;
      const double rate = r["tokens_s"];
      if (m.mode == "train") return 100.0 * rate * r["flops_per_token"].get<double>() / 1e9 / peak;
      return 100.0 * rate * r["weight_bytes_per_token"].get<double>() / 1e9 / bandwidth;
    };
    json row = {{"name", m.name}, {"mode", m.mode}, {"batch", m.batch}, {"seq", m.seq}};
    if (!z.is_null())
      row.update({{"zenith", z},
                  {"zenith_tokens_s", z["tokens_s"]},
                  {"zenith_pct", pct(z)},
                  {"zenith_peak_mb", z["vmhwm_kb"].get<double>() / 1024.0}});
    if (!t.is_null())
      row.update({{"torch", t},
                  {"torch_tokens_s", t["tokens_s"]},
                  {"torch_pct", pct(t)},
                  {"torch_peak_mb", t["vmhwm_kb"].get<double>() / 1024.0}});
    if (!z.is_null() && !t.is_null())
      row["ratio"] = z["tokens_s"].get<double>() / t["tokens_s"].get<double>();
    out["results"].push_back(row);
    if (!as_json) std::cerr << "done: " << m.name << "\n";
  }
  if (as_json)
    std::cout << out.dump() << std::endl;
  else
    print_table(out);
  return 0;
}
