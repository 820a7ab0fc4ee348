"""More mindspore.ops functions on zenith's cells and ops: 1-d/adaptive pooling, pad,
dropout2d, matrix diagonals and bands, segment sums, index_add, strided_slice, cummax/cummin,
random draws (normal, bernoulli, shuffle), iou, blackman_window, pdist, tensor_dot,
assign_add/sub, print_, and vjp/jacrev on zenith.grad."""

import numpy as np

from zenith import nn, ops
from zenith._ms_ops import _np, assign
from zenith._tensor import Tensor, _as_tensor, int64


def adaptive_avg_pool1d(input, output_size):
    return nn.AdaptiveAvgPool1d(output_size)(_as_tensor(input))


def adaptive_max_pool1d(input, output_size):
    return nn.AdaptiveMaxPool1d(output_size)(_as_tensor(input))


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return nn.AdaptiveMaxPool2d(output_size, return_indices)(_as_tensor(input))


def avg_pool1d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False,
               count_include_pad=True):
    if padding or ceil_mode:
        raise ValueError("avg_pool1d: padding and ceil_mode are not supported")
    return nn.AvgPool1d(kernel_size, stride)(_as_tensor(input_x))


def pad(input_x, padding, mode="constant", value=None):
    """PyTorch-style padding of the last dimensions: (left, right, top, bottom, ...)."""
    x = _as_tensor(input_x)
    if mode == "constant":
        return nn.ConstantPad3d(tuple(padding), value or 0.0)(x) if len(padding) == 6 else (
            nn.ConstantPad2d(tuple(padding), value or 0.0)(x) if len(padding) == 4 else
            nn.ConstantPad1d(tuple(padding), value or 0.0)(x))
    if mode == "reflect":
        return (nn.ReflectionPad2d if len(padding) == 4 else nn.ReflectionPad1d)(
            tuple(padding))(x)
    raise ValueError(f"pad: mode {mode!r} is not supported (constant, reflect)")


def dropout2d(input, p=0.5, training=True):
    cell = nn.Dropout2d(p)
    cell.set_train(training)
    return cell(_as_tensor(input))


def matrix_diag(x, k=0, num_rows=-1, num_cols=-1, padding_value=0, align="RIGHT_LEFT"):
    return nn.MatrixDiag()(_as_tensor(x))


def matrix_diag_part(x, k=0, padding_value=0, align="RIGHT_LEFT"):
    return nn.MatrixDiagPart()(_as_tensor(x))


def matrix_set_diag(x, diagonal, k=0, align="RIGHT_LEFT"):
    return nn.MatrixSetDiag()(_as_tensor(x), _as_tensor(diagonal))


def matrix_band_part(x, lower, upper):
    """x with entries outside the band (lower below, upper above the diagonal; -1: all)
    zeroed."""
    x = _as_tensor(x)
    m, n = x.shape[-2], x.shape[-1]
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    return x * Tensor(keep.astype(np.float32)).astype(x.dtype)


def unsorted_segment_sum(input_x, segment_ids, num_segments):
    from zenith._ms_prims2 import _unsorted_segment_sum
    return _unsorted_segment_sum(input_x, segment_ids, num_segments)


def index_add(x, indices, y, axis, use_lock=True, check_index_bound=True):
    """x with y's slices added at indices along axis (repeated indices accumulate)."""
    x, y = _as_tensor(x), _as_tensor(y)
    idx = _np(indices).astype(np.int64)
    n = x.shape[axis]
    onehot = Tensor((np.arange(n)[:, None] == idx[None, :]).astype(np.float32)).astype(x.dtype)
    moved = ops.transpose(y, (axis,) + tuple(i for i in range(y.ndim) if i != axis))
    added = ops.matmul(onehot, moved.reshape((len(idx), -1))).reshape(
        (n,) + tuple(moved.shape[1:]))
    back = list(range(1, y.ndim))
    back.insert(axis, 0)
    return x + ops.transpose(added, tuple(back))


def strided_slice(input_x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0):
    if any((begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)):
        raise ValueError("strided_slice: the masks are not supported")
    x = _as_tensor(input_x)
    for axis, (b, e, s) in enumerate(zip(begin, end, strides)):
        idx = np.arange(x.shape[axis])[b:e:s]
        x = ops.index_select(x, axis, Tensor(idx.astype(np.int64)))
    return x


def _cum(x, axis, better):
    x = _as_tensor(x)
    a = np.moveaxis(_np(x), axis, -1)
    idx = np.zeros(a.shape, np.int64)
    best = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        take = better(a[..., k], best) | (a[..., k] == best)
        best = np.where(take, a[..., k], best)
        idx[..., k] = np.where(take, k, idx[..., k - 1])
    index = Tensor(np.moveaxis(idx, -1, axis))
    return ops.gather_elements(x, axis, index), index.astype(int64)


def cummax(input, axis):
    """(running maxima along axis, their indices: the last of equal ones)."""
    return _cum(input, axis, np.greater)


def cummin(input, axis):
    """(running minima along axis, their indices: the last of equal ones)."""
    return _cum(input, axis, np.less)


def normal(shape, mean, stddev, seed=None):
    return ops.randn(*shape) * _as_tensor(stddev) + _as_tensor(mean)


def bernoulli(input, p=0.5, seed=None):
    x = _as_tensor(input)
    prob = _as_tensor(p) if not isinstance(p, (int, float)) else p
    return ops.less(ops.rand(*x.shape), prob).astype(x.dtype)


