// The _zenith extension module's shared pieces: conversions between Python values and tensors,
// the GIL rules, and one bind_* function per file (module.cpp calls them in layer order).
//
// The GIL: every binding that computes releases it (ReleaseGIL), so other Python threads run
// meanwhile; C++ that calls back into Python (a Python Cell's construct, a GeneratorDataset
// source, a Python callback or transform) takes it again with py::gil_scoped_acquire.
#pragma once

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "zenith/zenith.h"

namespace zenith::python {

namespace py = pybind11;

using ReleaseGIL = py::call_guard<py::gil_scoped_release>;

// ---- tensors <-> Python (tensor_convert.cpp)

// A tensor from a Tensor (the same tensor), a numpy array (its memory shared when the layout
// allows: native byte order, writeable, non-negative strides; else copied), a Python number or a
// nested sequence (copied; Python floats become float32 as in MindSpore). `dtype` converts.
// Raises TypeError for values that are none of these.
Tensor to_tensor(py::handle value, std::optional<DType> dtype = std::nullopt);
// Always a new tensor owned by zenith (no Python memory in it): data pipelines use this, so
// that worker threads never free Python objects.
Tensor to_owned_tensor(py::handle value);
// A numpy array sharing the tensor's memory (bfloat16 and backend layouts are converted first).
py::object to_numpy(const Tensor& t);
// A dtype argument: a zenith dtype or its name ("float32"); TypeError otherwise.
DType dtype_arg(py::handle value);

// A Python object kept by C++ (a Cell's construct, a dataset source, a callback) and possibly
// dropped where the GIL is not held: it takes the GIL to release the object, and leaves it to
// the operating system once the interpreter is finalizing.
class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(py::object object) : object_(std::move(object)) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (!object_) return;
    if (!Py_IsInitialized() || _Py_IsFinalizing()) {
      object_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    object_ = py::object();
  }
  const py::object& get() const { return object_; }

 private:
  py::object object_;
};

// The tensor a Python callable returned, or a TypeError naming `what`.
Tensor returned_tensor(const py::handle& value, const std::string& what);

void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_autograd(py::module_& m);
void bind_nn(py::module_& m);
void bind_optim(py::module_& m);
void bind_data(py::module_& m);
void bind_train(py::module_& m);
void bind_distributed(py::module_& m);

}  // namespace zenith::python
