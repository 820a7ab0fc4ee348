// Decode speed on quantized weights (GGML's q8_0, q4_0, q4_K blocks; src/backend/cpu/quant_*.cpp)
// against float32: batch-1 greedy decoding with a KV cache after a 16-token prompt, on LLaMA
// models with random weights of the 15M and 110M shapes (bench/llm_common.h), at 1 and 2
// threads. Each row gives tokens/s, the weight bytes a decode step reads (every linear layer's
// blocks or float32 weight, lm_head included; one embedding row) and the share of the
// memory-bandwidth limit its best run reaches (bytes per token x tokens/s / read bandwidth
// measured here).
// Prints the host's ISA, the quantized kernels' ISA, the sgemm peak and the load average.
//
//   llm_quant [--threads 1,2] [--only 15m,110m] [--dtypes f32,q8_0,q4_0,q4_k] [--gen-tokens G]
//             [--runs R] [--vocab V] [--json]
// Beside llama.cpp on the same GGUF files (bench/llm_quant_llamacpp.mjs times llama.cpp's decode
// through node-llama-cpp):
//   llm_quant --only 110m --vocab 2048 --write-model DIR   random weights + fortunes' tokenizer
//   zenith export --format gguf --model DIR --dtype q8_0 --out q8_0.gguf
//   llm_quant --model q8_0.gguf,...                         zenith's decode on each file
#include <omp.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "backend/cpu/quant_kernels.h"
#include "bench_common.h"
#include "bench_machine.h"
#include "llm_common.h"
#include "models/llama_pages.h"
#include "models/llama_quant.h"
#include "zenith/zenith.h"

