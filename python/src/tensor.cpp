// zenith.Tensor and the dtypes: numpy in and out (sharing memory where the layout allows),
// metadata, views and the arithmetic operators. The MindSpore-named methods written with these
// (sum, argmax, __getitem__, ...) are added in Python by zenith/_tensor.py.
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

// The other operand of an arithmetic operator. A Python number takes the tensor's dtype, except
// that a float with an integer or bool tensor gives float32 (and an int with a bool tensor,
// int64), as in MindSpore and PyTorch; returns false when `other` is not a tensor-like value.
bool operands(const Tensor& self, py::handle other, Tensor& a, Tensor& b) {
  a = self;
  if (py::isinstance<py::float_>(other) || py::isinstance<py::int_>(other)) {
    const bool is_float = py::isinstance<py::float_>(other);
    const bool is_bool = py::isinstance<py::bool_>(other);
    DType t = self.dtype();
    if (!is_floating(t) && is_float) t = DType::f32;
    if (t == DType::b8 && !is_bool) t = DType::i64;
    a = self.dtype() == t ? self : self.to(t);
    b = Tensor::scalar(other.cast<double>(), t);
    return true;
  }
  if (other.is_none() || py::isinstance<py::str>(other)) return false;
  try {
    b = to_tensor(other);
  } catch (py::type_error&) {
    return false;
  }
  return true;
}

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);

