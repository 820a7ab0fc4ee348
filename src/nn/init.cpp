// Initialisers with PyTorch's formulas (torch.nn.init), drawing from the global generator.
// Each writes in place under no_grad so a parameter stays the same leaf.
#include <algorithm>
#include <cmath>

#include "zenith/autograd.h"
#include "zenith/nn.h"

namespace zenith::nn::init {
namespace {

// Elements of one kernel window: prod(shape[2:]).
int64_t receptive_field(const Tensor& w) {
  int64_t r = 1;
  for (int64_t d = 2; d < w.dim(); ++d) r *= w.size(d);
  return r;
}

void check_fans(const Tensor& w, const char* op) {
  ZENITH_CHECK(w.dim() >= 2, "[", op, "] fan in/out needs a tensor with at least 2 dims, got ",
               shape_str(w.shape()));
}

void assign(Tensor& w, const Tensor& values) {
  NoGradGuard no_grad;
  w.copy_(values);
}

// w = values(n) drawn chunk by chunk (values(n) returns n of them, in w's element order): the
// float64 draws of a large weight (an LLM's vocab embedding: 200 MB each) never exist whole. The
// generator is consumed in the same order, so the values equal one whole draw.
template <typename Values>
void assign_in_chunks(Tensor& w, Values values) {
  constexpr int64_t kChunk = int64_t(1) << 20;
  const int64_t n = w.numel();
  if (!w.is_contiguous() || n <= kChunk) {
    assign(w, values(n).reshape(w.shape()));
    return;
  }
  NoGradGuard no_grad;
  Tensor flat = w.view({n});
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = std::min(n, begin + kChunk);
    flat.slice(0, begin, end).copy_(values(end - begin));
  }
}

}  // namespace

int64_t fan_in(const Tensor& w) {
  check_fans(w, "fan_in");
  return w.size(1) * receptive_field(w);
}

int64_t fan_out(const Tensor& w) {
  check_fans(w, "fan_out");
  return w.size(0) * receptive_field(w);
}

void uniform_(Tensor& w, double low, double high) {
  assign_in_chunks(w, [&](int64_t n) { return Tensor::uniform({n}, low, high, w.dtype()); });
}

void normal_(Tensor& w, double mean, double std) {
  assign_in_chunks(w, [&](int64_t n) {
    NoGradGuard no_grad;
    return ops::add(ops::mul(Tensor::randn({n}, DType::f64), std), mean);
  });
}

void constant_(Tensor& w, double value) {
  NoGradGuard no_grad;
  w.fill_(value);
}

// gain = sqrt(2 / (1 + a^2)); bound = gain * sqrt(3 / fan_in).
// With a = sqrt(5) (nn.Linear/Conv2d default) the bound is 1 / sqrt(fan_in).
void kaiming_uniform_(Tensor& w, double a) {
  double gain = std::sqrt(2.0 / (1.0 + a * a));
  double bound = gain * std::sqrt(3.0 / double(fan_in(w)));
  uniform_(w, -bound, bound);
}

// std = sqrt(2 / fan_out): torchvision's ResNet conv init (mode="fan_out", relu).
void kaiming_normal_(Tensor& w) { normal_(w, 0.0, std::sqrt(2.0 / double(fan_out(w)))); }

void xavier_uniform_(Tensor& w) {
  double bound = std::sqrt(6.0 / double(fan_in(w) + fan_out(w)));
  uniform_(w, -bound, bound);
}

}  // namespace zenith::nn::init
