// Fine-tuning steps of zenith against PyTorch 1.13 eager with a hand-written PEFT LoRA
// (bench/llm_torch.py --lora-targets, the reference LLaMA of scripts/llama_reference.py), on
// the stories15M- and stories110M-shaped models (bench/llm_common.h) with random weights, batch
// 8 x seq 256, random tokens, HF's shifted loss, AdamW lr 3e-4 weight decay 0.1. LoRA: r 8,
// alpha 16, no dropout, targets q_proj,v_proj, A kaiming-uniform, B zero. Cases:
//   lora            float32 base, frozen; the only case PyTorch runs too (same model, same step)
//   lora-bf16       the base stored in bfloat16 (what zenith finetune keeps for a bf16 file)
//   lora-bf16-o1    the bf16 base with --amp O1 (linear inputs rounded to bf16): bfloat16
//                   arithmetic where the CPU has AVX512_BF16 (lora-bf16 computes in float32)
//   full            every weight trained, float32
// and each of lora, lora-bf16 and full with activation checkpointing per decoder layer:
//   CASE-sel        selective: the layer keeps its costly GEMM outputs (models::
//                   kSelectiveCheckpointing, or --ckpt-policy LIST) and recomputes the rest
//   CASE-ckpt       full: the whole layer recomputed from its input
// Each case runs in its own child process, so its peak resident memory (VmHWM) is its own.
// Per case: tokens/s (batch * seq / median step; the step's process CPU time beside it), % of the
// sgemm peak for the FLOPs the step needs (bench/llm_common.h: LoRA 4 N + 6 A + attention per
// token, full 6 N + attention; N the non-embedding base params, A the adapter params), peak RSS,
// and the activation memory: the allocator's peak of live bytes from the start of the forward to
// the end of the backward, less the live bytes at its start (weights, optimizer state). The peak
// RSS is split into the process at start, the live tensors at the peak by kind (weights,
// optimizer state, saved for backward = live after the forward, temporaries = the rest
// up to the peak), the allocator's cached blocks on top, and the rest (malloc, stacks). Checks
// printed against the targets: LoRA tokens/s >= 1.5x PyTorch, or >= PyTorch and
// >= 80% of the peak; LoRA bf16 peak RSS <= 60% of full fine-tuning's; checkpointing cuts the
// activation memory >= 50% for <= 35% more step time (each checkpointed case against its case
// without; the target is lora-bf16's). The loss is
// models::causal_lm_loss(model, input, labels): the output layer and cross entropy in chunks of
// positions, never the whole [B, T, V] logits; --whole-logits takes
// causal_lm_loss(model.forward(input), labels) instead (PyTorch's way).
//
//   finetune [--threads N] [--repeats R] [--configs 15m,110m] [--cases lora,full,...]
//            [--steps S] [--warmup W] [--whole-logits] [--json] [--no-pytorch]
//            [--ckpt-policy LIST]
//            [--python /usr/bin/python3]
#include <omp.h>

#include <filesystem>
#include <iomanip>

#include "bench_common.h"
#include "core/allocator.h"
#include "llm_common.h"
#include "zenith/cpu_features.h"
#include "zenith/zenith.h"