def shuffle(x, seed=None):
    x = _as_tensor(x)
    perm = np.argsort(_np(ops.rand(x.shape[0])))
    return ops.index_select(x, 0, Tensor(perm.astype(np.int64)))


def iou(anchor_boxes, gt_boxes, mode="iou"):
    """[N, M] overlaps of boxes (x1, y1, x2, y2) (MindSpore adds 1 to widths and heights):
    intersection over union ('iou') or over the ground-truth area ('iof')."""
    a, g = _np(anchor_boxes).astype(np.float64), _np(gt_boxes).astype(np.float64)
    area = lambda b: (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)  # noqa: E731
    lt = np.maximum(a[:, None, :2], g[None, :, :2])
    rb = np.minimum(a[:, None, 2:], g[None, :, 2:])
    wh = np.clip(rb - lt + 1, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    if mode == "iof":
        out = inter / area(g)[None, :]
    else:
        out = inter / (area(a)[:, None] + area(g)[None, :] - inter)
    return Tensor(out.T.astype(np.float32))


def blackman_window(window_length, periodic=True, dtype=None):
    n = int(window_length)
    m = n + 1 if periodic else n
    w = np.blackman(m)[:n].astype(np.float32)
    out = Tensor(w)
    return out.astype(dtype) if dtype is not None else out


def pdist(input, p=2.0):
    """Distances between the rows of input [N, M], the upper triangle in row order."""
    if p != 2.0:
        raise ValueError("pdist: only p=2 is supported")
    x = _as_tensor(input)
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    a = ops.index_select(x, 0, Tensor(i.astype(np.int64)))
    b = ops.index_select(x, 0, Tensor(j.astype(np.int64)))
    return ops.sqrt(((a - b) * (a - b)).sum(-1))


def tensor_dot(x1, x2, axes):
    """Contraction of x1's axes[0] with x2's axes[1] (an int n: the last n of x1 and first n
    of x2)."""
    a, b = _as_tensor(x1), _as_tensor(x2)
    if isinstance(axes, int):
        axes = (list(range(a.ndim - axes, a.ndim)), list(range(axes)))
    ax1 = [x % a.ndim for x in (axes[0] if isinstance(axes[0], (list, tuple)) else [axes[0]])]
    ax2 = [x % b.ndim for x in (axes[1] if isinstance(axes[1], (list, tuple)) else [axes[1]])]
    free1 = [i for i in range(a.ndim) if i not in ax1]
    free2 = [i for i in range(b.ndim) if i not in ax2]
    k = int(np.prod([a.shape[i] for i in ax1]))
    am = ops.transpose(a, tuple(free1 + ax1)).reshape((-1, k))
    bm = ops.transpose(b, tuple(ax2 + free2)).reshape((k, -1))
    return ops.matmul(am, bm).reshape(tuple(a.shape[i] for i in free1) +
                                      tuple(b.shape[i] for i in free2))


def assign_add(variable, value):
    return assign(variable, variable + _as_tensor(value))


def assign_sub(variable, value):
    return assign(variable, variable - _as_tensor(value))


def print_(*input_x):
    print(*input_x)
    return Tensor(0)


def vjp(fn, *inputs, has_aux=False):
    """(fn(*inputs), vjp_fn): vjp_fn(v) gives the vector-Jacobian products with v for each
    input, through zenith.grad."""
    from zenith._grad import grad
    outputs = fn(*inputs)

    def vjp_fn(v):
        positions = tuple(range(len(inputs)))
        g = grad(lambda *xs: ((fn(*xs)[0] if has_aux else fn(*xs)) * v).sum(),
                 positions)(*inputs)
        return g if isinstance(g, tuple) else (g,)

    return outputs, vjp_fn


def jacrev(fn, grad_position=0, has_aux=False):
    """The Jacobian of fn with respect to input grad_position, by one vjp per output element."""
    def jac(*inputs):
        out = fn(*inputs)
        flat = int(np.prod(out.shape)) if out.shape else 1
        rows = []
        _, vjp_fn = vjp(fn, *inputs)
        for k in range(flat):
            e = np.zeros(flat, np.float32)
            e[k] = 1.0
            rows.append(vjp_fn(Tensor(e.reshape(out.shape)))[grad_position])
        jacobian = ops.stack(rows, 0)
        return jacobian.reshape(tuple(out.shape) + tuple(inputs[grad_position].shape))
    return jac


NAMES = ["adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d",
         "pad", "dropout2d", "matrix_diag", "matrix_diag_part", "matrix_set_diag",
         "matrix_band_part", "unsorted_segment_sum", "index_add", "strided_slice", "cummax",
         "cummin", "normal", "bernoulli", "shuffle", "iou", "blackman_window", "pdist",
         "tensor_dot", "assign_add", "assign_sub", "print_", "vjp", "jacrev"]


def install():
    for name in NAMES:
        fn = globals()[name]
        if fn.__doc__ is None:
            fn.__doc__ = f"mindspore.ops.{name}, on zenith."
        setattr(ops, name, fn)
        ops.__all__.append(name)
    ops.range = lambda start, limit, delta: Tensor(np.arange(start, limit, delta))
    ops.range.__doc__ = "start, start + delta, ... below limit (mindspore.ops.range)."
    ops.__all__.append("range")
