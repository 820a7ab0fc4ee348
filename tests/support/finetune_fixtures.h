// What the fine-tuning tests share (tests/train/finetune_test.cpp, finetune_amp_test.cpp): data a
// LoRA learns in a few steps, LoRA settings on the reference model llama_gqa, and the adapter
// tensors a run wrote.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "support/llama_fixtures.h"
#include "zenith/finetune.h"
#include "zenith/llama.h"

namespace zenith::testing {

using finetune::Data;
using finetune::Example;

// Sequences of varied lengths whose second half follows from the first (id + 1 mod 100 + 3), the
// first two tokens not learned: something a LoRA can pick up in a few steps.
inline Data pattern_data(int64_t count, uint64_t seed) {
  Data d;
  uint64_t s = seed;
  for (int64_t i = 0; i < count; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const int64_t len = 6 + int64_t((s >> 33) % 7);
    Example e;
    int64_t id = 3 + int64_t((s >> 20) % 100);
    for (int64_t t = 0; t < len; ++t) {
      e.ids.push_back(id);
      e.labels.push_back(t < 2 ? -100 : id);
      id = 3 + (id - 3 + 1) % 100;
    }
    d.examples.push_back(std::move(e));
  }
  d.lines = count;
  return d;
}

inline finetune::Options lora_options(const std::string& out) {
  finetune::Options o;
  o.model = llama_fixture("llama_gqa");
  o.data = "pattern";
  o.out = out;
  o.lora.lora_dropout = 0;
  o.lr = 1e-2;
  o.warmup_steps = 0;
  return o;
}

inline std::map<std::string, Tensor> adapter_tensors(const std::string& dir) {
  std::map<std::string, Tensor> out;
  for (auto& [path, w] : io::load_lora_adapter(dir).modules) {
    out[path + ".A"] = w.A;
    out[path + ".B"] = w.B;
  }
  return out;
}

}  // namespace zenith::testing