namespace {

using nlohmann::json;
using namespace zenith;
using namespace zenith::bench;

constexpr int64_t kBatch = 8, kSeq = 256, kRank = 8;
constexpr double kAlpha = 16;
const std::vector<std::string> kConfigs = {"15m", "110m"};
const std::vector<std::string> kBases = {"lora", "lora-bf16", "full"};
const std::vector<std::string> kCases = {
    "lora",           "lora-sel",     "lora-ckpt", "lora-bf16", "lora-bf16-sel",
    "lora-bf16-ckpt", "lora-bf16-o1", "full",      "full-sel",  "full-ckpt"};

bool listed(const std::string& list, const std::string& name) {
  return list.empty() || ("," + list + ",").find("," + name + ",") != std::string::npos;
}

double mb(double bytes) { return bytes / (1 << 20); }

// Where a case's peak resident memory comes from, in MB: the process before the model
// (libraries, thread pools), the tensors live at the peak by kind, the allocator's cached blocks
// on top of them, and the rest of the peak RSS (malloc outside the allocator, oneDNN, stacks).
json memory_breakdown(const models::Llama& model, int64_t rss_start_kb, int64_t rss_model_kb,
                      size_t state_bytes, size_t saved_bytes, size_t grad_bytes, size_t peak_live,
                      size_t peak_held) {
  double weights = 0;
  for (const Tensor& p : model.parameters()) weights += double(p.numel() * itemsize(p.dtype()));
  const double hwm = double(vmhwm_kb()) * 1024;
  return {{"rss_start_mb", double(rss_start_kb) / 1024},
          {"rss_after_model_mb", double(rss_model_kb) / 1024},
          {"weights_mb", mb(weights)},
          {"optimizer_state_mb", mb(double(state_bytes) - weights)},
          {"saved_for_backward_mb", mb(double(saved_bytes))},
          {"param_grads_mb", mb(double(grad_bytes))},
          {"temporaries_mb", mb(double(peak_live) - double(state_bytes + saved_bytes))},
          {"peak_live_mb", mb(double(peak_live))},
          {"allocator_cached_at_peak_mb", mb(double(peak_held) - double(peak_live))},
          {"non_tensor_mb", mb(hwm - double(peak_held))},
          {"peak_rss_mb", mb(hwm)}};
}

// One case's timed steps in this process.
json run_case(const std::string& config, const std::string& kase, int steps, int warmup,
              bool whole_logits, const std::string& ckpt_policy) {
  const int64_t rss_start_kb = proc_status_kb("VmRSS:");
  manual_seed(0);
  const bool lora = !kase.starts_with("full");
  models::Llama model(llm_shape(config),
                      kase.find("bf16") != std::string::npos ? DType::bf16 : DType::f32);
  int64_t adapter_params = -1;
  if (lora) {
    io::LoraConfig lc;
    lc.r = kRank;
    lc.lora_alpha = kAlpha;
    lc.target_modules = {"q_proj", "v_proj"};
    models::add_lora(model, lc);
    model.freeze_base();
    adapter_params = model.num_parameters(/*trainable_only=*/true);
  }
  const bool selective = kase.ends_with("-sel");
  model.set_activation_checkpointing(selective || kase.ends_with("-ckpt"),
                                     selective ? ckpt_policy : "full");
  if (kase.ends_with("-o1")) model.set_low_precision(DType::bf16);
  model.train();
  auto opt = nn::AdamW(model.trainable_params(), 3e-4, 0.9, 0.999, 1e-8, 0.1);
  Tensor x = Tensor::randint(0, model.config().vocab_size, {kBatch, kSeq});
  models::LlamaInput in;
  in.input_ids = x;
  const int64_t rss_model_kb = proc_status_kb("VmRSS:");
  // The allocator's live bytes at the step's marks (the last step's) and its peaks (the most of
  // any step): what the peak resident memory is made of.
  size_t state_bytes = 0, activation_bytes = 0, saved_bytes = 0, grad_bytes = 0;
  size_t peak_live = 0, peak_held = 0;
  auto step = [&] {
    opt->zero_grad();
    const size_t live = core::allocator_stats().live_bytes;
    core::reset_peak_live_bytes();
    Tensor loss = whole_logits ? models::causal_lm_loss(model.forward(in), x)
                               : models::causal_lm_loss(model, in, x);
    saved_bytes = core::allocator_stats().live_bytes - live;
    loss.backward();
    loss = Tensor();
    const core::AllocatorStats s = core::allocator_stats();
    state_bytes = live;
    grad_bytes = s.live_bytes - live;
    activation_bytes = std::max(activation_bytes, s.peak_live_bytes - live);
    opt->step();
    const core::AllocatorStats after = core::allocator_stats();
    peak_live = std::max(peak_live, after.peak_live_bytes);
    peak_held = std::max(peak_held, after.peak_held_bytes);
  };
  std::vector<double> times, cpu_times;
  for (int i = 0; i < warmup + steps; ++i) {
    auto t0 = Clock::now();
    const double c0 = process_cpu_seconds();
    step();
    if (i < warmup) continue;
    times.push_back(seconds_since(t0));
    cpu_times.push_back(process_cpu_seconds() - c0);
  }
  const double median = median_of(times);
  json out = llm_counts(model, kSeq, adapter_params);
  out.update({{"trainable_params", model.num_parameters(true)},
              {"tokens_s", double(kBatch * kSeq) / median},
              {"median_ms", median * 1e3},
              {"median_cpu_ms", median_of(cpu_times) * 1e3},
              {"state_mb", double(state_bytes) / (1 << 20)},
              {"activation_mb", double(activation_bytes) / (1 << 20)},
              {"memory", memory_breakdown(model, rss_start_kb, rss_model_kb, state_bytes,
                                          saved_bytes, grad_bytes, peak_live, peak_held)}});
  for (double t : times) out["steps_ms"].push_back(t * 1e3);
  return out;
}

int usage() {
  std::cerr << "usage: finetune [--threads N] [--repeats R] [--configs 15m,110m] "
               "[--cases lora,lora-sel,lora-ckpt,lora-bf16,...,lora-bf16-o1,full-ckpt] "
               "[--steps S] [--warmup W] [--json] [--whole-logits] [--no-pytorch] "
               "[--python PATH] [--ckpt-policy selective|LIST]\n";
  return 2;
}

const json* find_row(const json& out, const std::string& config, const std::string& kase) {
  for (const auto& r : out["results"])
    if (r["config"] == config && r["case"] == kase && r.contains("zenith")) return &r;
  return nullptr;
}

// The targets, from the rows whose zenith side ran: ratios and whether each is met.
json checks(const json& out, const std::string& config) {
  json c = json::object();
  const json* lora = find_row(out, config, "lora");
  const json* bf16 = find_row(out, config, "lora-bf16");
  const json* full = find_row(out, config, "full");
  if (lora && lora->contains("ratio")) {
    const double ratio = (*lora)["ratio"], pct = (*lora)["zenith_pct"];
    c["lora_ratio"] = ratio;
    c["lora_pct_of_peak"] = pct;
    c["lora_speed_met"] = ratio >= 1.5 || (ratio >= 1.0 && pct >= 80.0);
  }
  const json* o1 = find_row(out, config, "lora-bf16-o1");
  if (lora && o1) {  // the bf16 target: the O1 step >= 1.5x the float32 step
    const double speedup =
        (*lora)["zenith"]["median_ms"].get<double>() / (*o1)["zenith"]["median_ms"].get<double>();
    c["bf16_o1_speedup"] = speedup;
    c["bf16_o1_cpu_speedup"] = (*lora)["zenith"]["median_cpu_ms"].get<double>() /
                               (*o1)["zenith"]["median_cpu_ms"].get<double>();
    c["bf16_arithmetic"] = bf16_arithmetic();
    c["bf16_o1_speed_met"] = speedup >= 1.5;
  }
  if (bf16 && full) {
    const double share =
        (*bf16)["zenith_peak_mb"].get<double>() / (*full)["zenith_peak_mb"].get<double>();
    c["lora_bf16_rss_share_of_full"] = share;
    c["lora_rss_met"] = share <= 0.60;
  }
  for (const std::string& base : kBases)
    for (const std::string kind : {"-sel", "-ckpt"}) {
      const json* off = find_row(out, config, base);
      const json* on = find_row(out, config, base + kind);
      if (!off || !on) continue;
      const double saved = 1.0 - (*on)["zenith"]["activation_mb"].get<double>() /
                                     (*off)["zenith"]["activation_mb"].get<double>();
      const double cost =
          (*on)["zenith"]["median_ms"].get<double>() / (*off)["zenith"]["median_ms"].get<double>() -
          1.0;
      const double cpu_cost = (*on)["zenith"]["median_cpu_ms"].get<double>() /
                                  (*off)["zenith"]["median_cpu_ms"].get<double>() -
                              1.0;
      c["checkpointing"][base + kind] = {{"activation_saved", saved},
                                         {"time_cost", cost},
                                         {"cpu_time_cost", cpu_cost},
                                         {"met", saved >= 0.50 && cost <= 0.35}};
    }
  return c;
}

void print_table(const json& out) {
  std::cout << "ISA " << out["isa"].get<std::string>() << ", " << out["threads"] << " threads, "
            << "sgemm peak " << fixed(out["sgemm_peak_gflops"], 1) << " GFLOP/s; batch " << kBatch
            << " x seq " << kSeq << ", LoRA r " << kRank << " alpha " << kAlpha
            << " on q_proj,v_proj\n";
  std::cout << std::left << std::setw(6) << "shape" << std::setw(16) << "case" << std::right
            << std::setw(11) << "zenith t/s" << std::setw(10) << "torch t/s" << std::setw(7)
            << "ratio" << std::setw(10) << "zenith %" << std::setw(9) << "torch %" << std::setw(11)
            << "zenith MB" << std::setw(10) << "torch MB" << std::setw(8) << "act MB"
            << "   (% of sgemm peak; MB: peak RSS)\n";
  for (const auto& r : out["results"]) {
    const json act = r.contains("zenith") ? r["zenith"]["activation_mb"] : json();
    std::cout << std::left << std::setw(6) << r["config"].get<std::string>() << std::setw(16)
              << r["case"].get<std::string>() << std::right << std::setw(11)
              << cell(r.value("zenith_tokens_s", json()), 1) << std::setw(10)
              << cell(r.value("torch_tokens_s", json()), 1) << std::setw(7)
              << cell(r.value("ratio", json()), 2) << std::setw(10)
              << cell(r.value("zenith_pct", json()), 1) << std::setw(9)
              << cell(r.value("torch_pct", json()), 1) << std::setw(11)
              << cell(r.value("zenith_peak_mb", json()), 0) << std::setw(10)
              << cell(r.value("torch_peak_mb", json()), 0) << std::setw(8) << cell(act, 0) << "\n";
  }
  std::cout
      << "peak RSS by part (MB): process start, weights, optimizer state, saved for backward, "
         "temporaries of the backward and update (live tensors at the peak), allocator cache, the "
         "rest\n";
  for (const auto& r : out["results"]) {
    if (!r.contains("zenith")) continue;
    const json& m = r["zenith"]["memory"];
    std::cout << std::left << std::setw(6) << r["config"].get<std::string>() << std::setw(16)
              << r["case"].get<std::string>() << std::right;
    for (const char* part :
         {"rss_start_mb", "weights_mb", "optimizer_state_mb", "saved_for_backward_mb",
          "temporaries_mb", "allocator_cached_at_peak_mb", "non_tensor_mb", "peak_rss_mb"})
      std::cout << std::setw(9) << fixed(m[part], 0);
    std::cout << "\n";
  }
  for (const auto& [config, c] : out["checks"].items()) {
    if (c.contains("lora_ratio"))
      std::cout << config << ": LoRA " << fixed(c["lora_ratio"], 2) << "x PyTorch, "
                << fixed(c["lora_pct_of_peak"], 1)
                << "% of peak (target >= 1.5x, or >= 1x and >= 80%): "
                << (c["lora_speed_met"].get<bool>() ? "met" : "MISSED") << "\n";
    if (c.contains("bf16_o1_speedup"))
      std::cout << config << ": LoRA step at amp O1 (bf16 base, "
                << (c["bf16_arithmetic"].get<bool>() ? "bfloat16" : "float32") << " arithmetic) "
                << fixed(c["bf16_o1_speedup"], 2) << "x the float32 step (CPU time "
                << fixed(c["bf16_o1_cpu_speedup"], 2) << "x; target >= 1.5x on AVX512_BF16): "
                << (c["bf16_o1_speed_met"].get<bool>() ? "met" : "MISSED") << "\n";
    if (c.contains("lora_bf16_rss_share_of_full"))
      std::cout << config << ": LoRA bf16 peak RSS "
                << fixed(100 * c["lora_bf16_rss_share_of_full"].get<double>(), 1)
                << "% of full fine-tuning's (target <= 60%): "
                << (c["lora_rss_met"].get<bool>() ? "met" : "MISSED") << "\n";
    if (c.contains("checkpointing"))
      for (const auto& [kase, k] : c["checkpointing"].items())
        std::cout << config << " " << kase << ": activation checkpointing saves "
                  << fixed(100 * k["activation_saved"].get<double>(), 1)
                  << "% of activation memory for " << fixed(100 * k["time_cost"].get<double>(), 1)
                  << "% more step time (CPU time "
                  << fixed(100 * k["cpu_time_cost"].get<double>(), 1)
                  << "%; target >= 50% for <= 35%): " << (k["met"].get<bool>() ? "met" : "MISSED")
                  << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, repeats = 1, steps = 0, warmup = -1;
  bool as_json = false, with_pytorch = true, whole_logits = false;
  std::string python = "/usr/bin/python3", configs, cases, child, ckpt_policy = "selective";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--repeats")
      repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--configs")
      configs = next();
    else if (a == "--cases")
      cases = next();
    else if (a == "--steps")
      steps = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--json")
      as_json = true;
    else if (a == "--whole-logits")
      whole_logits = true;
    else if (a == "--no-pytorch")
      with_pytorch = false;
    else if (a == "--python")
      python = next();
    else if (a == "--ckpt-policy")
      ckpt_policy = next();
    else if (a == "--child")
      child = next();
    else
      return usage();
  }
  if (threads <= 0) threads = bench::default_threads();
  auto steps_of = [&](const std::string& config) {
    return steps > 0 ? steps : config == "15m" ? 5 : 3;
  };
  const int w = warmup >= 0 ? warmup : 1;

  if (!child.empty()) {  // --child CONFIG:CASE
    const auto colon = child.find(':');
    const std::string config = child.substr(0, colon), kase = child.substr(colon + 1);
    if (colon == std::string::npos || !listed("15m,110m", config) ||
        std::find(kCases.begin(), kCases.end(), kase) == kCases.end())
      return usage();
    json out = run_case(config, kase, steps_of(config), w, whole_logits, ckpt_policy);
    out.update({{"vmhwm_kb", vmhwm_kb()}, {"threads", omp_get_max_threads()}});
    std::cout << out.dump() << std::endl;
    return 0;
  }

  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string script = bench_script(self, "llm_torch.py");
  const std::string env = "OMP_NUM_THREADS=" + std::to_string(threads) +
                          " ZENITH_NUM_THREADS=" + std::to_string(threads) + " ";
  json out = {{"isa", cpu_isa()},
              {"onednn_isa", onednn_isa()},
              {"threads", threads},
              {"sgemm_peak_gflops", sgemm_peak_gflops(threads)},
              {"loss", whole_logits ? "whole logits" : "chunked"},
              {"batch", kBatch},
              {"seq", kSeq},
              {"lora", {{"r", kRank}, {"alpha", kAlpha}, {"targets", "q_proj,v_proj"}}},
              {"selective_checkpointing",
               ckpt_policy == "selective" ? models::kSelectiveCheckpointing : ckpt_policy},
              {"results", json::array()},
              {"checks", json::object()}};
  const double peak = out["sgemm_peak_gflops"];
  auto pct = [&](const json& r) {
    return 100.0 * r["tokens_s"].get<double>() * r["flops_per_token"].get<double>() / 1e9 / peak;
  };
  for (const auto& config : kConfigs) {
    if (!listed(configs, config)) continue;
    const std::string common = " --steps " + std::to_string(steps_of(config)) + " --warmup " +
                               std::to_string(w) + (whole_logits ? " --whole-logits" : "");
    const std::string policy = " --ckpt-policy " + quote(ckpt_policy);
    for (const auto& kase : kCases) {
      if (!listed(cases, kase)) continue;
      const bool torch_too = with_pytorch && kase == "lora";
      // Alternate the two sides `repeats` times and keep each one's fastest run: on shared
      // cores, other processes slow runs down, never speed them up.
      json z, t;
      auto faster = [](const json& best, const json& run) {
        return best.is_null() || (!run.is_null() && run["tokens_s"] > best["tokens_s"]);
      };
      for (int rep = 0; rep < repeats; ++rep) {
        json zr =
            run_child(env + quote(self) + " --child " + config + ":" + kase + common + policy);
        if (faster(z, zr)) z = zr;
        if (!torch_too) continue;
        json tr = run_child(env + quote(python) + " " + quote(script) + " --config " + config +
                            " --mode train --json --batch " + std::to_string(kBatch) + " --seq " +
                            std::to_string(kSeq) + " --lora-targets q_proj,v_proj --lora-r " +
                            std::to_string(kRank) + " --lora-alpha " + fixed(kAlpha, 0) +
                            " --threads " + std::to_string(threads) + common);
        if (faster(t, tr)) t = tr;
      }
      json row = {{"config", config}, {"case", kase}};
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
      if (!as_json) std::cerr << "done: " << config << " " << kase << "\n";
    }
    out["checks"][config] = checks(out, config);
  }
  if (as_json)
    std::cout << out.dump() << std::endl;
  else
    print_table(out);
  return 0;
}
