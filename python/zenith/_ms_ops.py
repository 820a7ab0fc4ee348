"""More of mindspore.ops, attached to zenith.ops: binary_cross_entropy_with_logits, l1_loss,
floor_divide/floor_mod, assign, all_finite support, and the primitive classes of
mindspore.ops.operations (P.Mul()(x, y)) and the names of mindspore.ops.functional."""

import sys
import types

import numpy as np

from zenith import ops
from zenith._tensor import Tensor, _as_tensor


def _reduce(x, reduction, name):
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    if reduction == "none":
        return x
    raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction="mean"):
    """-w [pos_weight * y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x))], reduced; computed
    as w [pos_weight * y * softplus(-x) + (1 - y) * softplus(x)], stable for large |x|."""
    x, y = _as_tensor(input), _as_tensor(target)
    log1p_exp = ops.log(ops.exp(-ops.abs(x)) + 1.0)
    sp_neg = ops.relu(-x) + log1p_exp  # softplus(-x) = -log(sigmoid(x))
    sp_pos = ops.relu(x) + log1p_exp   # softplus(x) = -log(1 - sigmoid(x))
    pos = y * sp_neg
    if pos_weight is not None:
        pos = pos * _as_tensor(pos_weight)
    loss = pos + (1.0 - y) * sp_pos
    if weight is not None:
        loss = loss * _as_tensor(weight)
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def l1_loss(input, target, reduction="mean"):
    """|input - target|, reduced."""
    return _reduce(ops.abs(_as_tensor(input) - _as_tensor(target)), reduction, "l1_loss")


def _np(x):
    return x.asnumpy() if isinstance(x, Tensor) else np.asarray(x)


def floor_divide(input, other):
    """floor(input / other) elementwise, as numpy (no gradient: it is piecewise constant)."""
    a = _np(input)
    out = np.floor_divide(a, _np(other))
    return Tensor(out.astype(a.dtype if a.dtype != np.float64 or out.dtype == a.dtype
                             else out.dtype))


def floor_mod(input, other):
    """input - floor(input / other) * other: the remainder with the sign of other (Python's
    %); the gradient with respect to input is 1."""
    x = _as_tensor(input)
    return x - floor_divide(x, other) * _as_tensor(other, x.dtype)


def assign(variable, value):
    """Writes value into variable (a Parameter) in place; returns variable."""
    src = _as_tensor(value, variable.dtype)
    if tuple(src.shape) != tuple(variable.shape):
        src = src.broadcast_to(tuple(variable.shape)).contiguous()
    variable._assign(src)
    return variable


def isfinite(x):
    """True where x is neither inf nor nan."""
    return Tensor(np.isfinite(_np(x)))


# ---- mindspore.ops.operations: primitives are classes, instantiated then called


class Primitive:
    """A primitive operation (mindspore.ops.Primitive): P.Mul()(x, y)."""

    def __init__(self, *args, **kwargs):
        self._args, self._kwargs = args, kwargs

    def __call__(self, *inputs):
        return self._fn(*inputs, *self._args, **self._kwargs)

    def __repr__(self):
        return f"Prim[{type(self).__name__}]"


def _apply_momentum(variable, accumulation, learning_rate, gradient, momentum,
                    use_locking=False, use_nesterov=False):
    # accumulation = accumulation * momentum + gradient; variable -= lr * accumulation
    # (or lr * (gradient + momentum * accumulation) with Nesterov).
    acc = accumulation * _as_tensor(momentum) + gradient
    assign(accumulation, acc)
    step = gradient + acc * _as_tensor(momentum) if use_nesterov else acc
    assign(variable, variable - step * _as_tensor(learning_rate))
    return variable


def _matmul(x, y, transpose_a=False, transpose_b=False):
    if transpose_a:
        x = ops.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))
    if transpose_b:
        y = ops.transpose(y, tuple(range(y.ndim - 2)) + (y.ndim - 1, y.ndim - 2))
    return ops.matmul(x, y)


