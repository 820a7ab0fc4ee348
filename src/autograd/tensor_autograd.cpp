// Tensor's autograd members that run the engine (the Tensor handle itself is core).
#include "zenith/autograd.h"

namespace zenith {

namespace autograd {
void retain_grad_of(const Tensor& t);  // engine.cpp
}

void Tensor::retain_grad() {
  if (impl().retains_grad || is_leaf()) return;
  impl().retains_grad = true;
  autograd::retain_grad_of(*this);
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  ZENITH_CHECK(requires_grad(),
               "[backward] tensor does not require grad and has no grad_fn: "
               "nothing to differentiate (did every input have requires_grad=false, or was it "
               "computed under no_grad?)");
  Tensor g = gradient;
  if (!g.defined()) {
    ZENITH_CHECK(numel() == 1,
                 "[backward] gradient can be implied only for a scalar output, got "
                 "shape ",
                 shape_str(shape()));
    g = Tensor::ones(shape(), dtype(), device());
  }
  ZENITH_CHECK(g.shape() == shape(), "[backward] gradient shape ", shape_str(g.shape()),
               " does not match tensor shape ", shape_str(shape()));
  autograd::backward({*this}, {g}, retain_graph, create_graph);
}

}  // namespace zenith
