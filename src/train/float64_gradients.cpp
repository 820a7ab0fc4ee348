#include "train/float64_gradients.h"

#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::finetune {

Float64Gradients::Float64Gradients(const std::vector<Tensor>& params) {
  for (const Tensor& p : params)
    if (p.dim() == 2 && p.dtype() == DType::f32) params_[&p.impl()] = p;
}

namespace {

// sum [out, in] += dy^T x summed over the rows t of dy [M, out] and x [M, in] (float32) in
// float64, in row order: ~M * out * in multiply-adds, cheap for LoRA's r-sided matrices.
void add_rows_f64(const Tensor& dy, const Tensor& x, double* sum) {
  const Tensor d = dy.contiguous(), xs = x.contiguous();
  const int64_t rows = d.size(0), outs = d.size(1), ins = xs.size(1);
  const float* pd = d.data<float>();
  const float* px = xs.data<float>();
  for (int64_t t = 0; t < rows; ++t) {
    const float* xr = px + t * ins;
    for (int64_t o = 0; o < outs; ++o) {
      const double g = pd[t * outs + o];
      if (g == 0) continue;  // masked and padded positions
      double* s = sum + o * ins;
      for (int64_t i = 0; i < ins; ++i) s[i] += g * double(xr[i]);
    }
  }
}

}  // namespace

bool Float64Gradients::take(const Tensor& weight, const Tensor& dy, const Tensor& x) {
  const void* key = &weight.impl();
  if (!params_.count(key) || dy.dtype() != DType::f32 || x.dtype() != DType::f32) return false;
  Tensor& sum = sums_[key];
  if (!sum.defined()) sum = Tensor::zeros(weight.shape(), DType::f64);
  add_rows_f64(dy, x, sum.data<double>());
  return true;
}

void Float64Gradients::finish() {
  NoGradGuard no_grad;
  for (auto& [key, sum] : sums_) {
    Tensor p = params_.at(key);
    const Tensor old = p.grad();
    p.set_grad(old.defined() ? ops::add(sum, old.to(DType::f64)) : sum);
  }
  sums_.clear();
}

}  // namespace zenith::finetune
