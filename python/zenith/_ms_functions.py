"""More mindspore.ops functions, composed from zenith.ops so gradients flow where MindSpore's
do; piecewise-constant and integer results (floor, sign, bitwise, indices) are computed with
numpy (their gradient is zero or undefined)."""

import numpy as np

from zenith import ops
from zenith._tensor import Tensor, _as_tensor, int64


def _t(x):
    return _as_tensor(x)


def _np(x):
    return x.asnumpy() if isinstance(x, Tensor) else np.asarray(x)


def _np_fn(fn):
    def run(*args):
        return Tensor(np.asarray(fn(*[_np(a) for a in args])))
    return run


# ---- elementwise (differentiable)

def asinh(input):
    x = _t(input)
    return ops.log(x + ops.sqrt(x * x + 1.0))


def acosh(input):
    x = _t(input)
    return ops.log(x + ops.sqrt(x * x - 1.0))


def atanh(input):
    x = _t(input)
    return ops.log((1.0 + x) / (1.0 - x)) * 0.5


def sinh(input):
    x = _t(input)
    return (ops.exp(x) - ops.exp(-x)) * 0.5


def cosh(input):
    x = _t(input)
    return (ops.exp(x) + ops.exp(-x)) * 0.5


def expm1(input):
    return ops.exp(_t(input)) - 1.0


def log1p(input):
    return ops.log(_t(input) + 1.0)


def erfc(input):
    return 1.0 - ops.erf(_t(input))


def logit(input, eps=None):
    x = _t(input)
    if eps is not None:
        x = ops.clamp(x, eps, 1.0 - eps)
    return ops.log(x / (1.0 - x))


def xlogy(input, other):
    x, y = _t(input), _t(other)
    safe = ops.where(ops.equal(x, 0.0), ops.ones_like(y), y)
    return ops.where(ops.equal(x, 0.0), ops.zeros_like(x * y), x * ops.log(safe))


def xdivy(x, y):
    x, y = _t(x), _t(y)
    safe = ops.where(ops.equal(x, 0.0), ops.ones_like(y), y)
    return ops.where(ops.equal(x, 0.0), ops.zeros_like(x * y), x / safe)


def lerp(input, end, weight):
    x = _t(input)
    return x + (_t(end) - x) * weight


def inv(x):
    return 1.0 / _t(x)


def addn(x):
    out = x[0]
    for v in x[1:]:
        out = out + v
    return out


accumulate_n = addn


def bias_add(input_x, bias):
    x = _t(input_x)
    return x + _t(bias).reshape((1, -1) + (1,) * (x.ndim - 2))


def fast_gelu(x):
    x = _t(x)
    return x * ops.sigmoid(x * 1.702)


def hardshrink(x, lambd=0.5):
    x = _t(x)
    return x * ops.greater(ops.abs(x), lambd).astype(x.dtype)


def soft_shrink(x, lambd=0.5):
    x = _t(x)
    return ops.relu(x - lambd) - ops.relu(-x - lambd)


def prelu(x, weight):
    x = _t(x)
    w = _t(weight)
    w = w.reshape((1, -1) + (1,) * (x.ndim - 2)) if x.ndim > 1 else w
    return ops.relu(x) - ops.relu(-x) * w


# ---- losses

def binary_cross_entropy(logits, labels, weight=None, reduction="mean"):
    p, y = _t(logits), _t(labels)
    loss = -(y * ops.clamp(ops.log(p), -100.0, None) +
             (1.0 - y) * ops.clamp(ops.log(1.0 - p), -100.0, None))
    if weight is not None:
        loss = loss * _t(weight)
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


def nll_loss(inputs, target, weight=None, ignore_index=-100, reduction="mean",
             label_smoothing=0.0):
    from zenith.nn.more import NLLLoss
    if label_smoothing:
        raise ValueError("nll_loss: label_smoothing is not supported")
    return NLLLoss(weight, ignore_index, reduction)(_t(inputs), _t(target))


def smooth_l1_loss(input, target, beta=1.0, reduction="none"):
    d = ops.abs(_t(input) - _t(target))
    loss = ops.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


def kl_div(logits, labels, reduction="mean"):
    """labels * (log(labels) - logits), reduced ('batchmean': sum / batch size)."""
    y = _t(labels)
    loss = xlogy(y, y) - y * _t(logits)
    if reduction == "batchmean":
        return loss.sum() / float(loss.shape[0])
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


# ---- linear algebra and distances

def dot(input, other):
    return ops.matmul(_t(input), _t(other))


def batch_dot(x1, x2, axes=None):
    if axes is not None:
        raise ValueError("batch_dot: only the default axes are supported")
    return (_t(x1) * _t(x2)).sum(-1, keepdims=True)


