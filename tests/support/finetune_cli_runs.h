// What the `zenith finetune` CLI tests of parallel runs share (tests/cli/finetune_hybrid_test.cpp,
// finetune_zero_hybrid_test.cpp, finetune_model_parallel_test.cpp, finetune_nproc_test.cpp):
// pre-tokenized JSONL data a LoRA learns in a few steps, a run's metrics.jsonl read back, and a
// run compared with another.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/checkpoint_compare.h"

namespace zenith::testing {

// `count` pre-tokenized sequences whose later tokens follow from the first (id + 1), the first two
// not learned; `ragged`: of lengths 6 to 14 (the ranks' micro-batches pad differently), else all
// 12 long (ParallelLlama's loss is the mean of its micro-batches' means: one process's when each
// holds as many learned labels).
inline void write_sequence_data(const std::filesystem::path& path, int count, uint64_t seed,
                                bool ragged) {
  std::ofstream out(path);
  uint64_t s = seed;
  for (int i = 0; i < count; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const int len = ragged ? 6 + int((s >> 33) % 9) : 12;
    nlohmann::json ids = nlohmann::json::array(), labels = nlohmann::json::array();
    for (int t = 0, id = 3 + int((s >> 20) % 500); t < len; ++t, ++id) {
      ids.push_back(id);
      labels.push_back(t < 2 ? -100 : id);
    }
    out << nlohmann::json{{"input_ids", ids}, {"labels", labels}}.dump() << "\n";
  }
}

// name -> step -> value, of a run's OUT/metrics.jsonl.
inline std::map<std::string, std::map<int64_t, double>> read_metrics(
    const std::filesystem::path& file) {
  std::map<std::string, std::map<int64_t, double>> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    out[j["name"]][j["step"].get<int64_t>()] = j["value"].get<double>();
  }
  return out;
}

// The run in root/`got` against the one in root/`want`: `steps` losses, each loss and gradient
// norm (with `eval`, each eval loss too, of which `want` has some) within 1e-5 relative, and its
// `file` within `tolerance` over `tensors` tensors (same_parameters).
inline void expect_run_as(const std::filesystem::path& root, const std::string& want,
                          const std::string& got, size_t steps, bool eval, const std::string& file,
                          double tolerance, int tensors) {
  auto a = read_metrics(root / want / "metrics.jsonl");
  auto b = read_metrics(root / got / "metrics.jsonl");
  ASSERT_EQ(b["loss"].size(), steps) << got;
  if (eval) ASSERT_FALSE(a["eval/loss"].empty()) << want;
  for (const char* name : {"loss", "grad_norm", "eval/loss"}) {
    if (!eval && std::string(name) == "eval/loss") continue;
    for (const auto& [step, value] : a[name])
      EXPECT_NEAR(b[name][step], value, 1e-5 * std::abs(value))
          << got << " " << name << " step " << step;
  }
  EXPECT_TRUE(same_parameters((root / want / file).string(), (root / got / file).string(),
                              tolerance, tensors))
      << got;
}

}  // namespace zenith::testing
