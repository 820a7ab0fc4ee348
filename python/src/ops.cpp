// The C++ ops as _zenith.ops, under their C++ names and arguments; each releases the GIL while
// it runs. zenith/ops.py gives them MindSpore's names and argument conventions.
#include "bindings.h"

namespace zenith::python {
namespace {

Tensor or_undefined(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

template <Tensor (*Op)(const Tensor&)>
void unary(py::module_& m, const char* name) {
  m.def(name, Op, ReleaseGIL(), py::arg("x"));
}

template <Tensor (*Op)(const Tensor&, const Tensor&)>
void binary(py::module_& m, const char* name) {
  m.def(name, Op, ReleaseGIL(), py::arg("a"), py::arg("b"));
}

}  // namespace

void bind_ops(py::module_& root) {
  py::module_ m = root.def_submodule("ops", "The C++ ops (zenith.ops wraps them).");

  binary<ops::add>(m, "add");
  binary<ops::sub>(m, "sub");
  binary<ops::mul>(m, "mul");
  binary<ops::div>(m, "div");
  binary<ops::pow>(m, "pow");
  binary<ops::maximum>(m, "maximum");
  binary<ops::minimum>(m, "minimum");
  binary<ops::eq>(m, "eq");
  binary<ops::ne>(m, "ne");
  binary<ops::lt>(m, "lt");
  binary<ops::le>(m, "le");
  binary<ops::gt>(m, "gt");
  binary<ops::ge>(m, "ge");
  binary<ops::matmul>(m, "matmul");
  m.def(
      "pow_scalar", [](const Tensor& x, double e) { return ops::pow(x, e); }, ReleaseGIL());

  unary<ops::neg>(m, "neg");
  unary<ops::exp>(m, "exp");
  unary<ops::log>(m, "log");
  unary<ops::sqrt>(m, "sqrt");
  unary<ops::rsqrt>(m, "rsqrt");
  unary<ops::abs>(m, "abs");
  unary<ops::tanh>(m, "tanh");
  unary<ops::sigmoid>(m, "sigmoid");
  unary<ops::relu>(m, "relu");
  unary<ops::silu>(m, "silu");
  unary<ops::square>(m, "square");
  unary<ops::erf>(m, "erf");
  m.def("gelu", &ops::gelu, ReleaseGIL(), py::arg("x"), py::arg("tanh_approx") = false);
  m.def("cast", &ops::cast, ReleaseGIL());

  m.def("where", &ops::where, ReleaseGIL());
  m.def("masked_fill", &ops::masked_fill, ReleaseGIL());

  m.def("sum", &ops::sum, ReleaseGIL(), py::arg("x"), py::arg("dims"), py::arg("keepdim"));
  m.def("mean", &ops::mean, ReleaseGIL(), py::arg("x"), py::arg("dims"), py::arg("keepdim"));
  m.def(
      "max", [](const Tensor& x, int64_t dim, bool keep) { return ops::max(x, dim, keep); },
      ReleaseGIL());
  m.def(
      "min", [](const Tensor& x, int64_t dim, bool keep) { return ops::min(x, dim, keep); },
      ReleaseGIL());
  m.def(
      "max_all", [](const Tensor& x) { return ops::max(x); }, ReleaseGIL());
  m.def(
      "min_all", [](const Tensor& x) { return ops::min(x); }, ReleaseGIL());
  m.def("argmax", &ops::argmax, ReleaseGIL());
  m.def("var", &ops::var, ReleaseGIL());

  m.def(
      "linear",
      [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
        return ops::linear(x, w, or_undefined(b));
      },
      ReleaseGIL());
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
         std::vector<int64_t> stride, std::vector<int64_t> padding, const std::string& mode,
         std::vector<int64_t> dilation, int64_t groups) {
        return ops::conv2d(x, w, or_undefined(b),
                           {.stride = std::move(stride),
                            .padding = std::move(padding),
                            .padding_mode = mode,
                            .dilation = std::move(dilation),
                            .groups = groups});
      },
      ReleaseGIL());
  m.def("max_pool2d", &ops::max_pool2d, ReleaseGIL());
  m.def("avg_pool2d", &ops::avg_pool2d, ReleaseGIL());
  m.def("adaptive_avg_pool2d", &ops::adaptive_avg_pool2d, ReleaseGIL());
  m.def(
      "batch_norm",
      [](const Tensor& x, const std::optional<Tensor>& w, const std::optional<Tensor>& b,
         const std::optional<Tensor>& mean, const std::optional<Tensor>& var, bool training,
         double momentum, double eps) {
        return ops::batch_norm(x, or_undefined(w), or_undefined(b), or_undefined(mean),
                               or_undefined(var), training, momentum, eps);
      },
      ReleaseGIL());
  m.def(
      "layer_norm",
      [](const Tensor& x, const Shape& shape, const std::optional<Tensor>& w,
         const std::optional<Tensor>& b,
         double eps) { return ops::layer_norm(x, shape, or_undefined(w), or_undefined(b), eps); },
      ReleaseGIL());
  m.def(
      "rms_norm",
      [](const Tensor& x, const Shape& shape, const std::optional<Tensor>& w, double eps) {
        return ops::rms_norm(x, shape, or_undefined(w), eps);
      },
      ReleaseGIL());
  m.def("dropout", &ops::dropout, ReleaseGIL());
  m.def("softmax", &ops::softmax, ReleaseGIL());
  m.def("log_softmax", &ops::log_softmax, ReleaseGIL());
  m.def("cross_entropy", &ops::cross_entropy, ReleaseGIL());
  m.def("mse_loss", &ops::mse_loss, ReleaseGIL());
  m.def("embedding", &ops::embedding, ReleaseGIL());
  m.def("cat", &ops::cat, ReleaseGIL());
  m.def("stack", &ops::stack, ReleaseGIL());
  m.def("index_select", &ops::index_select, ReleaseGIL());
  m.def("gather", &ops::gather, ReleaseGIL());
}

}  // namespace zenith::python
