// The tape as _zenith.autograd: gradients returned (zenith.value_and_grad and zenith.grad are
// written with grad()), grad mode, and backward for tests and PyTorch-style code.
#include "bindings.h"

namespace zenith::python {

void bind_autograd(py::module_& root) {
  py::module_ m = root.def_submodule("autograd", "The autograd tape.");
  m.def(
      "grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
         const std::vector<Tensor>& grad_outputs, bool create_graph) {
        std::vector<Tensor> grads = autograd::grad(outputs, inputs, grad_outputs, create_graph);
        std::vector<std::optional<Tensor>> out;
        for (auto& g : grads) out.push_back(g.defined() ? std::optional(g) : std::nullopt);
        return out;
      },
      ReleaseGIL(), py::arg("outputs"), py::arg("inputs"),
      py::arg("grad_outputs") = std::vector<Tensor>{}, py::arg("create_graph") = false,
      "Gradients of outputs with respect to inputs (None where they do not depend on one).");
  m.def(
      "backward",
      [](const Tensor& t, const std::optional<Tensor>& gradient) {
        t.backward(gradient ? *gradient : Tensor());
      },
      ReleaseGIL(), py::arg("tensor"), py::arg("gradient") = py::none());
  m.def(
      "get_grad",
      [](const Tensor& t) {
        Tensor g = t.grad();
        return g.defined() ? std::optional(g) : std::nullopt;
      },
      py::arg("tensor"));
  m.def(
      "set_grad", [](Tensor& t, const std::optional<Tensor>& g) { t.set_grad(g ? *g : Tensor()); },
      py::arg("tensor"), py::arg("grad"));
  m.def("is_grad_enabled", &autograd::grad_enabled);
  m.def("set_grad_enabled", &autograd::set_grad_enabled, py::arg("enabled"));
}

}  // namespace zenith::python
