// TEMPORARY: composed stand-ins for the transformer ops the llm-kernels branch adds to
// zenith::ops (same names and semantics); removed when that branch is merged.
#pragma once

#include <cmath>
#include <string>
#include <utility>

#include "zenith/ops.h"

namespace zenith::models::pending {

struct AttentionOptions {
  bool causal = false;
  Tensor key_padding_mask;
  Tensor attn_mask;
};

struct RopeOptions {
  double theta = 10000.0;
  std::string scaling = "default";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

inline Tensor f32(const Tensor& t) {
  return t.dtype() == DType::f32 ? t : ops::cast(t, DType::f32);
}

inline Tensor rope_inv_freq(int64_t d, const RopeOptions& o) {
  std::vector<double> inv(size_t(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) {
    double f = 1.0 / std::pow(o.theta, double(2 * i) / double(d));
    if (o.scaling == "linear") f /= o.factor;
    if (o.scaling == "llama3") {
      const double old_len = double(o.original_max_position_embeddings);
      const double wavelen = 2 * M_PI / f;
      double scaled = wavelen > old_len / o.low_freq_factor ? f / o.factor : f;
      const double smooth =
          (old_len / wavelen - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
      if (wavelen >= old_len / o.high_freq_factor && wavelen <= old_len / o.low_freq_factor)
        scaled = (1 - smooth) * scaled / o.factor + smooth * scaled;
      f = scaled;
    }
    inv[size_t(i)] = f;
  }
  return Tensor::from_vector(inv, {d / 2});
}

inline std::pair<Tensor, Tensor> rope_cos_sin(const Tensor& inv_freq, const Tensor& positions,
                                              DType dtype) {
  const std::vector<double> inv = inv_freq.to_double_vector();
  const std::vector<int64_t> pos = positions.to_int_vector();
  const auto half = int64_t(inv.size()), d = 2 * half;
  std::vector<double> c(pos.size() * size_t(d)), s(c.size());
  for (size_t p = 0; p < pos.size(); ++p)
    for (int64_t i = 0; i < d; ++i) {
      const double a = double(pos[p]) * inv[size_t(i % half)];
      c[p * size_t(d) + size_t(i)] = std::cos(a);
      s[p * size_t(d) + size_t(i)] = std::sin(a);
    }
  Shape shape = positions.shape();
  shape.push_back(d);
  return {Tensor::from_vector(c, shape, dtype), Tensor::from_vector(s, shape, dtype)};
}

inline Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  Tensor rotated = ops::cat({ops::neg(x.slice(-1, half, 2 * half)), x.slice(-1, 0, half)}, -1);
  return ops::add(ops::mul(x, cos.unsqueeze(1)), ops::mul(rotated, sin.unsqueeze(1)));
}

inline Tensor swiglu(const Tensor& gate, const Tensor& up) { return ops::mul(ops::silu(gate), up); }

inline Tensor scaled_dot_product_attention(const Tensor& q, Tensor k, Tensor v,
                                           const AttentionOptions& o) {
  const int64_t b = q.size(0), hq = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), s = k.size(2), rep = hq / hkv;
  k = k.unsqueeze(2).expand({b, hkv, rep, s, d}).reshape({b, hq, s, d});
  v = v.unsqueeze(2).expand({b, hkv, rep, s, d}).reshape({b, hq, s, d});
  Tensor scores = ops::mul(ops::matmul(q, k.transpose(-1, -2)), 1.0 / std::sqrt(double(d)));
  std::vector<float> bias(size_t(b * t * s), 0.0f);
  std::vector<int64_t> keep;
  if (o.key_padding_mask.defined()) keep = o.key_padding_mask.to_int_vector();
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < s; ++j)
        if ((o.causal && j > i + (s - t)) || (!keep.empty() && keep[size_t(n * s + j)] == 0))
          bias[size_t((n * t + i) * s + j)] = -3.0e38f;
  scores = ops::add(scores, Tensor::from_vector(bias, {b, 1, t, s}));
  return ops::matmul(ops::softmax(scores, -1), v);
}

}  // namespace zenith::models::pending
