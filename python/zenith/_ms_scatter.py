"""mindspore.ops scatters, in-place row updates, segment reductions and space/depth/batch
rearrangements.

scatter_nd and the tensor_scatter add/sub/update forms are a one-hot matmul, so gradients flow
to both the tensor and the updates; the max/min/mul/div forms, the in-place scatter_* on a
Parameter and the segment reductions run on numpy (their values apply duplicates in order).
"""

import numpy as np

from zenith import nn, ops
from zenith._ms_ops import _np, assign
from zenith._tensor import Tensor, _as_tensor


def _linear_index(indices, shape):
    """Flat positions into shape[:k] of the (..., k) index tuples."""
    idx = _np(indices).astype(np.int64)
    k = idx.shape[-1]
    return np.ravel_multi_index(tuple(np.moveaxis(idx.reshape(-1, k), -1, 0)),
                                tuple(shape[:k]), mode="raise"), k


def scatter_nd(indices, updates, shape):
    """Zeros of shape with updates added at the (..., k) index tuples."""
    u = _as_tensor(updates)
    shape = tuple(int(s) for s in shape)
    pos, k = _linear_index(indices, shape)
    cells = int(np.prod(shape[:k]))
    onehot = np.zeros((cells, len(pos)), u.asnumpy().dtype)
    onehot[pos, np.arange(len(pos))] = 1
    rest = int(np.prod(shape[k:]))
    return ops.matmul(Tensor(onehot), u.reshape(len(pos), rest)).reshape(shape)


def _mask(indices, shape, dtype):
    return Tensor((_np(scatter_nd(indices, np.ones(
        _np(indices).shape[:-1] + tuple(shape[_np(indices).shape[-1]:]), dtype), shape)) > 0)
        .astype(dtype))


def tensor_scatter_add(input_x, indices, updates):
    x = _as_tensor(input_x)
    return x + scatter_nd(indices, _as_tensor(updates, x.dtype), x.shape)


def tensor_scatter_sub(input_x, indices, updates):
    x = _as_tensor(input_x)
    return x - scatter_nd(indices, _as_tensor(updates, x.dtype), x.shape)


def tensor_scatter_update(input_x, indices, updates):
    """input_x with the entries at indices replaced (indices unique)."""
    x = _as_tensor(input_x)
    keep = 1.0 - _mask(indices, x.shape, x.asnumpy().dtype)
    return x * keep + scatter_nd(indices, _as_tensor(updates, x.dtype), x.shape)


def _np_scatter_nd(ufunc):
    def run(input_x, indices, updates):
        a = _np(input_x).copy()
        idx = _np(indices).astype(np.int64)
        k = idx.shape[-1]
        u = _np(updates).reshape(-1, *a.shape[k:])
        ufunc.at(a, tuple(np.moveaxis(idx.reshape(-1, k), -1, 0)), u)
        return Tensor(a)
    return run


def _divide_at(a, where, u):
    np.multiply.at(a, where, 1.0 / u)


class _Div:
    at = staticmethod(_divide_at)


tensor_scatter_max = _np_scatter_nd(np.maximum)
tensor_scatter_min = _np_scatter_nd(np.minimum)
tensor_scatter_mul = _np_scatter_nd(np.multiply)
tensor_scatter_div = _np_scatter_nd(_Div)


def tensor_scatter_elements(input_x, indices, updates, axis=0, reduction="none"):
    """input_x with updates written (or added, reduction='add') at indices along axis."""
    a = _np(input_x).copy()
    idx, u = _np(indices).astype(np.int64), _np(updates)
    full = list(np.indices(idx.shape, sparse=True))
    full[axis] = idx
    if reduction == "add":
        np.add.at(a, tuple(full), u)
    elif reduction == "none":
        a[tuple(full)] = u
    else:
        raise ValueError(f"tensor_scatter_elements: reduction must be 'none' or 'add', "
                         f"got {reduction!r}")
    return Tensor(a)


