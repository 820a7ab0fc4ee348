// Fused optimizer updates as ops: one pass over a parameter updates it and its slots in place.
// Inputs are plain contiguous tensors of one float dtype; no gradient is recorded.
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

void check_slot(const Tensor& t, const Tensor& param, const char* op, const char* name) {
  ZENITH_CHECK(
      t.defined() && t.shape() == param.shape() && t.dtype() == param.dtype() && t.is_contiguous(),
      "[", op, "] ", name, " must be a contiguous ", dtype_name(param.dtype()), " ",
      shape_str(param.shape()), " tensor like the parameter");
}

void check_param(const Tensor& param, const Tensor& grad, const char* op) {
  ZENITH_CHECK(param.defined() && param.is_contiguous() && is_floating(param.dtype()), "[", op,
               "] the parameter must be a contiguous floating tensor");
  check_slot(grad, param, op, "grad");
}

}  // namespace

void momentum_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, double lr,
                     double momentum, double weight_decay, bool nesterov) {
  check_param(param, grad, "momentum_update");
  if (velocity.defined()) check_slot(velocity, param, "momentum_update", "velocity");
  dispatch::call<OpId::momentum_update>(
      {param, grad, velocity},
      {.lr = lr, .momentum = momentum, .weight_decay = weight_decay, .nesterov = nesterov});
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                 double lr, double beta1, double beta2, double eps, double weight_decay,
                 bool decoupled, int64_t step) {
  check_param(param, grad, "adam_update");
  check_slot(m, param, "adam_update", "moment1");
  check_slot(v, param, "adam_update", "moment2");
  ZENITH_CHECK(step >= 1, "[adam_update] step counts from 1, got ", step);
  dispatch::call<OpId::adam_update>({param, grad, m, v}, {.lr = lr,
                                                          .beta1 = beta1,
                                                          .beta2 = beta2,
                                                          .eps = eps,
                                                          .weight_decay = weight_decay,
                                                          .decoupled = decoupled,
                                                          .step = step});
}

}  // namespace zenith::ops
