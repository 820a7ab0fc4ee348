// The _zenith extension module: the C++ framework for the `zenith` package (python/zenith).
// A zenith::Error becomes zenith.Error, which is both a ValueError and a RuntimeError: the C++
// core reports bad arguments (shapes, dtypes, values) and run-time failures (files,
// communication) with one type, its message naming the op or component in brackets.
#include "bindings.h"

namespace zenith::python {
namespace {

PyObject* g_error = nullptr;  // zenith.Error, owned by the module

}  // namespace

void bind_graph(py::module_& m);  // graph mode and the profiler (graph.cpp)
void bind_onnx(py::module_& m);   // zenith.export / zenith.load (onnx.cpp)

}  // namespace zenith::python

namespace py = pybind11;

PYBIND11_MODULE(_zenith, m) {
  namespace zp = zenith::python;
  m.doc() = "The C++ core of zenith (use the `zenith` package).";

  py::tuple bases = py::make_tuple(py::reinterpret_borrow<py::object>(PyExc_ValueError),
                                   py::reinterpret_borrow<py::object>(PyExc_RuntimeError));
  zp::g_error = PyErr_NewExceptionWithDoc(
      "zenith.Error",
      "An error of zenith's C++ core; the message starts with the op or component in brackets.",
      bases.ptr(), nullptr);
  if (!zp::g_error) throw py::error_already_set();
  m.add_object("Error", py::reinterpret_borrow<py::object>(zp::g_error));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const zenith::Error& e) {
      PyErr_SetString(zp::g_error, e.what());
    }
  });

  zp::bind_tensor(m);
  zp::bind_ops(m);
  zp::bind_autograd(m);
  zp::bind_nn(m);
  zp::bind_optim(m);
  zp::bind_data(m);
  zp::bind_train(m);
  zp::bind_distributed(m);
  zp::bind_graph(m);
  zp::bind_onnx(m);
}
