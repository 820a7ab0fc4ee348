// zenith.Tensor and the dtypes: numpy in and out (sharing memory where the layout allows),
// metadata, views and the arithmetic operators. The MindSpore-named methods written with these
// (sum, argmax, __getitem__, ...) are added in Python by zenith/_tensor.py.
#include <pybind11/numpy.h>

#include <cstring>

#include "bindings.h"
#include "core/dispatch.h"

namespace zenith::python {
namespace {

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

Tensor returned_tensor(const py::handle& value, const std::string& what) {
  if (!py::isinstance<Tensor>(value))
    throw py::type_error(what + " must return a zenith.Tensor, got " +
                         py::str(py::type::of(value)).cast<std::string>());
  return value.cast<Tensor>();
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