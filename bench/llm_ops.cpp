// The transformer ops of issue 14 at the shapes of the two benchmark LLaMA configs, zenith
// against PyTorch 1.13 eager (bench/llm_ops_torch.py, same cases, same thread count) and
// against zenith's own composed attention (ops that materialise the scores):
//
//   llm_ops [--threads N] [--reps R] [--cases substring] [--json] [--no-pytorch]
//           [--python /usr/bin/python3]
//
// Prints the host's ISA, the sgemm peak measured in the run, and per case the best time of R
// runs (other processes on shared cores only ever slow a run down), GFLOP/s or GB/s, % of the
// sgemm peak, and zenith / PyTorch speed. Also what oneDNN does with a bfloat16 / float16
// matmul on this CPU (run with DNNL_MAX_CPU_ISA=AVX2 to see an AVX2-only host).
//   15m: dim 288, 6 heads (head dim 48), hidden 768, vocab 32000, batch 8 x seq 256
//   110m: dim 768, 12 heads (head dim 64), hidden 2048, vocab 32000, batch 8 x seq 256
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "core/dispatch.h"
#include "ops/op_utils.h"
#include "zenith/zenith.h"

namespace {

using nlohmann::json;
using zenith::bench::Clock;
using zenith::bench::run_child;
using namespace zenith;

struct Shape15 {
  const char* name;
  int64_t dim, heads, hidden;
};
const Shape15 kConfigs[] = {{"15m", 288, 6, 768}, {"110m", 768, 12, 2048}};
constexpr int64_t kBatch = 8, kSeq = 256, kVocab = 32000, kTokens = kBatch * kSeq;

// ---- the machine
std::string cpu_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) return line + " ";
  return "";
}

