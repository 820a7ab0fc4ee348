#include "support/op_check.h"

#include <cmath>
#include <sstream>

namespace zenith::testing {

Tensor random_input(const Shape& shape, DType dtype, bool noncontiguous, double low, double high) {
  if (!noncontiguous) return Tensor::uniform(shape, low, high, dtype);
  // A view over a buffer twice as large in the last dim, then transposed twice: strides != dense.
  Shape big = shape;
  if (big.empty()) return Tensor::uniform(shape, low, high, dtype);
  big.back() *= 2;
  Tensor base = Tensor::uniform(big, low, high, dtype);
  return base.slice(int64_t(big.size()) - 1, 0, big.back(), 2);
}

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure()
           << "shapes differ: " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  auto va = a.to_double_vector(), vb = b.to_double_vector();
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    double err = std::abs(va[i] - vb[i]) - (atol + rtol * std::abs(vb[i]));
    if (std::isnan(va[i]) != std::isnan(vb[i])) err = INFINITY;
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  if (worst > 0)
    return ::testing::AssertionFailure()
           << "element " << worst_i << ": " << va[worst_i] << " vs " << vb[worst_i] << " (rtol "
           << rtol << ", atol " << atol << ", " << va.size() << " elements)";
  return ::testing::AssertionSuccess();
}

namespace {
// (g(x + eps e_i) - g(x - eps e_i)) / 2 eps for every element i of x (float64), g evaluated on a
// contiguous copy of x perturbed in place: the op sees the same values.
Tensor central_differences(const Tensor& x, double eps,
                           const std::function<double(const Tensor&)>& g) {
  Tensor base = x.detach().contiguous().clone();
  double* p = base.data<double>();
  std::vector<double> numeric(size_t(base.numel()));
  for (int64_t i = 0; i < base.numel(); ++i) {
    const double orig = p[i];
    p[i] = orig + eps;
    const double plus = g(base);
    p[i] = orig - eps;
    const double minus = g(base);
    p[i] = orig;
    numeric[size_t(i)] = (plus - minus) / (2 * eps);
  }
  return Tensor::from_vector(numeric, x.shape());
}

}  // namespace

Tensor output_weights(const OpFn& f, const std::vector<Tensor>& inputs) {
  NoGradGuard g;
  return Tensor::uniform(f(inputs).shape(), 0.5, 1.5, DType::f64);
}

std::vector<Tensor> cast_inputs(const std::vector<Tensor>& inputs, DType dtype) {
  std::vector<Tensor> out;
  for (auto& t : inputs) {
    if (!t.defined() || !is_floating(t.dtype())) {
      out.push_back(t);
      continue;
    }
    Tensor c = t.detach().to(dtype);
    if (dtype == t.dtype()) c = t.detach().clone();
    if (t.requires_grad()) c.requires_grad_();
    out.push_back(c);
  }
  return out;
}

// Gradients of sum(f(x) * w) for the inputs that require grad.
std::vector<Tensor> autograd_grads(const OpFn& f, const std::vector<Tensor>& inputs,
                                   const Tensor& w) {
  Tensor y = f(inputs);
  Tensor loss = ops::sum(ops::mul(y, w.to(y.dtype())));
  loss.backward();
  std::vector<Tensor> g;
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad())
      g.push_back(t.grad().defined() ? t.grad() : Tensor::zeros(t.shape(), t.dtype()));
  return g;
}

::testing::AssertionResult forward_matches_f64(const OpFn& f, const std::vector<Tensor>& inputs,
                                               double rtol, double atol) {
  NoGradGuard g;
  Tensor ref = f(cast_inputs(inputs, DType::f64));
  Tensor got = f(cast_inputs(inputs, DType::f32));
  if (got.dtype() != DType::f32 && is_floating(ref.dtype()))
    return ::testing::AssertionFailure() << "float32 inputs gave " << dtype_name(got.dtype());
  return all_close(got, ref, rtol, atol);
}