def ger(input, vec2):
    return _t(input).reshape((-1, 1)) * _t(vec2).reshape((1, -1))


def cdist(x1, x2, p=2.0):
    if p != 2.0:
        raise ValueError("cdist: only p=2 is supported")
    a, b = _t(x1), _t(x2)
    d = ops.unsqueeze(a, -2) - ops.unsqueeze(b, -3)
    return ops.sqrt((d * d).sum(-1))


# ---- tensor building and array operations

def fill(type, shape, value):
    return ops.full(shape, value, dtype=type)


def fills(x, value):
    return ops.full_like(_t(x), value)


def eye(n, m=None, dtype=None):
    out = Tensor(np.eye(n, m, dtype=np.float32))
    return out.astype(dtype) if dtype is not None else out


def linspace(start, end, steps):
    return Tensor(np.linspace(float(_np(start)), float(_np(end)), int(steps), dtype=np.float32))


def one_hot(indices, depth, on_value=1.0, off_value=0.0, axis=-1):
    eye_ = np.eye(int(depth), dtype=bool)[_np(indices).astype(np.int64)]
    out = np.where(eye_, _np(on_value), _np(off_value)).astype(np.float32)
    return Tensor(np.moveaxis(out, -1, axis))


def narrow(input, axis, start, length):
    x = _t(input)
    return x[(slice(None),) * (axis % x.ndim) + (slice(start, start + length),)]


def slice_(input_x, begin, size):
    import builtins
    x = _t(input_x)
    return x[tuple(builtins.slice(b, b + (s if s != -1 else x.shape[i] - b))
                   for i, (b, s) in enumerate(zip(begin, size)))]


def split(tensor, split_size_or_sections, axis=0):
    x = _t(tensor)
    n = x.shape[axis]
    if isinstance(split_size_or_sections, int):
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, axis, start, s))
        start += s
    return tuple(out)


def unstack(input_x, axis=0):
    x = _t(input_x)
    return tuple(ops.squeeze(p, axis) for p in split(x, 1, axis))


def tile(input, multiples):
    x = _t(input)
    multiples = tuple(multiples)
    x = x.reshape((1,) * (len(multiples) - x.ndim) + tuple(x.shape))
    for axis, m in enumerate(multiples):
        if m != 1:
            x = ops.cat([x] * m, axis)
    return x


def repeat_elements(x, rep, axis=0):
    x = _t(x)
    index = Tensor(np.repeat(np.arange(x.shape[axis]), rep).astype(np.int64))
    return ops.index_select(x, axis, index)


def diag(input):
    x = _t(input)
    n = x.shape[0]
    return ops.unsqueeze(x, 1) * Tensor(np.eye(n, dtype=np.float32)).astype(x.dtype)


def masked_select(input, mask):
    x = _t(input)
    m = np.broadcast_to(_np(mask).astype(bool), tuple(x.shape))
    flat = x.reshape((-1,))
    return ops.index_select(flat, 0, Tensor(np.flatnonzero(m).astype(np.int64)))


def top_k(input_x, k, sorted=True):
    x = _t(input_x)
    idx = np.argsort(-_np(x), axis=-1, kind="stable")[..., :k]
    index = Tensor(idx.astype(np.int64))
    return ops.gather_elements(x, -1, index), index.astype(int64)


def median(input, axis=-1, keepdims=False):
    x = _t(input)
    a = _np(x)
    n = a.shape[axis]
    idx = np.take(np.argsort(a, axis=axis, kind="stable"), [(n - 1) // 2], axis=axis)
    values = ops.gather_elements(x, axis, Tensor(idx.astype(np.int64)))
    index = Tensor(idx.astype(np.int64))
    if not keepdims:
        values, index = ops.squeeze(values, axis), ops.squeeze(index, axis)
    return values, index


def meshgrid(*inputs, indexing="xy"):
    arrays = inputs[0] if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)) else inputs
    xs = [_t(a) for a in arrays]
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and len(xs) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        pos = i
        if indexing == "xy" and len(xs) >= 2 and i < 2:
            pos = 1 - i
        view = [1] * len(xs)
        view[pos] = -1
        out.append(ops.broadcast_to(x.reshape(tuple(view)), tuple(shape)))
    return tuple(out)


def sequence_mask(lengths, maxlen=None):
    n = _np(lengths)
    maxlen = int(n.max()) if maxlen is None else int(maxlen)
    return Tensor(np.arange(maxlen) < n[..., None])


def count_nonzero(x, axis=(), keep_dims=False, dtype=None):
    a = _np(x)
    out = np.count_nonzero(a, axis=None if axis == () else axis)
    out = Tensor(np.asarray(out, np.int32))
    return out.astype(dtype) if dtype is not None else out