std::string isa_summary() {
  std::string flags = cpu_flags(), out;
  for (const char* f :
       {"avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos) out += std::string(f) + " ";
  return out.empty() ? "(none)" : out.substr(0, out.size() - 1);
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---- what oneDNN 2.6 makes of a 16-bit matmul here: the implementation it picks and its speed.
json onednn_lowp_probe() {
  using namespace dnnl;
  json out = json::object();
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const memory::dim m = 256, k = 768, n = 2048;
  for (auto [name, dt] :
       {std::pair{"bf16", memory::data_type::bf16}, std::pair{"f16", memory::data_type::f16}}) {
    memory::desc a({m, k}, dt, memory::format_tag::ab), b({k, n}, dt, memory::format_tag::ab);
    memory::desc c({m, n}, memory::data_type::f32, memory::format_tag::ab);
    try {
      matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
      std::string impl = pd.impl_info_str();
      memory ma(a, eng), mb(b, eng), mc(c, eng);
      std::memset(ma.get_data_handle(), 0, a.get_size());
      std::memset(mb.get_data_handle(), 0, b.get_size());
      matmul prim(pd);
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        auto t0 = Clock::now();
        prim.execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
        strm.wait();
        best = std::min(best, bench::seconds_since(t0));
      }
      out[name] = {{"impl", impl}, {"gflops", 2.0 * m * n * k / best / 1e9}};
    } catch (const dnnl::error& e) {
      out[name] = {{"impl", std::string("none: ") + e.what()}};
    }
  }
  return out;
}

// ---- cases
struct Case {
  std::string name;
  double flops = 0;  // per run; 0: report bytes instead
  double bytes = 0;
  std::function<void()> run;
};

// Forward and backward of f (gradients of every input that requires grad), no accumulation.
std::function<void()> fwd_bwd(std::function<Tensor()> f, std::vector<Tensor> inputs) {
  return [f, inputs] {
    Tensor y = f();
    autograd::grad({y}, inputs, {Tensor::ones(y.shape(), y.dtype())});
  };
}

Tensor rnd(const Shape& s, DType t = DType::f32) { return Tensor::randn(s).to(t); }
Tensor leaf(const Shape& s) { return Tensor::randn(s).requires_grad_(); }

void add_cases(std::vector<Case>& cases) {
  for (const Shape15& c : kConfigs) {
    const std::string p = c.name;
    const int64_t d = c.dim / c.heads;
    // Attention, causal, q/k/v as [B, T, H, D] projections viewed as [B, H, T, D]. FLOPs as
    // bench/llm_torch.py counts them (no causal discount): 4 B H T S D forward, twice more back.
    auto qkv = [=] {
      std::vector<Tensor> v;
      for (int i = 0; i < 3; ++i)
        v.push_back(Tensor::randn({kBatch, kSeq, c.heads, d}).transpose(1, 2).requires_grad_());
      return v;
    };
    const double attn = 4.0 * kBatch * c.heads * kSeq * kSeq * d;
    auto in = qkv();
    cases.push_back({p + " attention fwd+bwd", 3 * attn, 0,
                     fwd_bwd(
                         [in] {
                           return ops::scaled_dot_product_attention(in[0], in[1], in[2],
                                                                    {.causal = true});
                         },
                         in)});
    cases.push_back({p + " attention fwd", attn, 0, [in] {
                       NoGradGuard g;
                       ops::scaled_dot_product_attention(in[0], in[1], in[2], {.causal = true});
                     }});
    cases.push_back({p + " attention composed fwd+bwd", 3 * attn, 0,
                     fwd_bwd(
                         [in] {
                           AttentionAttrs a{.causal = true,
                                            .scale = 1.0 / std::sqrt(double(in[0].size(3)))};
                           return ops::detail::attention_composed(
                               {in[0], in[1], in[2], Tensor(), Tensor()}, a)[0];
                         },
                         in)});
    // A decode step over a 255-token cache: K and V bytes read per layer.
    Tensor q1 = rnd({1, c.heads, 1, d}), kc = rnd({1, c.heads, kSeq, d}),
           vc = rnd({1, c.heads, kSeq, d});
    cases.push_back({p + " attention decode T=1 S=256", 0, 2.0 * c.heads * kSeq * d * 4, [=] {
                       NoGradGuard g;
                       ops::scaled_dot_product_attention(q1, kc, vc, {.causal = true});
                     }});
    // The step's GEMMs (M = batch x seq tokens): forward with float32 and bfloat16 weights, and
    // the input gradient dy W with a bfloat16 weight (a frozen LoRA base).
    struct Gemm {
      const char* name;
      int64_t in, out;
    };
    for (Gemm g : {Gemm{"qkvo", c.dim, c.dim}, Gemm{"gate/up", c.dim, c.hidden},
                   Gemm{"down", c.hidden, c.dim}, Gemm{"lm_head", c.dim, kVocab}}) {
      const double f = 2.0 * kTokens * g.in * g.out;
      Tensor x = rnd({kTokens, g.in}), w = rnd({g.out, g.in}) * 0.02, dy = rnd({kTokens, g.out});
      Tensor wb = w.to(DType::bf16);
      std::string n = p + " linear " + g.name + " " + std::to_string(kTokens) + "x" +
                      std::to_string(g.in) + "x" + std::to_string(g.out);
      cases.push_back({n + " f32", f, 0, [=] {
                         NoGradGuard ng;
                         ops::linear(x, w);
                       }});
      cases.push_back({n + " bf16 weight", f, 0, [=] {
                         NoGradGuard ng;
                         ops::linear(x, wb);
                       }});
      cases.push_back({n + " dx with bf16 weight", f, 0, [=] {
                         NoGradGuard ng;
                         ops::matmul(dy, wb);
                       }});
      Tensor x1 = rnd({1, g.in});
      cases.push_back({p + " decode linear " + g.name + " f32", 0, 4.0 * g.in * g.out, [=] {
                         NoGradGuard ng;
                         ops::linear(x1, w);
                       }});
      cases.push_back({p + " decode linear " + g.name + " bf16 weight", 0, 2.0 * g.in * g.out, [=] {
                         NoGradGuard ng;
                         ops::linear(x1, wb);
                       }});
    }
    // The elementwise and row ops (bytes: inputs read and outputs written, forward + backward).
    Tensor xn = leaf({kTokens, c.dim}), wn = leaf({c.dim});
    cases.push_back({p + " rms_norm fwd+bwd", 0, 4.0 * kTokens * c.dim * 5,
                     fwd_bwd([=] { return ops::rms_norm(xn, {c.dim}, wn, 1e-5); }, {xn, wn})});
    Tensor xr = Tensor::randn({kBatch, kSeq, c.heads, d}).transpose(1, 2).requires_grad_();
    auto [cos, sin] = ops::rope_cos_sin(ops::rope_inv_freq(d),
                                        Tensor::arange(kSeq).reshape({1, kSeq}), DType::f32);
    cases.push_back({p + " rotary fwd+bwd", 0, 4.0 * kTokens * c.dim * 4,
                     fwd_bwd([=] { return ops::rotary_embedding(xr, cos, sin); }, {xr})});
    Tensor gate = leaf({kTokens, c.hidden}), up = leaf({kTokens, c.hidden});
    cases.push_back({p + " swiglu fwd+bwd", 0, 4.0 * kTokens * c.hidden * 7,
                     fwd_bwd([=] { return ops::swiglu(gate, up); }, {gate, up})});
    cases.push_back({p + " silu*up composed fwd+bwd", 0, 4.0 * kTokens * c.hidden * 7,
                     fwd_bwd([=] { return ops::mul(ops::silu(gate), up); }, {gate, up})});
  }
  Tensor logits = leaf({kTokens, kVocab});
  Tensor target = Tensor::randint(0, kVocab, {kTokens});
  cases.push_back({"cross_entropy fwd+bwd 2048x32000", 0, 4.0 * kTokens * kVocab * 3,
                   fwd_bwd([=] { return ops::cross_entropy(logits, target); }, {logits})});
}

double best_seconds(const std::function<void()>& f, int reps) {
  f();  // warm up
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, bench::seconds_since(t0));
  }
  return best;
}

