// Elementwise unary ops and their gradients.
#include "core/dispatch.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::ops {

Tensor neg(const Tensor& x) {
  Tensor out = dispatch::call1("neg", {x});
  if (autograd::needs_grad({x}))
    autograd::record("neg", {x}, {out}, [](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{neg(g[0])};
    });
  return out;
}

}  // namespace zenith::ops
