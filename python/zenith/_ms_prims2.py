"""More mindspore.ops primitive classes, on zenith.ops and the functions of _ms_functions.py:
P.Name(*attributes)(*inputs)."""

import numpy as np

from zenith import ops
from zenith._ms_ops import _AttrPrimitive, _np, assign, binary_cross_entropy_with_logits
from zenith._tensor import Tensor, _as_tensor, int64


def _reduce(fn_name):
    def run(x, axis=(), keep_dims=False):
        return getattr(_as_tensor(x), fn_name)(None if axis == () else axis, keep_dims)
    return run


def _np_reduce(fn):
    def run(x, axis=(), keep_dims=False):
        return Tensor(np.asarray(fn(_np(x), axis=None if axis == () else axis,
                                    keepdims=keep_dims)))
    return run


def _arg_with_value(find):
    def run(x, axis=0, keep_dims=False):
        x = _as_tensor(x)
        idx = find(_np(x), axis=axis)
        index = Tensor(np.expand_dims(idx, axis).astype(np.int64))
        values = ops.gather_elements(x, axis, index)
        if not keep_dims:
            values, index = ops.squeeze(values, axis), ops.squeeze(index, axis)
        return index.astype(int64), values
    return run


def _sort(x, axis=-1, descending=False):
    x = _as_tensor(x)
    a = _np(x)
    idx = np.argsort(-a if descending else a, axis=axis, kind="stable")
    index = Tensor(idx.astype(np.int64))
    return ops.gather_elements(x, axis, index), index


def _reverse(x, axis):
    x = _as_tensor(x)
    for ax in axis:
        ax %= x.ndim
        x = ops.index_select(x, ax, Tensor(np.arange(x.shape[ax] - 1, -1, -1)))
    return x


def _cumsum(x, axis, exclusive=False, reverse=False):
    x = _as_tensor(x)
    axis %= x.ndim
    n = x.shape[axis]
    tri = np.triu(np.ones((n, n), np.float32), 1 if exclusive else 0)
    if reverse:
        tri = tri.T
    moved = ops.transpose(x, tuple(i for i in range(x.ndim) if i != axis) + (axis,))
    out = ops.matmul(moved, Tensor(tri).astype(x.dtype))
    back = list(range(x.ndim - 1))
    back.insert(axis, x.ndim - 1)
    return ops.transpose(out, tuple(back))


def _unsorted_segment_sum(x, segment_ids, num_segments):
    x = _as_tensor(x)
    ids = _np(segment_ids).reshape(-1).astype(np.int64)
    onehot = (np.arange(int(num_segments))[:, None] == ids[None, :]).astype(np.float32)
    flat = x.reshape((len(ids), -1))
    out = ops.matmul(Tensor(onehot).astype(x.dtype), flat)
    return out.reshape((int(num_segments),) + tuple(x.shape[len(_np(segment_ids).shape):]))


def _l2_normalize(x, axis=0, epsilon=1e-4):
    x = _as_tensor(x)
    axis = axis[0] if isinstance(axis, (tuple, list)) else axis
    return x * ops.rsqrt(ops.maximum((x * x).sum(axis, keepdims=True), epsilon))


def _lp_norm(x, axis, p=2, keep_dims=False, epsilon=1e-12):
    if p != 2:
        raise ValueError("LpNorm: only p=2 is supported")
    return ops.sqrt((_as_tensor(x) ** 2).sum(tuple(axis) if isinstance(axis, (list, tuple))
                                                else axis, keepdims=keep_dims))


def _conv2d(x, weight, out_channel, kernel_size, mode=1, pad_mode="valid", pad=0, stride=1,
            dilation=1, group=1, data_format="NCHW"):
    first = lambda v: v[-1] if isinstance(v, (tuple, list)) else v  # noqa: E731
    return ops.conv2d(x, weight, None, first(stride), pad_mode, first(pad), first(dilation),
                      group)


def _pool(fn):
    def run(x, kernel_size=1, strides=1, pad_mode="valid", data_format="NCHW"):
        if pad_mode.lower() != "valid":
            raise ValueError("MaxPool/AvgPool: only pad_mode='valid' is supported")
        return fn(x, kernel_size, strides)
    return run


def _nll(logits, labels, weight, reduction="mean"):
    from zenith.nn.more import NLLLoss
    w = _np(weight)
    total = float(w[_np(labels).astype(np.int64)].sum())
    return NLLLoss(weight, -100, reduction)(_as_tensor(logits), _as_tensor(labels)), \
        Tensor(np.float32(total))


def _dropout(x, keep_prob=0.5, seed0=0, seed1=0):
    x = _as_tensor(x)
    out = ops.dropout(x, 1.0 - keep_prob, True)
    return out, ops.not_equal(out, 0.0)


def _apply_gradient_descent(var, alpha, delta):
    return assign(var, var - _as_tensor(delta) * _as_tensor(alpha))


def _apply_adagrad(var, accum, lr, grad, update_slots=True):
    g = _as_tensor(grad)
    if update_slots:
        assign(accum, accum + g * g)
    assign(var, var - g * _as_tensor(lr) / ops.sqrt(accum))
    return var, accum


def _f(name):
    return lambda *a: getattr(ops, name)(*a)