// self OP other (or other OP self when `reflected`); NotImplemented for non-tensor operands.
py::object binary(const Tensor& self, py::handle other, BinaryOp op, bool reflected,
                  bool true_division = false) {
  Tensor a, b;
  if (!operands(self, other, a, b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  if (reflected) std::swap(a, b);
  Tensor out;
  {
    py::gil_scoped_release release;
    if (true_division && !is_floating(a.dtype()) && !is_floating(b.dtype())) {
      a = a.to(DType::f32);
      b = b.to(DType::f32);
    }
    out = op(a, b);
  }
  return py::cast(std::move(out));
}

Tensor tensor_init(py::object input_data, py::object dtype, py::object shape) {
  std::optional<DType> dt;
  if (!dtype.is_none()) dt = dtype_arg(dtype);
  if (input_data.is_none()) {
    if (shape.is_none())
      throw py::type_error(
          "[Tensor] input_data is None; give data, or a shape (and dtype) for zeros");
    return Tensor::zeros(shape.cast<Shape>(), dt.value_or(DType::f32));
  }
  Tensor t = to_tensor(input_data, dt);
  if (!shape.is_none()) {
    Shape s = shape.cast<Shape>();
    if (s != t.shape())
      throw py::value_error("[Tensor] data of shape " + shape_str(t.shape()) +
                            " does not match shape " + shape_str(s));
  }
  return t;
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[i];
  return out;
}

// Arguments given as f(2, 3) or f((2, 3)) or f([2, 3]).
Shape int_list(const py::args& args) {
  try {
    if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return args[0].cast<Shape>();
    return args.cast<Shape>();
  } catch (const py::cast_error&) {
    throw py::type_error("expected ints or one sequence of ints, got " +
                         py::repr(args).cast<std::string>());
  }
}

}  // namespace

Tensor to_tensor(py::handle value, std::optional<DType> dtype) {
  return convert(value, dtype, false);
}

Tensor to_owned_tensor(py::handle value) { return convert(value, std::nullopt, true); }

Tensor returned_tensor(const py::handle& value, const std::string& what) {
  if (!py::isinstance<Tensor>(value))
    throw py::type_error(what + " must return a zenith.Tensor, got " +
                         py::str(py::type::of(value)).cast<std::string>());
  return value.cast<Tensor>();
}

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

void bind_tensor(py::module_& m) {
  py::enum_<DType>(m, "dtype", "Element types: zenith.float32, zenith.int64, ...")
      .value("float32", DType::f32)
      .value("float64", DType::f64)
      .value("float16", DType::f16)
      .value("bfloat16", DType::bf16)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("uint8", DType::u8)
      .value("bool_", DType::b8)
      .def_property_readonly("itemsize", [](DType t) { return itemsize(t); })
      .def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); });

  py::class_<Tensor> t(m, "Tensor", R"doc(
A tensor: shape, dtype and memory shared by its views (MindSpore's mindspore.Tensor).

Tensor(input_data=None, dtype=None, shape=None)
  input_data: a numpy array (its memory is shared when the layout allows: native byte order,
  writeable, non-negative strides), a Tensor (the same tensor), a Python number or a nested
  sequence (copied; Python floats give float32, ints int64). dtype converts. With input_data
  None, shape (and dtype) give zeros.
Tensor.asnumpy() returns a numpy array that shares the tensor's memory.)doc");
  t.def(py::init(&tensor_init), py::arg("input_data") = py::none(), py::arg("dtype") = py::none(),
        py::arg("shape") = py::none())
      .def_property_readonly("shape", [](const Tensor& x) { return shape_tuple(x.shape()); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("size", &Tensor::numel, "Number of elements.")
      .def_property_readonly("itemsize", [](const Tensor& x) { return itemsize(x.dtype()); })
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly(
          "strides",
          [](const Tensor& x) {
            Shape s = x.strides();
            for (auto& v : s) v *= int64_t(itemsize(x.dtype()));
            return shape_tuple(s);
          },
          "Strides in bytes, as numpy's.")
      .def_property(
          "requires_grad", &Tensor::requires_grad, [](Tensor& x, bool v) { x.requires_grad_(v); },
          "Whether gradients flow to this tensor (floating leaf tensors only).")
      .def("asnumpy", &to_numpy, "A numpy array sharing this tensor's memory.")
      .def(
          "__array__",
          [](const Tensor& x, py::object dtype) {
            py::object a = to_numpy(x);
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          },
          py::arg("dtype") = py::none())
      .def("item",
           [](const Tensor& x) -> py::object {
             double v;
             {
               py::gil_scoped_release release;
               v = x.item();
             }
             if (x.dtype() == DType::b8) return py::bool_(v != 0);
             if (!is_floating(x.dtype())) return py::int_(int64_t(v));
             return py::float_(v);
           })
      .def("astype",
           [](const Tensor& x, py::handle dtype) {
             DType d = dtype_arg(dtype);
             py::gil_scoped_release release;
             return x.to(d);
           })
      .def("copy", &Tensor::clone, ReleaseGIL(), "A copy with its own memory.")
      .def("contiguous", &Tensor::contiguous, ReleaseGIL())
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("detach", &Tensor::detach)
      .def(
          "reshape",
          [](const Tensor& x, py::args shape) {
            Shape s = int_list(shape);
            py::gil_scoped_release release;
            return x.reshape(s);
          },
          "reshape(*shape): a view when the strides allow, else a copy; one -1 is inferred.")
      .def("view", [](const Tensor& x, py::args shape) { return x.view(int_list(shape)); })
      .def("permute", [](const Tensor& x, py::args dims) { return x.permute(int_list(dims)); })
      .def("swapaxes", &Tensor::transpose, py::arg("axis0"), py::arg("axis1"))
      .def("squeeze_dim", &Tensor::squeeze)
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def("expand_dims", &Tensor::unsqueeze, py::arg("axis"))
      .def(
          "broadcast_to", [](const Tensor& x, const Shape& shape) { return x.expand(shape); },
          py::arg("shape"))
      .def("flatten_dims", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("_slice", &Tensor::slice)
      .def("_select", &Tensor::select)
      .def("_assign",
           [](Tensor& x, const Tensor& src) {
             py::gil_scoped_release release;
             NoGradGuard no_grad;
             x.copy_(src);
           })
      .def("_fill",
           [](Tensor& x, double v) {
             py::gil_scoped_release release;
             NoGradGuard no_grad;
             x.fill_(v);
           })
      // Replaces this tensor's data with `src`'s (any shape): handles shared with cells and
      // optimizers see the new data (Parameter.set_data).
      .def("_replace_data",
           [](Tensor& x, const Tensor& src) {
             Tensor c = src.detach().contiguous();
             if (c.storage() == x.storage()) c = c.clone();
             TensorImpl& impl = x.impl();
             impl.storage = c.storage();
             impl.shape = c.shape();
             impl.strides = c.strides();
             impl.offset = c.offset();
             impl.dtype = c.dtype();
             impl.layout = nullptr;
             impl.grad = nullptr;
           })
      .def("_same", &Tensor::is_same)
      .def("_id", [](const Tensor& x) { return reinterpret_cast<uintptr_t>(x.impl_ptr().get()); })
      .def("__hash__", [](const Tensor& x) { return std::hash<const void*>()(x.impl_ptr().get()); })
      .def("__len__",
           [](const Tensor& x) {
             if (x.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return x.size(0);
           })
      .def("__bool__",
           [](const Tensor& x) {
             if (x.numel() != 1)
               throw py::value_error("the truth value of a tensor of shape " +
                                     shape_str(x.shape()) + " is ambiguous; use .any() or .all()");
             return x.item() != 0;
           })
      .def("__float__", [](const Tensor& x) { return x.item(); })
      .def("__int__", [](const Tensor& x) { return int64_t(x.item()); })
      .def("__index__",
           [](const Tensor& x) {
             if (is_floating(x.dtype()) || x.numel() != 1)
               throw py::type_error("only one-element integer tensors can be used as an index");
             return int64_t(x.item());
           })
      .def("__neg__",
           [](const Tensor& x) {
             py::gil_scoped_release release;
             return ops::neg(x);
           })
      .def("__abs__", [](const Tensor& x) {
        py::gil_scoped_release release;
        return ops::abs(x);
      });

  struct Operator {
    const char* name;
    const char* reflected;
    BinaryOp op;
    bool true_division;
  };
  const Operator arithmetic[] = {
      {"__add__", "__radd__", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); },
       false},
      {"__sub__", "__rsub__", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); },
       false},
      {"__mul__", "__rmul__", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); },
       false},
      {"__truediv__", "__rtruediv__",
       [](const Tensor& a, const Tensor& b) { return ops::div(a, b); }, true},
      {"__pow__", "__rpow__", [](const Tensor& a, const Tensor& b) { return ops::pow(a, b); },
       false},
      {"__matmul__", "__rmatmul__", &ops::matmul, false},
      {"__eq__", nullptr, &ops::eq, false},
      {"__ne__", nullptr, &ops::ne, false},
      {"__lt__", nullptr, &ops::lt, false},
      {"__le__", nullptr, &ops::le, false},
      {"__gt__", nullptr, &ops::gt, false},
      {"__ge__", nullptr, &ops::ge, false},
  };
  for (const Operator& o : arithmetic) {
    BinaryOp op = o.op;
    bool true_division = o.true_division;
    t.def(o.name, [op, true_division](const Tensor& self, py::handle other) {
      return binary(self, other, op, false, true_division);
    });
    if (o.reflected)
      t.def(o.reflected, [op, true_division](const Tensor& self, py::handle other) {
        return binary(self, other, op, true, true_division);
      });
  }

  // Factories (zenith.ops.zeros etc. wrap these with MindSpore's signatures).
  m.def(
      "_zeros", [](const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype); },
      ReleaseGIL());
  m.def(
      "_full",
      [](const Shape& shape, double value, DType dtype) {
        return Tensor::full(shape, value, dtype);
      },
      ReleaseGIL());
  m.def("_arange", [](double start, double end, double step, DType dtype) {
    if (step == 0) throw py::value_error("[arange] step must not be 0");
    const double n = std::ceil((end - start) / step);
    const int64_t count = n > 0 ? int64_t(n) : 0;
    py::gil_scoped_release release;
    Tensor idx = Tensor::arange(count, DType::f64);
    return ops::add(ops::mul(idx, step), start).to(dtype);
  });
  m.def("_randn", &Tensor::randn, ReleaseGIL());
  m.def("_rand", &Tensor::rand, ReleaseGIL());
  m.def("_uniform", &Tensor::uniform, ReleaseGIL());
  m.def("_randint", &Tensor::randint, ReleaseGIL());
  m.def(
      "_to_tensor",
      [](py::handle value, py::object dtype) {
        return to_tensor(value, dtype.is_none() ? std::nullopt : std::optional(dtype_arg(dtype)));
      },
      py::arg("value"), py::arg("dtype") = py::none(),
      "Tensor from a tensor, array, number or sequence (shared where possible).");
}

}  // namespace zenith::python
