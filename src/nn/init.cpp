// Initialisers with PyTorch's formulas (torch.nn.init), drawing from the global generator.
// Each writes in place under no_grad so a parameter stays the same leaf.
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
  assign(w, Tensor::uniform(w.shape(), low, high, w.dtype()));
}

void normal_(Tensor& w, double mean, double std) {
  Tensor z = Tensor::randn(w.shape(), DType::f64);
  NoGradGuard no_grad;
  w.copy_(ops::add(ops::mul(z, std), mean));
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
