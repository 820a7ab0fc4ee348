// What bench/llm and bench/finetune share: the LLaMA shapes they time (stories15M's and
// stories110M's), the FLOP and byte counts bench/llm_torch.py reports for the same model, where
// that script is, and the table's number cells.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "zenith/zenith.h"

namespace zenith::bench {

// 15m = stories15M (dim 288, 6 layers, 6 heads, hidden 768, vocab 32000, untied head),
// 110m = stories110M (dim 768, 12 layers, 12 heads, hidden 2048).
inline models::LlamaConfig llm_shape(const std::string& name) {
  models::LlamaConfig c;
  c.vocab_size = 32000;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.tie_word_embeddings = false;
  const bool small = name == "15m";
  c.hidden_size = small ? 288 : 768;
  c.num_hidden_layers = small ? 6 : 12;
  c.num_attention_heads = c.num_key_value_heads = small ? 6 : 12;
  c.intermediate_size = small ? 768 : 2048;
  c.max_position_embeddings = small ? 256 : 1024;
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

// The counts bench/llm_torch.py reports, for the same model. FLOPs per token (2 per
// multiply-add, N = non-embedding params, attention = 12 x layers x seq x heads x head_dim for
// QK^T and PV forward and backward, no causal discount):
//   full training  6 N + attention        (forward 2N, activation grads 2N, weight grads 2N)
//   LoRA           4 N + 6 A + attention  (A = adapter params: only they get weight grads)
// A decode step reads every weight but the embedding's (one row) once, in its storage dtype.
inline nlohmann::json llm_counts(const models::Llama& model, int64_t seq,
                                 int64_t adapter_params = -1) {
  const auto& c = model.config();
  const int64_t params = model.num_parameters();
  const int64_t embedding = c.vocab_size * c.hidden_size;
  const int64_t adapters = adapter_params > 0 ? adapter_params : 0;
  const int64_t non_embedding = params - embedding - adapters;
  const int64_t attention = 12 * c.num_hidden_layers * seq * c.num_attention_heads * c.head_dim;
  const int64_t flops = adapter_params >= 0 ? 4 * non_embedding + 6 * adapters : 6 * non_embedding;
  return {{"params", params},
          {"non_embedding_params", non_embedding},
          {"flops_per_token", flops + attention},
          {"weight_bytes_per_token", int64_t(itemsize(model.weight_dtype())) * non_embedding}};
}

// bench/<name>: beside this source file, or in the source tree above the build directory
// (build/<preset>/bench/llm -> bench/<name>).
inline std::string bench_script(const std::string& self, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path beside = fs::absolute(fs::path(__FILE__).parent_path() / name);
  if (fs::exists(beside)) return beside.string();
  const fs::path tree = fs::path(self).parent_path() / ".." / ".." / ".." / "bench" / name;
  return fs::exists(tree) ? fs::canonical(tree).string() : beside.string();
}

inline std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

// A cell of a table: "-" where a side did not run.
inline std::string cell(const nlohmann::json& v, int digits) {
  return v.is_number() ? fixed(v.get<double>(), digits) : "-";
}

}  // namespace zenith::bench