_PRIMITIVES = {
    "Add": ops.add, "Sub": ops.sub, "Mul": ops.mul, "Div": ops.div, "RealDiv": ops.div,
    "Pow": ops.pow, "Maximum": ops.maximum, "Minimum": ops.minimum, "Neg": ops.neg,
    "Exp": ops.exp, "Log": ops.log, "Sqrt": ops.sqrt, "Rsqrt": ops.rsqrt, "Abs": ops.abs,
    "Square": ops.square, "Tanh": ops.tanh, "Sigmoid": ops.sigmoid, "ReLU": ops.relu,
    "Erf": ops.erf, "Equal": ops.equal, "NotEqual": ops.not_equal, "Less": ops.less,
    "LessEqual": ops.less_equal, "Greater": ops.greater, "GreaterEqual": ops.greater_equal,
    "Select": ops.where, "Reshape": ops.reshape, "Transpose": ops.transpose,
    "ExpandDims": ops.expand_dims, "Cast": ops.cast, "FloorDiv": floor_divide,
    "FloorMod": floor_mod, "Assign": assign, "OnesLike": ops.ones_like,
    "ZerosLike": ops.zeros_like, "StopGradient": ops.stop_gradient,
    "ApplyMomentum": _apply_momentum, "MatMul": _matmul, "BatchMatMul": _matmul,
}


def _primitive(name, fn):
    return type(name, (Primitive,), {"_fn": staticmethod(fn),
                                     "__doc__": f"mindspore.ops.{name}: as zenith.ops."})




class ReduceSum(Primitive):
    """ReduceSum(keep_dims=False)(x, axis=())."""

    def __call__(self, x, axis=()):
        keep = self._kwargs.get("keep_dims", self._args[0] if self._args else False)
        return x.sum(axis if axis != () else None, keepdims=keep)


class ReduceMean(Primitive):
    """ReduceMean(keep_dims=False)(x, axis=())."""

    def __call__(self, x, axis=()):
        keep = self._kwargs.get("keep_dims", self._args[0] if self._args else False)
        return x.mean(axis if axis != () else None, keep)


class Softmax(Primitive):
    """Softmax(axis=-1)(x)."""

    def __call__(self, x):
        axis = self._kwargs.get("axis", self._args[0] if self._args else -1)
        return ops.softmax(x, axis[0] if isinstance(axis, (tuple, list)) else axis)


class Concat(Primitive):
    """Concat(axis=0)(tensors)."""

    def __call__(self, tensors):
        return ops.cat(tensors, self._kwargs.get("axis", self._args[0] if self._args else 0))


operations = types.ModuleType("zenith.ops.operations",
                              "mindspore.ops.operations: the primitive classes (P.Mul()(x, y)).")
for _name, _fn in _PRIMITIVES.items():
    setattr(operations, _name, _primitive(_name, _fn))
for _cls in (Primitive, ReduceSum, ReduceMean, Softmax, Concat):
    setattr(operations, _cls.__name__, _cls)

functional = types.ModuleType("zenith.ops.functional",
                              "mindspore.ops.functional: the functional names (F.tensor_add).")


def install():
    """Attaches these names to zenith.ops and registers zenith.ops.operations/functional."""
    for name in ("binary_cross_entropy_with_logits", "l1_loss", "floor_divide", "floor_mod",
                 "assign", "isfinite"):
        setattr(ops, name, globals()[name])
        ops.__all__.append(name)
    ops.floor_div = floor_divide
    ops.remainder = floor_mod
    for name in dir(operations):
        if not name.startswith("_") and name[0].isupper() and name != "Primitive":
            setattr(ops, name, getattr(operations, name))
    ops.Primitive = Primitive
    for name in ops.__all__:
        setattr(functional, name, getattr(ops, name))
    functional.tensor_add, functional.tensor_sub = ops.add, ops.sub
    functional.tensor_mul, functional.tensor_div = ops.mul, ops.div
    ops.operations, ops.functional = operations, functional
    sys.modules["zenith.ops.operations"] = operations
    sys.modules["zenith.ops.functional"] = functional
    from zenith._unsupported import unsupported
    ops.__getattr__ = unsupported(ops.__name__)
    operations.__getattr__ = unsupported("zenith.ops.operations")