int usage() {
  std::cerr << "usage: llm_ops [--threads N] [--reps R] [--cases substring] [--json] "
               "[--no-pytorch] [--python PATH]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 5;
  bool as_json = false, with_pytorch = true;
  std::string python = "/usr/bin/python3", only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--reps")
      reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--cases")
      only = next();
    else if (a == "--json")
      as_json = true;
    else if (a == "--no-pytorch")
      with_pytorch = false;
    else if (a == "--python")
      python = next();
    else
      return usage();
  }
  if (threads <= 0) threads = bench::default_threads();
  context::set_num_threads(threads);
  manual_seed(0);

  json torch = nullptr;
  if (with_pytorch) {
    // The script sits in the source tree above the build directory (build/<preset>/bench/);
    // __FILE__ is relative to the build directory, not to where the bench runs.
    namespace fs = std::filesystem;
    const fs::path exe = fs::read_symlink("/proc/self/exe");
    fs::path script = exe.parent_path() / ".." / ".." / ".." / "bench" / "llm_ops_torch.py";
    if (!fs::exists(script))
      script = fs::absolute(fs::path(__FILE__).parent_path()) / "llm_ops_torch.py";
    torch = run_child("OMP_NUM_THREADS=" + std::to_string(threads) + " '" + python + "' '" +
                      script.string() + "' --threads " + std::to_string(threads) + " --reps " +
                      std::to_string(reps) + (only.empty() ? "" : " --cases '" + only + "'"));
  }
  json report = {{"isa", isa_summary()},
                 {"threads", threads},
                 {"load_average_before", load_average()},
                 {"sgemm_peak_gflops", bench::sgemm_peak_gflops(threads)},
                 {"read_bandwidth_gbs", bench::read_bandwidth_gbs(threads)},
                 {"onednn_lowp_matmul", onednn_lowp_probe()}};
  const double peak = report["sgemm_peak_gflops"].get<double>();
  std::vector<Case> cases;
  add_cases(cases);
  json rows = json::array();
  for (auto& c : cases) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    double s = best_seconds(c.run, reps);
    json row = {{"case", c.name}, {"ms", s * 1e3}};
    if (c.flops > 0) {
      row["gflops"] = c.flops / s / 1e9;
      row["pct_of_peak"] = 100.0 * c.flops / s / 1e9 / peak;
    } else {
      row["gbs"] = c.bytes / s / 1e9;
    }
    if (!torch.is_null() && torch["cases"].contains(c.name))
      row["torch_ms"] = torch["cases"][c.name].get<double>();
    rows.push_back(row);
  }
  report["cases"] = rows;
  report["load_average_after"] = load_average();
  if (!torch.is_null()) report["torch_version"] = torch["version"];
  if (as_json) {
    std::cout << report.dump() << std::endl;
    return 0;
  }
  std::cout << "ISA: " << report["isa"].get<std::string>() << "; " << threads
            << " threads; load average " << report["load_average_before"].get<std::string>()
            << " -> " << report["load_average_after"].get<std::string>() << "\n"
            << std::fixed << std::setprecision(1) << "sgemm peak " << peak
            << " GFLOP/s; read bandwidth " << report["read_bandwidth_gbs"].get<double>()
            << " GB/s\n";
  for (auto& [dt, r] : report["onednn_lowp_matmul"].items())
    std::cout << "oneDNN " << dt << " x " << dt
              << " -> f32 matmul: " << r["impl"].get<std::string>()
              << (r.contains("gflops")
                      ? ", " + std::to_string(int(r["gflops"].get<double>())) + " GFLOP/s"
                      : std::string())
              << "\n";
  std::cout << "\n"
            << std::left << std::setw(58) << "case" << std::right << std::setw(10) << "ms"
            << std::setw(12) << "GFLOP/s" << std::setw(8) << "%peak" << std::setw(9) << "GB/s"
            << std::setw(10) << "torch ms" << std::setw(8) << "x torch"
            << "\n";
  for (auto& r : rows) {
    std::cout << std::left << std::setw(58) << r["case"].get<std::string>() << std::right
              << std::setw(10) << std::setprecision(3) << r["ms"].get<double>();
    if (r.contains("gflops"))
      std::cout << std::setw(12) << std::setprecision(1) << r["gflops"].get<double>()
                << std::setw(8) << r["pct_of_peak"].get<double>() << std::setw(9) << "";
    else
      std::cout << std::setw(20) << "" << std::setw(9) << std::setprecision(1)
                << r["gbs"].get<double>();
    if (r.contains("torch_ms"))
      std::cout << std::setw(10) << std::setprecision(3) << r["torch_ms"].get<double>()
                << std::setw(8) << std::setprecision(2)
                << r["torch_ms"].get<double>() / r["ms"].get<double>();
    std::cout << "\n";
  }
  return 0;
}
