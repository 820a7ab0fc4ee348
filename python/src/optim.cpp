// Optimizers and learning-rate schedules as _zenith.optim. An optimizer is callable with
// gradients in Python (MindSpore's optimizer(grads)); that is apply() here.
#include "bindings.h"

namespace zenith::python {
namespace {

// Gradients given in parameter order are applied as one step, then dropped.
void apply_gradients(nn::Optimizer& opt, const std::vector<std::optional<Tensor>>& grads) {
  const auto& params = opt.params();
  if (grads.size() != params.size())
    throw py::value_error("[" + opt.type_name() + "] got " + std::to_string(grads.size()) +
                          " gradients for " + std::to_string(params.size()) + " parameters");
  py::gil_scoped_release release;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    p.set_grad(grads[i] ? grads[i]->detach() : Tensor());
  }
  try {
    opt.step();
  } catch (...) {
    opt.zero_grad();
    throw;
  }
  opt.zero_grad();
}

// A schedule computed by Python (a LearningRateSchedule cell or any callable of the step).
nn::LRSchedule python_schedule(py::object fn) {
  auto ref = std::make_shared<PyRef>(std::move(fn));
  return {[ref](int64_t step) {
            py::gil_scoped_acquire gil;
            return ref->get()(step).cast<double>();
          },
          "python"};
}

}  // namespace

void bind_optim(py::module_& root) {
  py::module_ m = root.def_submodule("optim", "Optimizers and learning-rate schedules.");

  py::class_<nn::LRSchedule>(m, "LRSchedule")
      .def("__call__", &nn::LRSchedule::operator(), py::arg("step"))
      .def_readonly("description", &nn::LRSchedule::description);
  m.def("constant_lr", &nn::constant_lr);
  m.def("warmup_cosine_lr", &nn::warmup_cosine_lr);
  m.def("warmup_stable_decay_lr", &nn::warmup_stable_decay_lr);
  m.def("step_lr", &nn::step_lr);
  m.def("piecewise_constant_lr", &nn::piecewise_constant_lr);
  // values[step] per step; the last value afterwards (MindSpore's list learning rates).
  m.def("list_lr", [](std::vector<double> values) {
    if (values.empty()) throw py::value_error("[learning_rate] the list is empty");
    return nn::LRSchedule{
        [values](int64_t step) {
          return values[size_t(std::min<int64_t>(step, int64_t(values.size()) - 1))];
        },
        "list of " + std::to_string(values.size())};
  });
  m.def("python_lr", &python_schedule);

  py::class_<nn::Optimizer, std::shared_ptr<nn::Optimizer>>(m, "Optimizer")
      .def("step", &nn::Optimizer::step, ReleaseGIL())
      .def("zero_grad", &nn::Optimizer::zero_grad)
      .def("apply", &apply_gradients, py::arg("grads"))
      .def_property_readonly("current_lr", &nn::Optimizer::current_lr)
      .def_property_readonly("step_count", &nn::Optimizer::step_count)
      .def_property_readonly("params", &nn::Optimizer::params)
      .def("set_lr", &nn::Optimizer::set_lr)
      .def("state_dict", &nn::Optimizer::state_dict)
      .def("load_state_dict", &nn::Optimizer::load_state_dict, ReleaseGIL())
      .def_property_readonly("type_name", &nn::Optimizer::type_name);

  m.def("Momentum", py::overload_cast<std::vector<Tensor>, nn::LRSchedule, double, double, bool>(
                        &nn::Momentum));
  m.def("SGD", [](std::vector<Tensor> params, nn::LRSchedule lr, double momentum, double wd,
                  bool nesterov) {
    auto opt = nn::SGD(std::move(params), 0.0, momentum, wd, nesterov);
    opt->set_lr(std::move(lr));
    return opt;
  });
  m.def("Adam",
        py::overload_cast<std::vector<Tensor>, nn::LRSchedule, double, double, double, double>(
            &nn::Adam));
  m.def("AdamW",
        py::overload_cast<std::vector<Tensor>, nn::LRSchedule, double, double, double, double>(
            &nn::AdamW));
  m.def("clip_grad_norm", &nn::clip_grad_norm, ReleaseGIL());
}

}  // namespace zenith::python
