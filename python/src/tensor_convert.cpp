// Conversions between Python values and tensors: numpy arrays in (sharing memory where the
// layout allows) and out, Python numbers and nested sequences, dtype arguments.
#include <pybind11/numpy.h>

#include <cstring>

#include "bindings.h"
#include "core/dispatch.h"

namespace zenith::python {
namespace {

std::optional<DType> from_numpy_dtype(const py::dtype& d) {
  const auto size = d.itemsize();
  switch (d.kind()) {
    case 'f':
      if (size == 4) return DType::f32;
      if (size == 8) return DType::f64;
      if (size == 2) return DType::f16;
      break;
    case 'i':
      if (size == 4) return DType::i32;
      if (size == 8) return DType::i64;
      break;
    case 'u':
      if (size == 1) return DType::u8;
      break;
    case 'b':
      return DType::b8;
  }
  return std::nullopt;
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return py::dtype::of<float>();
    case DType::f64:
      return py::dtype::of<double>();
    case DType::f16:
      return py::dtype("float16");
    case DType::i32:
      return py::dtype::of<int32_t>();
    case DType::i64:
      return py::dtype::of<int64_t>();
    case DType::u8:
      return py::dtype::of<uint8_t>();
    case DType::b8:
      return py::dtype::of<bool>();
    case DType::bf16:
      break;
  }
  throw py::type_error(std::string("[Tensor] ") + dtype_name(t) + " has no numpy dtype");
}

// Drops the reference a shared numpy array's storage holds. At interpreter exit the array is
// left to the operating system: the GIL can no longer be taken.
void release_python_object(PyObject* object) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  py::gil_scoped_acquire gil;
  Py_DECREF(object);
}

// A numpy array as a tensor: shared when `share` and the layout allows, else copied.
Tensor from_numpy(py::array array, bool share) {
  auto dtype = from_numpy_dtype(array.dtype());
  if (!dtype)
    throw py::type_error("[Tensor] numpy dtype " + py::str(array.dtype()).cast<std::string>() +
                         " has no zenith dtype (float16/32/64, int32/64, uint8, bool)");
  if (array.dtype().byteorder() == '>')
    array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  const size_t size = itemsize(*dtype);
  Shape shape, strides;
  bool empty = false;
  int64_t span = 1;  // elements from the first to one past the last
  share = share && array.writeable() && reinterpret_cast<uintptr_t>(array.data()) % size == 0;
  for (py::ssize_t i = 0; i < array.ndim(); ++i) {
    shape.push_back(array.shape(i));
    const py::ssize_t stride = array.strides(i);
    if (stride < 0 || stride % py::ssize_t(size) != 0) share = false;
    strides.push_back(stride / py::ssize_t(size));
    if (array.shape(i) == 0) empty = true;
    span += (array.shape(i) - 1) * strides.back();
  }
  if (!share) {
    py::array c = py::array::ensure(array, py::array::c_style);
    Tensor t = Tensor::empty(shape, *dtype);
    if (t.nbytes()) std::memcpy(t.raw_data(), c.data(), t.nbytes());
    return t;
  }
  PyObject* owner = array.ptr();
  Py_INCREF(owner);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(array.mutable_data(), empty ? 0 : size_t(span) * size,
                                            kCPU, [owner] { release_python_object(owner); });
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = *dtype;
  return Tensor(std::move(impl));
}

py::module_ numpy() {
  try {
    return py::module_::import("numpy");
  } catch (py::error_already_set&) {
    throw py::type_error(
        "[Tensor] converting sequences needs numpy (apt-get install python3-numpy)");
  }
}

// Python numbers, numpy scalars and nested sequences; always copied.
Tensor from_python(py::handle value) {
  if (value.is_none())
    throw py::type_error("[Tensor] expected a Tensor, numpy array, number or sequence, got None");
  if (py::isinstance<py::bool_>(value)) return Tensor::scalar(value.cast<bool>(), DType::b8);
  if (py::isinstance<py::int_>(value)) {
    int64_t v;
    try {
      v = value.cast<int64_t>();
    } catch (py::cast_error&) {
      throw py::value_error("[Tensor] integer " + py::str(value).cast<std::string>() +
                            " does not fit in int64");
    }
    return Tensor::from_vector(std::vector<int64_t>{v}, {});
  }
  const bool numpy_value = py::hasattr(value, "dtype");
  if (py::isinstance<py::float_>(value) && !numpy_value)
    return Tensor::scalar(value.cast<double>(), DType::f32);
  if (py::isinstance<py::str>(value) || py::isinstance<py::bytes>(value))
    throw py::type_error("[Tensor] cannot make a tensor from a string");
  py::array array;
  try {
    array = numpy().attr("asarray")(value);
  } catch (py::error_already_set& e) {
    throw py::type_error(std::string("[Tensor] cannot convert the value: ") + e.what());
  }
  if (array.dtype().kind() == 'O')
    throw py::type_error("[Tensor] cannot make a tensor from " +
                         py::str(py::type::of(value)).cast<std::string>() +
                         " (ragged or non-numeric sequence?)");
  // Python floats (float64 in numpy) become float32, as in MindSpore; numpy values keep theirs.
  if (!numpy_value && array.dtype().kind() == 'f') array = array.attr("astype")("float32");
  return from_numpy(array, false);
}

Tensor convert(py::handle value, std::optional<DType> dtype, bool owned) {
  Tensor t;
  if (py::isinstance<Tensor>(value))
    t = owned ? value.cast<Tensor>().detach().clone() : value.cast<Tensor>();
  else if (py::isinstance<py::array>(value))
    t = from_numpy(py::reinterpret_borrow<py::array>(value), !owned);
  else
    t = from_python(value);
  if (dtype && t.dtype() != *dtype) {
    py::gil_scoped_release release;
    t = t.to(*dtype);
  }
  return t;
}

}  // namespace

Tensor to_tensor(py::handle value, std::optional<DType> dtype) {
  return convert(value, dtype, false);
}

Tensor to_owned_tensor(py::handle value) { return convert(value, std::nullopt, true); }

py::object to_numpy(const Tensor& tensor) {
  dispatch::note_host_read(tensor);  // graph capture: a value read by Python (control flow)
  Tensor t = tensor.detach();
  {
    py::gil_scoped_release release;
    if (t.device() != kCPU) t = t.to(kCPU);
    if (t.has_layout()) t = t.clone();
    if (t.dtype() == DType::bf16) t = t.to(DType::f32);
  }
  const py::ssize_t size = py::ssize_t(itemsize(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(py::ssize_t(s) * size);
  auto keep = std::make_unique<Tensor>(t);
  void* data = t.raw_data();
  py::capsule owner(keep.get(), [](void* p) { delete static_cast<Tensor*>(p); });
  keep.release();  // the capsule owns it now
  return py::array(numpy_dtype(t.dtype()), shape, strides, data, owner);
}

DType dtype_arg(py::handle value) {
  if (py::isinstance<DType>(value)) return value.cast<DType>();
  if (py::isinstance<py::str>(value)) {
    try {
      return dtype_from_name(value.cast<std::string>());
    } catch (const Error& e) {
      throw py::type_error(e.what());
    }
  }
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return DType::f32;
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::i64;
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::b8;
  if (py::hasattr(value, "itemsize") && py::hasattr(value, "kind")) {  // a numpy dtype
    if (auto d = from_numpy_dtype(py::reinterpret_borrow<py::dtype>(value))) return *d;
  }
  throw py::type_error("expected a zenith dtype (zenith.float32, ...), got " +
                       py::repr(value).cast<std::string>());
}

}  // namespace zenith::python