def _rows(ufunc, name):
    """In-place scatter of update rows into a Parameter along axis 0 (scatter_add & co.)."""
    def run(input_x, indices, updates, *_):
        a = _np(input_x).copy()
        ufunc.at(a, _np(indices).astype(np.int64), _np(updates).astype(a.dtype))
        return assign(input_x, Tensor(a))
    run.__name__ = name
    return run


class _Set:
    @staticmethod
    def at(a, where, u):
        a[where] = u


class _Sub:
    @staticmethod
    def at(a, where, u):
        np.subtract.at(a, where, u)


scatter_add = _rows(np.add, "scatter_add")
scatter_sub = _rows(_Sub, "scatter_sub")
scatter_mul = _rows(np.multiply, "scatter_mul")
scatter_div = _rows(_Div, "scatter_div")
scatter_max = _rows(np.maximum, "scatter_max")
scatter_min = _rows(np.minimum, "scatter_min")
scatter_update = _rows(_Set, "scatter_update")


def _nd_rows(ufunc, name):
    """In-place scatter of updates at (..., k) index tuples into a Parameter."""
    def run(input_x, indices, updates, *_):
        return assign(input_x, _np_scatter_nd(ufunc)(input_x, indices, updates))
    run.__name__ = name
    return run


scatter_nd_add = _nd_rows(np.add, "scatter_nd_add")
scatter_nd_sub = _nd_rows(_Sub, "scatter_nd_sub")
scatter_nd_mul = _nd_rows(np.multiply, "scatter_nd_mul")
scatter_nd_div = _nd_rows(_Div, "scatter_nd_div")
scatter_nd_max = _nd_rows(np.maximum, "scatter_nd_max")
scatter_nd_min = _nd_rows(np.minimum, "scatter_nd_min")
scatter_nd_update = _nd_rows(_Set, "scatter_nd_update")


def _inplace(op):
    def run(x, v, indices):
        a = _np(x).copy()
        rows = np.atleast_1d(np.asarray(indices, np.int64))
        v = _np(v).reshape(len(rows), *a.shape[1:])
        for r, row in zip(rows, v):
            a[r] = op(a[r], row)
        return Tensor(a)
    return run


inplace_add = _inplace(lambda old, new: old + new)
inplace_sub = _inplace(lambda old, new: old - new)
inplace_update = _inplace(lambda old, new: new)


def index_fill(x, axis, index, value):
    """x with the slices at index along axis set to value (differentiable in x)."""
    x = _as_tensor(x)
    shape = [1] * len(x.shape)
    shape[axis] = x.shape[axis]
    hit = np.zeros(x.shape[axis], bool)
    hit[np.atleast_1d(_np(index)).astype(np.int64)] = True
    mask = Tensor(np.broadcast_to(hit.reshape(shape), tuple(x.shape)).copy())
    return ops.masked_fill(x, mask, float(_np(value)))


def reverse_sequence(x, seq_lengths, seq_dim, batch_dim=0):
    """Each batch entry's first seq_lengths[b] steps along seq_dim reversed."""
    a = _np(x)
    out = a.copy()
    for b, n in enumerate(_np(seq_lengths).astype(np.int64)):
        src = [slice(None)] * a.ndim
        src[batch_dim], src[seq_dim] = b, slice(None, int(n))
        dst = list(src)
        piece = np.flip(a[tuple(src)], axis=seq_dim - (1 if batch_dim < seq_dim else 0))
        out[tuple(dst)] = piece
    return Tensor(out)


def _segments(ufunc, fill):
    def run(x, segment_ids, num_segments):
        a = _np(x)
        out = np.full((int(num_segments),) + a.shape[_np(segment_ids).ndim:], fill(a.dtype),
                      a.dtype)
        ids = _np(segment_ids).reshape(-1)
        ufunc.at(out, ids, a.reshape(len(ids), *out.shape[1:]))
        return Tensor(out)
    return run


def _lowest(dt):
    return np.finfo(dt).min if np.issubdtype(dt, np.floating) else np.iinfo(dt).min


