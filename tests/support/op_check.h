// The op test harness: float32 forward against a float64 reference, float64 gradients against
// central finite differences, and random inputs that are deliberately non-contiguous.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "zenith/zenith.h"

namespace zenith::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// A random tensor; `noncontiguous` returns a strided view (every other element of a larger
// buffer) with the same values semantics.
Tensor random_input(const Shape& shape, DType dtype = DType::f64, bool noncontiguous = false,
                    double low = -1.0, double high = 1.0);

// |a - b| <= atol + rtol * |b| elementwise, with the first mismatch in the failure message.
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                                     double atol = 1e-6);

// Runs `f` on float32 copies of float64 `inputs` and compares with `f` on the float64 inputs.
::testing::AssertionResult forward_matches_f64(const OpFn& f, const std::vector<Tensor>& inputs,
                                               double rtol = 1e-4, double atol = 1e-5);

// Compares autograd gradients of sum(f(x) * w) (w random, fixed) with central differences, for
// every input that requires grad. Inputs must be float64.
::testing::AssertionResult gradcheck(const OpFn& f, const std::vector<Tensor>& inputs,
                                     double eps = 1e-6, double rtol = 1e-4, double atol = 1e-6);

// Second derivatives (PyTorch's gradgradcheck): with w and v random, the gradients of
// sum(v * grad(sum(f(x) * w), x, create_graph)) with respect to every input that requires grad
// and to w itself, against central differences of the first gradient. Inputs must be float64.
::testing::AssertionResult gradgradcheck(const OpFn& f, const std::vector<Tensor>& inputs,
                                         double eps = 1e-6, double rtol = 1e-4, double atol = 1e-6);

// Same autograd gradients computed in float32 and float64 agree (checks the float32 backward
// kernels, e.g. oneDNN's, against the float64 ones).
::testing::AssertionResult backward_matches_f64(const OpFn& f, const std::vector<Tensor>& inputs,
                                                double rtol = 1e-3, double atol = 1e-4);

// Copies of `inputs` with floating tensors converted to `dtype` (detached, then requiring grad
// where the original did); other tensors as they are.
std::vector<Tensor> cast_inputs(const std::vector<Tensor>& inputs, DType dtype);

// Random float64 weights in [0.5, 1.5) shaped like f's output (the w below).
Tensor output_weights(const OpFn& f, const std::vector<Tensor>& inputs);

// Autograd gradients of sum(f(inputs) * w), one per input that requires grad (zeros where the
// input got none).
std::vector<Tensor> autograd_grads(const OpFn& f, const std::vector<Tensor>& inputs,
                                   const Tensor& w);

// Whether the autograd graph keeps t's memory alive once the caller drops its handle (t is
// reset): what an op saved for its backward.
bool kept_for_backward(Tensor& t);

// Runs `fn` expecting a zenith::Error whose message contains `needle`.
::testing::AssertionResult throws_with(const std::function<void()>& fn, const std::string& needle);

}  // namespace zenith::testing
