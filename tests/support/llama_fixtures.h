// The LLaMA-family fixtures of scripts/make_fixtures.py (tests/fixtures/llama/<case>/): model
// and adapter directories with a reference.safetensors, and the comparison they recommend,
// max|x - ref| <= 1e-4 * max|ref| per tensor (logits only where attention_mask is 1).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "zenith/io.h"
#include "zenith/tensor.h"

namespace zenith::testing {

inline constexpr double kLlamaTolerance = 1e-4;

inline const std::vector<std::string>& llama_cases() {
  static const std::vector<std::string> cases = {
      "llama_gqa",  "llama3_tied",   "llama_rope_linear", "qwen2_bias",
      "llama_bf16", "llama_padding", "mistral_head_dim"};
  return cases;
}

inline std::string llama_fixture(const std::string& name) {
  return std::string(ZENITH_FIXTURE_DIR) + "/llama/" + name;
}

// reference.safetensors of a case, and its metadata.
inline std::map<std::string, Tensor> llama_reference(const std::string& name,
                                                     io::Metadata* meta = nullptr) {
  return io::load_safetensors(llama_fixture(name) + "/reference.safetensors", meta);
}

// How many gradients ("grad.<name>") a reference holds.
inline size_t reference_gradients(const std::map<std::string, Tensor>& ref) {
  size_t n = 0;
  for (const auto& [name, _] : ref) n += name.rfind("grad.", 0) == 0;
  return n;
}

// max|x - ref| / max|ref|, in float64. With `mask` [B, T] (x and ref [B, T, ...]), only rows
// where the mask is nonzero count.
inline double scaled_error(const Tensor& x, const Tensor& ref, const Tensor& mask = Tensor()) {
  const std::vector<double> a = x.to_double_vector(), b = ref.to_double_vector();
  if (a.size() != b.size()) return INFINITY;
  std::vector<int64_t> keep;
  if (mask.defined()) keep = mask.to_int_vector();
  const size_t row = keep.empty() ? a.size() : a.size() / keep.size();
  double diff = 0, top = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!keep.empty() && keep[i / row] == 0) continue;
    if (!std::isfinite(a[i])) return INFINITY;
    diff = std::max(diff, std::abs(a[i] - b[i]));
    top = std::max(top, std::abs(b[i]));
  }
  return top > 0 ? diff / top : diff;
}

}  // namespace zenith::testing