::testing::AssertionResult gradcheck(const OpFn& f, const std::vector<Tensor>& inputs_in,
                                     double eps, double rtol, double atol) {
  std::vector<Tensor> inputs = cast_inputs(inputs_in, DType::f64);
  Tensor w = output_weights(f, inputs);
  std::vector<Tensor> analytic = autograd_grads(f, inputs, w);
  size_t gi = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].defined() || !inputs[k].requires_grad()) continue;
    Tensor x = inputs[k];
    Tensor num = central_differences(x, eps, [&](const Tensor& perturbed) {
      std::vector<Tensor> in2 = inputs;
      in2[k] = perturbed;
      NoGradGuard g;
      return ops::sum(ops::mul(f(in2), w)).item();
    });
    auto r = all_close(analytic[gi], num, rtol, atol);
    if (!r)
      return ::testing::AssertionFailure() << "gradient of input " << k << ": " << r.message();
    ++gi;
  }
  return ::testing::AssertionSuccess();
}

namespace {
// sum_i sum(v_i * d/dx_i sum(f(x) * w)) over the inputs that require grad, recorded (so it can
// be differentiated) when create_graph.
Tensor first_gradient_dot(const OpFn& f, const std::vector<Tensor>& inputs, const Tensor& w,
                          const std::vector<Tensor>& v, bool create_graph) {
  std::vector<Tensor> diff;
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) diff.push_back(t);
  Tensor y = f(inputs);
  auto g = autograd::grad({ops::sum(ops::mul(y, w))}, diff, {}, create_graph);
  Tensor total = Tensor::zeros({}, DType::f64);
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].defined()) total = ops::add(total, ops::sum(ops::mul(g[i], v[i])));
  return total;
}
}  // namespace

::testing::AssertionResult gradgradcheck(const OpFn& f, const std::vector<Tensor>& inputs_in,
                                         double eps, double rtol, double atol) {
  std::vector<Tensor> inputs = cast_inputs(inputs_in, DType::f64);
  Tensor w = output_weights(f, inputs).requires_grad_();
  std::vector<Tensor> v;
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) v.push_back(Tensor::uniform(t.shape(), -1, 1, t.dtype()));
  // What is differentiated: the inputs that require grad, then w.
  std::vector<Tensor> wrt;
  std::vector<size_t> wrt_index;  // into inputs; inputs.size() for w
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].defined() && inputs[k].requires_grad()) {
      wrt.push_back(inputs[k]);
      wrt_index.push_back(k);
    }
  wrt.push_back(w);
  wrt_index.push_back(inputs.size());
  Tensor dot = first_gradient_dot(f, inputs, w, v, /*create_graph=*/true);
  if (!dot.requires_grad())
    return ::testing::AssertionFailure() << "the first gradient has no history";
  std::vector<Tensor> analytic = autograd::grad({dot}, wrt, {}, false);
  for (size_t j = 0; j < wrt.size(); ++j) {
    const size_t k = wrt_index[j];
    Tensor num = central_differences(wrt[j], eps, [&](const Tensor& perturbed) {
      Tensor leaf = perturbed.clone().requires_grad_();
      std::vector<Tensor> in2 = inputs;
      Tensor w2 = w.detach();
      if (k < inputs.size())
        in2[k] = leaf;
      else
        w2 = leaf.detach();
      return first_gradient_dot(f, in2, w2, v, false).item();
    });
    Tensor got = analytic[j].defined() ? analytic[j] : Tensor::zeros(wrt[j].shape(), DType::f64);
    auto r = all_close(got, num, rtol, atol);
    if (!r)
      return ::testing::AssertionFailure()
             << "second derivative with respect to "
             << (k < inputs.size() ? "input " + std::to_string(k) : std::string("the weights"))
             << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult backward_matches_f64(const OpFn& f, const std::vector<Tensor>& inputs,
                                                double rtol, double atol) {
  std::vector<Tensor> i64 = cast_inputs(inputs, DType::f64);
  std::vector<Tensor> i32 = cast_inputs(inputs, DType::f32);
  Tensor w = output_weights(f, i64);
  auto g64 = autograd_grads(f, i64, w);
  auto g32 = autograd_grads(f, i32, w);
  for (size_t i = 0; i < g64.size(); ++i) {
    auto r = all_close(g32[i], g64[i], rtol, atol);
    if (!r) return ::testing::AssertionFailure() << "gradient " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult throws_with(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
  } catch (const Error& e) {
    if (std::string(e.what()).find(needle) != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message '" << e.what() << "' lacks '" << needle << "'";
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-zenith exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

bool kept_for_backward(Tensor& t) {
  std::weak_ptr<Storage> storage = t.storage();
  t = Tensor();
  return !storage.expired();
}

}  // namespace zenith::testing
