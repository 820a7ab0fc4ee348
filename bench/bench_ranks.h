// What the multi-rank LLaMA benches (bench/model_parallel, bench/zero) share: their command line,
// the small LLaMA they train, the host's load average, and the launcher that forks the ranks of
// one configuration on this host (127.0.0.1, a file store) and collects each rank's JSON.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_machine.h"
#include "zenith/zenith.h"

namespace zenith::bench {

struct RankArgs {
  int ranks = 2;
  int64_t hidden = 256, layers = 4, vocab = 2048, batch = 4, seq = 64;
  int steps = 3;
  bool json = false;  // print the JSON (perf_report.py's input) instead of the tables
};

// Parses --hidden --layers --vocab --batch --seq --steps --json (and --ranks when `with_ranks`);
// an unknown option exits with status 2 naming it.
inline RankArgs parse_rank_args(int argc, char** argv, bool with_ranks) {
  RankArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--json") {
      a.json = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", k.c_str());
      std::exit(2);
    }
    const std::string v = argv[++i];
    if (k == "--ranks" && with_ranks)
      a.ranks = std::stoi(v);
    else if (k == "--hidden")
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
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

inline nlohmann::json rank_args_json(const RankArgs& a) {
  return {{"ranks", a.ranks}, {"hidden", a.hidden}, {"layers", a.layers}, {"vocab", a.vocab},
          {"batch", a.batch}, {"seq", a.seq},       {"steps", a.steps}};
}

// A LLaMA of `hidden` with 4 heads (no GQA), SwiGLU's 8/3 width, untied embeddings.
inline models::LlamaConfig small_llama(const RankArgs& a) {
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

// The 1-minute load average: the other work that shared the cores during a run.
inline double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

// Forks `world` processes; each (world > 1 and `join`: after communication::init over a file
// store in `dir`, named by `tag`, waiting up to `timeout` for its peers; else the body joins
// itself) runs body(rank) and writes its JSON. Returns the ranks' JSON in rank order; a rank
// that fails (its error on stderr) makes this throw. Call it before the parent starts OpenMP
// threads, so each child's pool is its own.
inline std::vector<nlohmann::json> fork_ranks(
    int world, const std::filesystem::path& dir, const std::string& tag,
    const std::function<nlohmann::json(int)>& body, bool join = true,
    std::chrono::seconds timeout = std::chrono::seconds(300)) {
  namespace comm = communication;
  auto out_of = [&](int r) { return dir / (tag + ".rank" + std::to_string(r) + ".json"); };
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        if (world > 1 && join) {
          comm::Options o;
          o.rank = r;
          o.size = world;
          o.store = "file://" + (dir / (tag + ".store")).string();
          o.prefix = tag;
          o.address = "127.0.0.1";
          o.timeout = timeout;
          comm::init(o);
        }
        const nlohmann::json j = body(r);
        std::ofstream(out_of(r)) << j.dump();
        if (world > 1 && join) comm::release();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s rank %d: %s\n", tag.c_str(), r, e.what());
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
  if (!ok) throw std::runtime_error(tag + ": a rank failed");
  std::vector<nlohmann::json> out;
  for (int r = 0; r < world; ++r) out.push_back(nlohmann::json::parse(std::ifstream(out_of(r))));
  return out;
}

// The bench's result: the machine fields (the sgemm peak at `threads`, measured now, after the
// ranks: the parent starts no OpenMP threads before it forks), the configuration, the load
// averages and `tables`. With --json printed as JSON, else as a footer line under the tables.
inline void print_result(const RankArgs& a, int threads, double load_start, nlohmann::json tables) {
  const double peak = sgemm_peak_gflops(threads);
  nlohmann::json out = machine_json(threads, peak);
  out["config"] = rank_args_json(a);
  out["load_average_start"] = load_start;
  out["load_average_end"] = load_average();
  out.update(tables);
  if (a.json)
    std::cout << out.dump(1) << std::endl;
  else
    std::printf(
        "\nHost ISA: %s; sgemm peak %.1f GFLOP/s at %d thread(s); load average %.2f -> "
        "%.2f\n",
        isa_line().c_str(), peak, threads, load_start, out["load_average_end"].get<double>());
}

}  // namespace zenith::bench