namespace {

using nlohmann::json;
using namespace zenith;
using namespace zenith::bench;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

// Bytes a decode step reads: every linear layer's weight (blocks or float32) and one embedding
// row.
int64_t decode_bytes(const models::Llama& model) {
  int64_t bytes = model.config().hidden_size * int64_t(itemsize(model.weight_dtype()));
  for (const auto& [path, layer] : model.linear_layers())
    bytes += layer->quantized_weight() ? int64_t(layer->quantized_weight()->blocks.nbytes())
                                       : int64_t(layer->weight().nbytes());
  return bytes;
}

// --ggml-layout: the weights stay GGML's blocks (the kernels keep an interleaved copy beside
// them), for an A/B against pack_for_inference's layout.
bool pack_weights = true;

// `shape` a bench shape (random weights, `vocab` tokens) or, with `file`, a model file.
json decode(const std::string& shape, int64_t vocab, const std::string& dtype,
            const std::string& file, int threads, int64_t gen_tokens, int runs) {
  constexpr int64_t kPromptLen = 16;
  context::set_num_threads(threads);
  manual_seed(0);
  std::shared_ptr<models::Llama> loaded;
  if (file.empty()) {
    models::LlamaConfig config = llm_shape(shape);
    config.vocab_size = vocab;
    loaded = std::make_shared<models::Llama>(config);
    if (dtype != "f32") loaded->quantize(quant_from_name(dtype));
    models::place_weights_in_huge_pages(*loaded);  // where from_pretrained puts a file's
  } else {
    loaded = models::Llama::from_pretrained(file);
  }
  models::Llama& model = *loaded;
  model.eval();
  if (pack_weights) models::pack_for_inference(model);  // as generate and serve hold them
  NoGradGuard no_grad;
  Tensor prompt = Tensor::randint(0, model.config().vocab_size, {1, kPromptLen});
  std::vector<double> times;
  for (int r = 0; r < runs + 1; ++r) {  // the first run warms up
    models::KVCache cache(model.config(), 1, kPromptLen + gen_tokens + 1);
    models::LlamaInput in;
    in.cache = &cache;
    in.input_ids = prompt;
    in.last_position_only = true;
    Tensor token = ops::argmax(model.forward(in), -1);
    auto t0 = Clock::now();
    for (int64_t i = 0; i < gen_tokens; ++i) {
      in.input_ids = token;
      token = ops::argmax(model.forward(in), -1);
    }
    if (r > 0) times.push_back(seconds_since(t0));
  }
  // The median, and the best run: on a host shared with other work the best is the closer
  // estimate of what the kernels reach.
  const double best = *std::min_element(times.begin(), times.end());
  return {{"shape", file.empty() ? shape : file},
          {"dtype", dtype},
          {"threads", threads},
          {"tokens_s", double(gen_tokens) / median_of(times)},
          {"best_tokens_s", double(gen_tokens) / best},
          {"bytes_per_token", decode_bytes(model)}};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> shapes = {"15m", "110m"}, dtypes = {"f32", "q8_0", "q4_0", "q4_k"};
  std::vector<int> thread_counts = {1, 2};
  int64_t gen_tokens = 64;
  int runs = 5;
  bool as_json = false;
  int64_t vocab = 32000;
  std::string write_model;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads") {
      thread_counts.clear();
      for (const auto& t : split(next())) thread_counts.push_back(std::stoi(t));
    } else if (a == "--only") {
      shapes = split(next());
    } else if (a == "--dtypes") {
      dtypes = split(next());
    } else if (a == "--gen-tokens") {
      gen_tokens = std::atoll(next().c_str());
    } else if (a == "--runs") {
      runs = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--vocab") {
      vocab = std::atoll(next().c_str());
    } else if (a == "--write-model") {
      write_model = next();
    } else if (a == "--model") {
      files = split(next());
    } else if (a == "--json") {
      as_json = true;
    } else if (a == "--ggml-layout") {
      pack_weights = false;
    } else {
      std::cerr << "usage: llm_quant [--threads 1,2] [--only 15m,110m] [--dtypes "
                   "f32,q8_0,q4_0,q4_k] [--gen-tokens G] [--runs R] [--vocab V] [--json]\n"
                   "       [--ggml-layout]\n"
                   "       llm_quant --only SHAPE --vocab 2048 --write-model DIR\n"
                   "       llm_quant --model FILE,FILE [--threads 1,2] [--json]\n";
      return 2;
    }
  }
  if (!write_model.empty()) {
    models::LlamaConfig config = llm_shape(shapes.at(0));
    config.vocab_size = vocab;
    manual_seed(0);
    models::Llama(config).save_pretrained(write_model);
    const std::string fortunes = bench_script(argv[0], "../examples/llm/fortunes-llama");
    models::copy_model_side_files(fortunes, write_model);
    std::cout << "wrote " << write_model << " (" << shapes[0] << " shape, vocab " << vocab
              << ", tokenizer of " << fortunes << ")\n";
    return 0;
  }
  const int max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
  json out = machine_json(max_threads, sgemm_peak_gflops(max_threads));
  out["quant_isa"] = cpu::quant_isa_name(cpu::quant_isa());
  out["load_average"] = load_average();
  std::map<int, double> bandwidth;
  for (int t : thread_counts) {
    bandwidth[t] = read_bandwidth_gbs(t);
    out["read_bandwidth_gbs"][std::to_string(t)] = bandwidth[t];
  }
  std::vector<std::pair<std::string, std::string>> cases;  // (shape or file, dtype)
  if (files.empty()) {
    for (const auto& shape : shapes)
      for (const auto& dtype : dtypes) cases.emplace_back(shape, dtype);
  } else {
    for (const auto& f : files) cases.emplace_back(f, "file");
  }
  for (const auto& [what, dtype] : cases)
    for (int t : thread_counts) {
      const bool file = dtype == "file";
      json r = decode(file ? "" : what, vocab, dtype, file ? what : "", t, gen_tokens, runs);
      r["bandwidth_pct"] = 100.0 * r["bytes_per_token"].get<double>() *
                           r["best_tokens_s"].get<double>() / (bandwidth[t] * 1e9);
      out["results"].push_back(r);
    }
  if (as_json) {
    std::cout << out.dump(2) << std::endl;
    return 0;
  }
  std::cout << "ISA " << out["isa"].get<std::string>() << ", quantized kernels "
            << out["quant_isa"].get<std::string>() << ", sgemm peak "
            << fixed(out["sgemm_peak_gflops"], 1) << " GFLOP/s, load average "
            << fixed(out["load_average"], 2) << "\n";
  std::cout << std::left << std::setw(7) << "shape" << std::setw(7) << "dtype" << std::right
            << std::setw(8) << "threads" << std::setw(10) << "tok/s" << std::setw(10) << "best"
            << std::setw(12) << "MB/token" << std::setw(12) << "% of bw"
            << "\n";
  for (const auto& r : out["results"])
    std::cout << std::left << std::setw(7) << r["shape"].get<std::string>() << std::setw(7)
              << r["dtype"].get<std::string>() << std::right << std::setw(8)
              << r["threads"].get<int>() << std::setw(10) << fixed(r["tokens_s"], 1)
              << std::setw(10) << fixed(r["best_tokens_s"], 1) << std::setw(12)
              << fixed(r["bytes_per_token"].get<double>() / 1e6, 1) << std::setw(12)
              << fixed(r["bandwidth_pct"], 1) << "\n";
  return 0;
}
