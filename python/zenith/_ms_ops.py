"""More of mindspore.ops, attached to zenith.ops: binary_cross_entropy_with_logits, l1_loss,
floor_divide/floor_mod, assign, all_finite support, and the primitive classes of
mindspore.ops.operations (P.Mul()(x, y)) and the names of mindspore.ops.functional."""

import sys
import types

import numpy as np

from zenith import ops
from zenith._tensor import Tensor, _as_tensor, bool_


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

    def shard(self, in_strategy, out_strategy=None):
        """MindSpore's operator-level strategy: kept and ignored outside semi-auto parallel
        (as MindSpore does); under it refused (zenith.UnsupportedError) but for nn.Dense's
        MatMul (dense.matmul.shard, zenith.nn.shard)."""
        from zenith.context import ParallelMode, get_auto_parallel_context
        if get_auto_parallel_context("parallel_mode") == ParallelMode.SEMI_AUTO_PARALLEL:
            from zenith._unsupported import UnsupportedError
            raise UnsupportedError(
                f"ops.{type(self).__name__}().shard({in_strategy!r}): zenith runs shard "
                "strategies only on nn.Dense's MatMul (dense.matmul.shard(...)); a primitive's "
                "strategy is not supported")
        self.in_strategy, self.out_strategy = in_strategy, out_strategy
        return self


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
    _install_more()
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


# ---- more primitives: P.Name(*attrs)(*inputs), on zenith.ops (numpy where the result is
# piecewise constant or an integer index, so no gradient is lost)

def _np_unary(fn):
    return lambda x: Tensor(fn(_np(x)))


def _argmax(x, axis=-1, output_type=None):
    return ops.argmax(x, axis).astype(output_type) if output_type is not None else \
        ops.argmax(x, axis)


def _argmin(x, axis=-1, output_type=None):
    out = ops.argmin(x, axis)
    return out.astype(output_type) if output_type is not None else out


def _softmax_ce(logits, labels):
    # MindSpore's SoftmaxCrossEntropyWithLogits primitive: (per-sample loss, dlogits).
    p = ops.softmax(logits, -1)
    loss = -(labels * ops.log_softmax(logits, -1)).sum(-1)
    return loss, ops.stop_gradient(p - labels)


def _sparse_softmax_ce(logits, labels, is_grad=False):
    if is_grad:
        raise ValueError("SparseSoftmaxCrossEntropyWithLogits: is_grad=True is not supported")
    return ops.cross_entropy(logits, labels)


def _smooth_l1(logits, labels, beta=1.0, reduction="none"):
    d = ops.abs(logits - labels)
    loss = ops.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction, "SmoothL1Loss")


def _bias_add(x, b, data_format="NCHW"):
    shape = [1] * x.ndim
    shape[1 if data_format != "NHWC" else -1] = -1
    return x + b.reshape(tuple(shape))


def _print(*args):
    print(*args)
    return Tensor(0)


_MORE = {
    # name: (function of (inputs..., attrs...)); attrs come from the constructor
    "ReLU6": lambda x: ops.clamp(x, 0.0, 6.0),
    "Elu": lambda x, alpha=1.0: ops.relu(x) + (ops.exp(-ops.relu(-x)) - 1.0) * alpha,
    "GeLU": lambda x: ops.gelu(x),
    "HSigmoid": lambda x: ops.clamp(x + 3.0, 0.0, 6.0) / 6.0,
    "HSwish": lambda x: x * ops.clamp(x + 3.0, 0.0, 6.0) / 6.0,
    "Softplus": lambda x: ops.relu(x) + ops.log(ops.exp(-ops.abs(x)) + 1.0),
    "Softsign": lambda x: x / (ops.abs(x) + 1.0),
    "LogSoftmax": lambda x, axis=-1: ops.log_softmax(x, axis),
    "Identity": lambda x: x,
    "Reciprocal": lambda x: 1.0 / x,
    "SquaredDifference": lambda x, y: (x - y) * (x - y),
    "DivNoNan": lambda x, y: ops.where(ops.equal(y, 0.0), ops.zeros_like(x), x / ops.where(
        ops.equal(y, 0.0), ops.ones_like(y), y)),
    "AddN": lambda xs: _sum_list(xs),
    "IsNan": lambda x: ops.not_equal(x, x),
    "IsFinite": isfinite,
    "LogicalNot": lambda x: ops.equal(x.astype(bool_), False),
    "Floor": _np_unary(np.floor),
    "Ceil": _np_unary(np.ceil),
    "Round": _np_unary(np.round),
    "Sign": _np_unary(np.sign),
    "Flatten": lambda x: ops.flatten(x),
    "Squeeze": lambda x, axis=(): ops.squeeze(x, axis if axis != () else None),
    "Stack": lambda xs, axis=0: ops.stack(xs, axis),
    "Unstack": lambda x, axis=0: tuple(ops.squeeze(s, axis) for s in _split(x, axis)),
    "Argmax": _argmax,
    "Argmin": _argmin,
    "Gather": lambda params, indices, axis, batch_dims=0: ops.gather(params, indices, axis),
    "GatherD": lambda x, dim, index: ops.gather_elements(x, dim, index),
    "BroadcastTo": lambda x, shape: ops.broadcast_to(x, shape),
    "MaskedFill": lambda x, mask, value: ops.masked_fill(x, mask, value),
    "BiasAdd": _bias_add,
    "L2Loss": lambda x: (x * x).sum() / 2.0,
    "SoftmaxCrossEntropyWithLogits": _softmax_ce,
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_softmax_ce,
    "SmoothL1Loss": _smooth_l1,
    "Print": _print,
    "Shape": lambda x: tuple(x.shape),
    "Size": lambda x: int(x.size),
    "Rank": lambda x: int(x.ndim),
    "Fill": lambda type_, shape, value: ops.full(shape, value, dtype=type_),
    "Ones": lambda shape, type_=None: ops.ones(shape, type_),
    "Zeros": lambda shape, type_=None: ops.zeros(shape, type_),
    "Eye": lambda n, m, t: Tensor(np.eye(n, m, dtype=np.float32)).astype(t),
    "OneHot": lambda indices, depth, on_value, off_value, axis=-1: Tensor(np.where(
        np.eye(depth, dtype=bool)[_np(indices)], _np(on_value), _np(off_value))),
}


def _sum_list(xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def _split(x, axis):
    axis = axis % x.ndim
    return [x[(slice(None),) * axis + (slice(i, i + 1),)] for i in range(x.shape[axis])]


class _AttrPrimitive(Primitive):
    """Inputs first, then the constructor's attributes (e.g. LogSoftmax(axis)(x))."""

    def __call__(self, *inputs):
        return self._fn(*inputs, *self._args, **self._kwargs)


def _install_more():
    for name, fn in _MORE.items():
        cls = type(name, (_AttrPrimitive,), {"_fn": staticmethod(fn),
                                             "__doc__": f"mindspore.ops.{name}."})
        setattr(operations, name, cls)
        setattr(ops, name, cls)
