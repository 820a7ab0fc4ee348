// Dropout: a keep-mask from the global generator, applied with inverted scaling; its gradient
// is a multiply by the saved mask.
#include "ops/op_utils.h"

namespace zenith::ops {

Tensor dropout(const Tensor& x, double p, bool training) {
  detail::check_float(x, "dropout");
  ZENITH_CHECK(p >= 0 && p <= 1, "[dropout] p must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  auto outs = dispatch::call<OpId::dropout>({x}, {.p = p});
  if (autograd::needs_grad({x})) {
    Tensor mask = outs[1];
    autograd::record("dropout", {x}, {outs[0]}, [mask](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(g[0], mask)};
    });
  }
  return outs[0];
}

}  // namespace zenith::ops