PRIMS = {
    "Asinh": _f("asinh"), "Acosh": _f("acosh"), "Atanh": _f("atanh"), "Sinh": _f("sinh"),
    "Cosh": _f("cosh"), "Expm1": _f("expm1"), "Log1p": _f("log1p"), "Erfc": _f("erfc"),
    "Xlogy": _f("xlogy"), "Xdivy": _f("xdivy"), "Lerp": _f("lerp"), "Inv": _f("inv"),
    "Trunc": _f("trunc"), "TruncateDiv": _f("truncate_div"), "TruncateMod": _f("truncate_mod"),
    "BitwiseAnd": _f("bitwise_and"), "BitwiseOr": _f("bitwise_or"),
    "BitwiseXor": _f("bitwise_xor"), "Invert": _f("invert"), "LogicalAnd": _f("logical_and"),
    "LogicalOr": _f("logical_or"),
    "Mod": lambda x, y: Tensor(np.fmod(_np(x), _np(y))),
    "Rint": lambda x: Tensor(np.rint(_np(x))),
    "MulNoNan": lambda x, y: ops.where(ops.equal(y, 0.0), ops.zeros_like(x * y), x * y),
    "AccumulateNV2": _f("addn"),
    "Addcdiv": lambda x, t1, t2, value: x + t1 / t2 * value,
    "Addcmul": lambda x, t1, t2, value: x + t1 * t2 * value,
    "ReduceMax": _reduce("max"), "ReduceMin": _reduce("min"),
    "ReduceAll": _np_reduce(np.all), "ReduceAny": _np_reduce(np.any),
    "ArgMaxWithValue": _arg_with_value(np.argmax),
    "ArgMinWithValue": _arg_with_value(np.argmin),
    "IsInf": lambda x: Tensor(np.isinf(_np(x))),
    "EqualCount": lambda x, y: Tensor(np.array([np.sum(_np(x) == _np(y))], np.int32)),
    "ApproximateEqual": lambda x, y, tolerance=1e-5: ops.approximate_equal(x, y, tolerance),
    "InTopK": lambda x1, x2, k: ops.intopk(x1, x2, k),
    "TopK": lambda x, k, sorted=True: ops.top_k(x, k),
    "Ger": _f("ger"),
    "LinSpace": lambda start, stop, num: ops.linspace(start, stop, num),
    "Range": lambda start, limit, delta, maxlen=1000000: Tensor(np.arange(
        _np(start), _np(limit), _np(delta))),
    "StandardNormal": lambda shape, seed=0, seed2=0: ops.randn(*shape),
    "UniformReal": lambda shape, seed=0, seed2=0: ops.rand(*shape),
    "Tile": _f("tile"),
    "Meshgrid": lambda inputs, indexing="xy": ops.meshgrid(inputs, indexing=indexing),
    "Slice": lambda x, begin, size: ops.slice(x, begin, size),
    "Split": lambda x, axis=0, output_num=1: ops.split(x, x.shape[axis] // output_num, axis),
    "Sort": _sort,
    "MaskedSelect": _f("masked_select"),
    "GatherNd": _f("gather_nd"),
    "Unique": _f("unique"),
    "InvertPermutation": lambda x: tuple(int(i) for i in np.argsort(np.asarray(x))),
    "ReverseV2": _reverse,
    "CumSum": lambda x, axis, exclusive=False, reverse=False: _cumsum(x, axis, exclusive,
                                                                      reverse),
    "UnsortedSegmentSum": _unsorted_segment_sum,
    "TensorShape": lambda x: Tensor(np.array(x.shape, np.int64)),
    "L2Normalize": _l2_normalize,
    "LpNorm": _lp_norm,
    "Cdist": lambda x1, x2, p=2.0: ops.cdist(x1, x2, p),
    "Conv2D": _conv2d,
    "MaxPool": _pool(ops.max_pool2d),
    "AvgPool": _pool(lambda x, k, s: ops.avg_pool2d(x, k, s)),
    "AdaptiveAvgPool2D": lambda x, output_size: ops.adaptive_avg_pool2d(x, output_size),
    "KLDivLoss": lambda logits, labels, reduction="mean": ops.kl_div(logits, labels, reduction),
    "BCEWithLogitsLoss": lambda logits, label, weight, pos_weight, reduction="mean":
        binary_cross_entropy_with_logits(logits, label, weight, pos_weight, reduction),
    "BinaryCrossEntropy": lambda logits, labels, weight=None, reduction="mean":
        ops.binary_cross_entropy(logits, labels, weight, reduction),
    "NLLLoss": _nll,
    "SoftMarginLoss": lambda x, y, reduction="mean": _soft_margin(x, y, reduction),
    "SigmoidCrossEntropyWithLogits": lambda x, y: binary_cross_entropy_with_logits(
        x, y, reduction="none"),
    "FastGeLU": _f("fast_gelu"),
    "HShrink": lambda x, lambd=0.5: ops.hardshrink(x, lambd),
    "SoftShrink": lambda x, lambd=0.5: ops.soft_shrink(x, lambd),
    "Mish": _f("mish"), "SeLU": _f("selu"), "PReLU": _f("prelu"),
    "Dropout": _dropout,
    "AssignAdd": lambda var, value: assign(var, var + value),
    "AssignSub": lambda var, value: assign(var, var - value),
    "ApplyGradientDescent": _apply_gradient_descent,
    "ApplyAdagrad": _apply_adagrad,
}


def _soft_margin(x, y, reduction):
    from zenith.nn.more import SoftMarginLoss
    return SoftMarginLoss(reduction)(_as_tensor(x), _as_tensor(y))


def install():
    from zenith._ms_ops import operations
    for name, fn in PRIMS.items():
        cls = type(name, (_AttrPrimitive,), {"_fn": staticmethod(fn),
                                             "__doc__": f"mindspore.ops.{name}."})
        setattr(operations, name, cls)
        setattr(ops, name, cls)