def _highest(dt):
    return np.finfo(dt).max if np.issubdtype(dt, np.floating) else np.iinfo(dt).max


unsorted_segment_max = _segments(np.maximum, _lowest)
unsorted_segment_min = _segments(np.minimum, _highest)
unsorted_segment_prod = _segments(np.multiply, lambda dt: 1)


def sparse_segment_mean(x, indices, segment_ids):
    """Mean of x's rows at indices, per segment id (empty segments 0)."""
    a = _np(x)
    rows = a[_np(indices).astype(np.int64)]
    ids = _np(segment_ids).astype(np.int64)
    n = int(ids.max()) + 1 if len(ids) else 0
    total = np.zeros((n,) + a.shape[1:], a.dtype)
    np.add.at(total, ids, rows)
    count = np.bincount(ids, minlength=n).reshape((n,) + (1,) * (a.ndim - 1))
    return Tensor((total / np.maximum(count, 1)).astype(a.dtype))


def unique_with_pad(x, pad_num):
    """(unique values in order of appearance, padded with pad_num to x's length; index of each
    entry of x among them)."""
    a = _np(x)
    values, first, inverse = np.unique(a, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    out = np.full(a.shape, pad_num, a.dtype)
    out[:len(values)] = values[order]
    return Tensor(out), Tensor(rank[inverse].astype(np.int32))


def space_to_depth(x, block_size):
    """(N, C, H, W) -> (N, C b^2, H/b, W/b): each b x b block becomes channels (differentiable)."""
    x, b = _as_tensor(x), int(block_size)
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


def depth_to_space(x, block_size):
    """(N, C b^2, H, W) -> (N, C, H b, W b): the inverse of space_to_depth."""
    x, b = _as_tensor(x), int(block_size)
    n, c, h, w = x.shape
    y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


def space_to_batch_nd(input_x, block_shape, paddings):
    """(N, C, H, W), padded, -> (N b0 b1, C, H'/b0, W'/b1), block offsets outermost."""
    x = _as_tensor(input_x)
    (b0, b1) = (block_shape, block_shape) if isinstance(block_shape, int) else block_shape
    (top, bottom), (left, right) = paddings
    if top or bottom or left or right:
        x = nn.ConstantPad2d((left, right, top, bottom), 0.0)(x)
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b0, b0, w // b1, b1).transpose(3, 5, 0, 1, 2, 4)
    return y.reshape(b0 * b1 * n, c, h // b0, w // b1)


def batch_to_space_nd(input_x, block_shape, crops):
    """The inverse of space_to_batch_nd, then crops [[top, bottom], [left, right]] removed."""
    x = _as_tensor(input_x)
    (b0, b1) = (block_shape, block_shape) if isinstance(block_shape, int) else block_shape
    nb, c, h, w = x.shape
    n = nb // (b0 * b1)
    y = x.reshape(b0, b1, n, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n, c, h * b0, w * b1)
    (top, bottom), (left, right) = crops
    return y[:, :, top:h * b0 - bottom, left:w * b1 - right]


NAMES = ["scatter_nd", "tensor_scatter_add", "tensor_scatter_sub", "tensor_scatter_update",
         "tensor_scatter_max", "tensor_scatter_min", "tensor_scatter_mul", "tensor_scatter_div",
         "tensor_scatter_elements", "scatter_add", "scatter_sub", "scatter_mul", "scatter_div",
         "scatter_max", "scatter_min", "scatter_update", "scatter_nd_add", "scatter_nd_sub",
         "scatter_nd_mul", "scatter_nd_div", "scatter_nd_max", "scatter_nd_min",
         "scatter_nd_update", "inplace_add", "inplace_sub", "inplace_update", "index_fill",
         "reverse_sequence", "unsorted_segment_max", "unsorted_segment_min",
         "unsorted_segment_prod", "sparse_segment_mean", "unique_with_pad", "space_to_depth",
         "depth_to_space", "space_to_batch_nd", "batch_to_space_nd"]


def install():
    for name in NAMES:
        setattr(ops, name, globals()[name])