def nonzero(input):
    return Tensor(np.argwhere(_np(input)).astype(np.int64))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return Tensor(np.isclose(_np(input), _np(other), rtol, atol, equal_nan))


def approximate_equal(x, y, tolerance=1e-5):
    return ops.less(ops.abs(_t(x) - _t(y)), tolerance)


def intopk(x1, x2, k):
    top = np.argsort(-_np(x1), axis=-1, kind="stable")[:, :k]
    return Tensor((top == _np(x2)[:, None]).any(-1))


def shape(input_x):
    return tuple(_t(input_x).shape)


def size(input_x):
    return int(_t(input_x).size)


def rank(input_x):
    return int(_t(input_x).ndim)


def clip_by_global_norm(x, clip_norm=1.0, use_norm=None):
    total = ops.sqrt(addn([(g * g).sum() for g in x]))
    scale = clip_norm / ops.maximum(total, clip_norm)
    return tuple(g * scale for g in x)


def standard_normal(shape, seed=0, seed2=0):
    return ops.randn(*shape)


# ---- numpy (piecewise constant / integer results)

floor = _np_fn(np.floor)
ceil = _np_fn(np.ceil)
round_ = _np_fn(np.round)
trunc = _np_fn(np.trunc)
sign = _np_fn(np.sign)
bitwise_and = _np_fn(np.bitwise_and)
bitwise_or = _np_fn(np.bitwise_or)
bitwise_xor = _np_fn(np.bitwise_xor)
invert = _np_fn(np.invert)
logical_and = _np_fn(np.logical_and)
logical_or = _np_fn(np.logical_or)
truncate_div = _np_fn(lambda a, b: np.trunc(a / b).astype(np.result_type(a, b)))
truncate_mod = _np_fn(np.fmod)
population_count = _np_fn(lambda a: np.unpackbits(a.astype(np.uint8)[..., None],
                                                    axis=-1).sum(-1).astype(np.uint8))


def unique(input):
    values, inverse = np.unique(_np(input), return_inverse=True)
    return Tensor(values), Tensor(inverse.astype(np.int32))


def unique_consecutive(input, return_idx=False, return_counts=False, axis=None):
    a = _np(input).reshape(-1)
    keep = np.concatenate([[True], a[1:] != a[:-1]]) if a.size else np.array([], bool)
    out = [Tensor(a[keep])]
    if return_idx:
        out.append(Tensor((np.cumsum(keep) - 1).astype(np.int64)))
    if return_counts:
        starts = np.flatnonzero(keep)
        out.append(Tensor(np.diff(np.append(starts, a.size)).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


NAMES = [
    "asinh", "acosh", "atanh", "sinh", "cosh", "expm1", "log1p", "erfc", "logit", "xlogy",
    "xdivy", "lerp", "inv", "addn", "accumulate_n", "bias_add", "fast_gelu", "hardshrink",
    "soft_shrink", "prelu", "binary_cross_entropy", "nll_loss", "smooth_l1_loss", "kl_div",
    "dot", "batch_dot", "ger", "cdist", "fill", "fills", "eye", "linspace", "one_hot",
    "narrow", "slice", "split", "unstack", "tile", "repeat_elements", "diag", "masked_select",
    "top_k", "median", "meshgrid", "sequence_mask", "count_nonzero", "nonzero", "isclose",
    "approximate_equal", "intopk", "shape", "size", "rank", "clip_by_global_norm",
    "standard_normal", "floor", "ceil", "round", "trunc", "sign", "bitwise_and", "bitwise_or",
    "bitwise_xor", "invert", "logical_and", "logical_or", "truncate_div", "truncate_mod",
    "population_count", "unique", "unique_consecutive",
]


def install():
    for name in NAMES:
        fn = globals().get(name) or globals()[name + "_"]
        if fn.__doc__ is None or fn.__doc__.startswith(("Return", "Compute")):
            try:
                fn.__doc__ = f"mindspore.ops.{name}, on zenith.ops."
            except AttributeError:
                pass
        setattr(ops, name, fn)
        ops.__all__.append(name)
    ops.gather_d = ops.gather_elements
    ops.select = ops.where
    ops.gather_nd = _gather_nd
    ops.__all__ += ["gather_d", "select", "gather_nd"]


def _gather_nd(input_x, indices):
    """input_x at the index tuples in the last dimension of indices."""
    x = _t(input_x)
    idx = _np(indices).astype(np.int64)
    k = idx.shape[-1]
    flat_index = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), tuple(x.shape[:k]))
    flat = x.reshape((-1,) + tuple(x.shape[k:]))
    out = ops.index_select(flat, 0, Tensor(flat_index.reshape(-1)))
    return out.reshape(tuple(idx.shape[:-1]) + tuple(x.shape[k:]))


