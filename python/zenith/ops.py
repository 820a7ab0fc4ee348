"""zenith.ops: functional ops with MindSpore's names (mindspore.ops), on the C++ ops.

Every function takes Tensors (numpy arrays, numbers and sequences are converted) and returns
Tensors; gradients flow through all of them except the comparisons, argmax/argmin and casts to
integer types. The GIL is released while the C++ op runs.
"""

import builtins

from zenith import _zenith as _C
from zenith._tensor import (Tensor, _as_tensor, _pair, bool_, float32, int32, int64,
                            _argmin_cpp)

__all__ = [
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "exp", "log", "sqrt",
    "rsqrt", "abs", "tanh", "sigmoid", "relu", "gelu", "silu", "square", "erf", "cast",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "where",
    "masked_fill", "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std",
    "matmul", "dense", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
    "batch_norm", "layer_norm", "rms_norm", "dropout", "softmax", "log_softmax",
    "cross_entropy", "mse_loss", "embedding", "cat", "concat", "stack", "index_select",
    "gather", "gather_elements", "reshape", "transpose", "permute", "flatten", "squeeze",
    "unsqueeze", "expand_dims", "broadcast_to", "zeros", "ones", "full", "zeros_like",
    "ones_like", "full_like", "arange", "randn", "rand", "randint", "uniform", "clamp", "clip",
    "stop_gradient", "grad", "value_and_grad",
]


def _binary(op, input, other):
    a, b = _pair(_as_tensor(input) if not isinstance(input, (bool, int, float)) else input,
                 _as_tensor(other) if not isinstance(other, (bool, int, float)) else other)
    return op(a, b)


# ---- elementwise arithmetic (broadcasting, type promotion)


def add(input, other):
    """input + other, broadcast."""
    return _binary(_C.ops.add, input, other)


def sub(input, other):
    """input - other, broadcast."""
    return _binary(_C.ops.sub, input, other)


def mul(input, other):
    """input * other, broadcast."""
    return _binary(_C.ops.mul, input, other)


def div(input, other, *, rounding_mode=None):
    """input / other, broadcast; integer inputs give float32 (true division)."""
    if rounding_mode is not None:
        raise ValueError("ops.div: rounding_mode is not supported")
    a, b = _pair(_as_tensor(input) if not isinstance(input, (bool, int, float)) else input,
                 _as_tensor(other) if not isinstance(other, (bool, int, float)) else other)
    if not a.dtype.is_floating_point and not b.dtype.is_floating_point:
        a, b = a.astype(float32), b.astype(float32)
    return _C.ops.div(a, b)


def pow(input, exponent):
    """input ** exponent (a tensor or a number)."""
    if isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
        return _C.ops.pow_scalar(_as_tensor(input), float(exponent))
    return _binary(_C.ops.pow, input, exponent)


def maximum(input, other):
    """Elementwise maximum, broadcast."""
    return _binary(_C.ops.maximum, input, other)


def minimum(input, other):
    """Elementwise minimum, broadcast."""
    return _binary(_C.ops.minimum, input, other)


def neg(input):
    """-input."""
    return _C.ops.neg(_as_tensor(input))


def exp(input):
    """e ** input."""
    return _C.ops.exp(_as_tensor(input))


def log(input):
    """Natural logarithm."""
    return _C.ops.log(_as_tensor(input))


def sqrt(x):
    """Square root."""
    return _C.ops.sqrt(_as_tensor(x))


def rsqrt(input):
    """1 / sqrt(input)."""
    return _C.ops.rsqrt(_as_tensor(input))


def abs(input):
    """Absolute value."""
    return _C.ops.abs(_as_tensor(input))


def tanh(input):
    """Hyperbolic tangent."""
    return _C.ops.tanh(_as_tensor(input))


def sigmoid(input):
    """1 / (1 + exp(-input))."""
    return _C.ops.sigmoid(_as_tensor(input))


def relu(input):
    """max(input, 0)."""
    return _C.ops.relu(_as_tensor(input))


def gelu(input, approximate="none"):
    """GELU: x * Phi(x); approximate='tanh' uses the tanh formula."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"ops.gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _C.ops.gelu(_as_tensor(input), approximate == "tanh")


def silu(input):
    """x * sigmoid(x)."""
    return _C.ops.silu(_as_tensor(input))


def square(input):
    """input * input."""
    return _C.ops.square(_as_tensor(input))


def erf(input):
    """The error function."""
    return _C.ops.erf(_as_tensor(input))


def cast(input, dtype):
    """input converted to dtype (differentiable between floating types)."""
    return _as_tensor(input).astype(dtype)


# ---- comparisons (bool results, no gradient) and selection


def equal(input, other):
    """input == other, elementwise."""
    return _binary(_C.ops.eq, input, other)


def not_equal(input, other):
    """input != other, elementwise."""
    return _binary(_C.ops.ne, input, other)


def less(input, other):
    """input < other, elementwise."""
    return _binary(_C.ops.lt, input, other)


def less_equal(input, other):
    """input <= other, elementwise."""
    return _binary(_C.ops.le, input, other)


def greater(input, other):
    """input > other, elementwise."""
    return _binary(_C.ops.gt, input, other)


def greater_equal(input, other):
    """input >= other, elementwise."""
    return _binary(_C.ops.ge, input, other)


def where(condition, input, other):
    """input where condition (a bool tensor) holds, else other; broadcast."""
    a, b = _pair(_as_tensor(input) if not isinstance(input, (bool, int, float)) else input,
                 _as_tensor(other) if not isinstance(other, (bool, int, float)) else other)
    return _C.ops.where(_as_tensor(condition), a, b)


def masked_fill(input_x, mask, value):
    """input_x with value where mask (bool, broadcast) is True."""
    return _C.ops.masked_fill(_as_tensor(input_x), _as_tensor(mask), float(value))


# ---- reductions


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over dim (int, tuple or None for all)."""
    return _as_tensor(input).sum(dim, dtype, keepdim)


def mean(input, axis=None, keep_dims=False):
    """Mean over axis (int, tuple or None for all)."""
    return _as_tensor(input).mean(axis, keep_dims)


def max(input, axis=None, keepdims=False, *, initial=None, where=None):
    """(values, indices) of the maximum along axis (None: over all elements)."""
    return _as_tensor(input).max(axis, keepdims, initial=initial, where=where,
                                 return_indices=True)


def min(input, axis=None, keepdims=False, *, initial=None, where=None):
    """(values, indices) of the minimum along axis (None: over all elements)."""
    return _as_tensor(input).min(axis, keepdims, initial=initial, where=where,
                                 return_indices=True)


def amax(input, axis=None, keepdims=False):
    """Maximum values along axis (None: over all elements)."""
    return _as_tensor(input).max(axis, keepdims)


def amin(input, axis=None, keepdims=False):
    """Minimum values along axis (None: over all elements)."""
    return _as_tensor(input).min(axis, keepdims)


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum along dim (None: of the flattened input), int64."""
    return _as_tensor(input).argmax(dim, keepdim)


def argmin(input, axis=None, keepdims=False):
    """Index of the minimum along axis (None: of the flattened input), int64."""
    return _as_tensor(input).argmin(axis, keepdims)


def var(input, axis=None, ddof=0, keepdims=False):
    """Variance along axis; ddof 0 (population) or 1 (sample)."""
    return _as_tensor(input).var(axis, ddof, keepdims)


def std(input, axis=None, ddof=0, keepdims=False):
    """Standard deviation along axis; ddof 0 or 1."""
    return _as_tensor(input).std(axis, ddof, keepdims)


# ---- linear algebra, convolution, pooling


def matmul(input, other):
    """Matrix product with numpy's rules ([.., n, k] x [.., k, m], batch dims broadcast)."""
    return _C.ops.matmul(_as_tensor(input), _as_tensor(other))


def dense(input, weight, bias=None):
    """input @ weight.T + bias: input [.., in], weight [out, in], bias [out]."""
    return _C.ops.linear(_as_tensor(input), _as_tensor(weight),
                         None if bias is None else _as_tensor(bias))


def _pair2(v, name):
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    if len(v) == 4 and v[0] == v[1] and v[2] == v[3]:  # (top, bottom, left, right)
        return [v[0], v[2]]
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair, got {v}")
    return v


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1,
           groups=1):
    """2-d convolution, NCHW: input [N, C, H, W], weight [O, C/groups, kH, kW], bias [O].
    pad_mode: 'valid', 'same' or 'pad' (with padding)."""
    if pad_mode not in ("valid", "same", "pad"):
        raise ValueError(f"ops.conv2d: pad_mode must be 'valid', 'same' or 'pad', got {pad_mode!r}")
    mode = "explicit" if pad_mode == "pad" else pad_mode
    return _C.ops.conv2d(_as_tensor(input), _as_tensor(weight),
                         None if bias is None else _as_tensor(bias), _pair2(stride, "stride"),
                         _pair2(padding, "padding"), mode, _pair2(dilation, "dilation"), groups)


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """Max pooling over NCHW windows; stride defaults to kernel_size."""
    k = _pair2(kernel_size, "kernel_size")
    return _C.ops.max_pool2d(_as_tensor(x), k, k if stride is None else _pair2(stride, "stride"),
                             _pair2(padding, "padding"))


def avg_pool2d(input, kernel_size=1, stride=1, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Average pooling over NCHW windows."""
    if ceil_mode or divisor_override is not None:
        raise ValueError("ops.avg_pool2d: ceil_mode and divisor_override are not supported")
    return _C.ops.avg_pool2d(_as_tensor(input), _pair2(kernel_size, "kernel_size"),
                             _pair2(stride, "stride"), _pair2(padding, "padding"),
                             count_include_pad)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to an output of output_size (int or (h, w))."""
    return _C.ops.adaptive_avg_pool2d(_as_tensor(input), _pair2(output_size, "output_size"))


# ---- normalisation, dropout


def batch_norm(input_x, running_mean, running_var, weight, bias, training=False, momentum=0.1,
               eps=1e-5):
    """Batch normalisation over NCHW (or NC) input; in training, uses the batch statistics
    and updates running_mean/var in place (running = (1 - momentum) running + momentum batch)."""
    t = lambda v: None if v is None else _as_tensor(v)
    return _C.ops.batch_norm(_as_tensor(input_x), t(weight), t(bias), t(running_mean),
                             t(running_var), training, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalises over the last len(normalized_shape) dims, then weight * x + bias."""
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    t = lambda v: None if v is None else _as_tensor(v)
    return _C.ops.layer_norm(_as_tensor(input), shape, t(weight), t(bias), eps)


def rms_norm(input, weight=None, epsilon=1e-6):
    """x / sqrt(mean(x^2, last dim) + epsilon) * weight."""
    x = _as_tensor(input)
    return _C.ops.rms_norm(x, [x.shape[-1]], None if weight is None else _as_tensor(weight),
                           epsilon)


def dropout(input, p=0.5, training=True, seed=None):
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p) when training."""
    return _C.ops.dropout(_as_tensor(input), p, training)


# ---- softmax and losses


def softmax(input, axis=-1):
    """exp(x) / sum(exp(x)) along axis."""
    return _C.ops.softmax(_as_tensor(input), axis)


def log_softmax(logits, axis=-1):
    """log(softmax(logits)) along axis, computed stably."""
    return _C.ops.log_softmax(_as_tensor(logits), axis)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy of logits input [N, C] against class indices [N] (int) or probabilities
    [N, C] (float); reduction 'mean', 'sum' or 'none'."""
    if weight is not None:
        raise ValueError("ops.cross_entropy: class weights are not supported")
    return _C.ops.cross_entropy(_as_tensor(input), _as_tensor(target), reduction, ignore_index,
                                label_smoothing)


def mse_loss(input, target, reduction="mean"):
    """Mean squared error; reduction 'mean', 'sum' or 'none'."""
    return _C.ops.mse_loss(_as_tensor(input), _as_tensor(target), reduction)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False):
    """Rows of weight [V, D] at the integer indices input: [..] -> [.., D]."""
    if padding_idx is not None or max_norm is not None or scale_grad_by_freq:
        raise ValueError("ops.embedding: padding_idx, max_norm and scale_grad_by_freq are not "
                         "supported")
    return _C.ops.embedding(_as_tensor(weight), _as_tensor(input))


# ---- joining, indexing and shapes


def cat(tensors, axis=0):
    """Concatenates along axis."""
    return _C.ops.cat([_as_tensor(t) for t in tensors], axis)


concat = cat


def stack(tensors, axis=0):
    """Stacks along a new axis."""
    return _C.ops.stack([_as_tensor(t) for t in tensors], axis)


def index_select(input, axis, index):
    """Entries at the int indices `index` along axis."""
    return _C.ops.index_select(_as_tensor(input), axis, _as_tensor(index))


def gather(input_params, input_indices, axis, batch_dims=0):
    """MindSpore's gather: slices of input_params at input_indices along axis (any index shape:
    the result has shape params[:axis] + indices.shape + params[axis + 1:])."""
    if batch_dims != 0:
        raise ValueError("ops.gather: batch_dims is not supported")
    # builtins.slice: zenith.ops.slice is MindSpore's ops.slice (installed by _ms_functions).
    params = _as_tensor(input_params)
    return params[(builtins.slice(None),) * (axis % params.ndim) + (_as_tensor(input_indices),)]


def gather_elements(input, dim, index):
    """out[i][j] = input[index[i][j]][j] for dim 0 (torch.gather)."""
    return _C.ops.gather(_as_tensor(input), dim, _as_tensor(index))


def reshape(input, shape):
    """A view (or copy) with the given shape; one -1 is inferred."""
    return _as_tensor(input).reshape(*shape)


def transpose(input, input_perm):
    """Permutes the dims of input by input_perm."""
    return _as_tensor(input).permute(*input_perm)


def permute(input, axis):
    """Permutes the dims of input by axis."""
    return _as_tensor(input).permute(*axis)


def flatten(input, order="C", *, start_dim=1, end_dim=-1):
    """Flattens dims start_dim..end_dim (MindSpore's default keeps the batch dim)."""
    return _as_tensor(input).flatten(order, start_dim=start_dim, end_dim=end_dim)


def squeeze(input, axis=None):
    """Removes size-1 dims (all, or those in axis)."""
    return _as_tensor(input).squeeze(axis)


def unsqueeze(input, dim):
    """Inserts a size-1 dim at dim."""
    return _as_tensor(input).unsqueeze(dim)


def expand_dims(input_x, axis):
    """Inserts a size-1 dim at axis."""
    return _as_tensor(input_x).unsqueeze(axis)


def broadcast_to(input, shape):
    """A broadcast view of input with the given shape (-1 keeps a size)."""
    return _as_tensor(input).broadcast_to(list(shape))


# ---- creation


def _shape(size):
    if isinstance(size, int):
        return [size]
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return list(size[0])
    return list(size)


def zeros(size, dtype=None):
    """A tensor of zeros (float32 by default)."""
    return _C._zeros(_shape(size), float32 if dtype is None else dtype)


def ones(shape, dtype=None):
    """A tensor of ones (float32 by default)."""
    return _C._full(_shape(shape), 1.0, float32 if dtype is None else dtype)


def full(size, fill_value, *, dtype=None):
    """A tensor filled with fill_value (dtype from fill_value by default)."""
    if dtype is None:
        dtype = bool_ if isinstance(fill_value, bool) else (
            int64 if isinstance(fill_value, int) else float32)
    return _C._full(_shape(size), float(fill_value), dtype)


def zeros_like(input, *, dtype=None):
    """Zeros with input's shape (and dtype)."""
    x = _as_tensor(input)
    return _C._zeros(list(x.shape), x.dtype if dtype is None else dtype)


def ones_like(input, *, dtype=None):
    """Ones with input's shape (and dtype)."""
    x = _as_tensor(input)
    return _C._full(list(x.shape), 1.0, x.dtype if dtype is None else dtype)


def full_like(input, fill_value, *, dtype=None):
    """fill_value with input's shape (and dtype)."""
    x = _as_tensor(input)
    return _C._full(list(x.shape), float(fill_value), x.dtype if dtype is None else dtype)


def arange(start=0, end=None, step=1, *, dtype=None):
    """start, start + step, ... up to (not including) end; int64 for int arguments, else
    float32."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, end, step))
        dtype = int64 if ints else float32
    return _C._arange(float(start), float(end), float(step), dtype)


def randn(*size, dtype=None, seed=None):
    """Standard normal samples from the global generator (zenith.set_seed)."""
    return _C._randn(_shape(size), float32 if dtype is None else dtype)


def rand(*size, dtype=None, seed=None):
    """Uniform [0, 1) samples from the global generator."""
    return _C._rand(_shape(size), float32 if dtype is None else dtype)


def uniform(shape, minval, maxval, seed=None, dtype=None):
    """Uniform [minval, maxval) samples from the global generator."""
    return _C._uniform(_shape(shape), float(minval), float(maxval),
                       float32 if dtype is None else dtype)


def randint(low, high, size, seed=None, *, dtype=None):
    """Integers uniform in [low, high) from the global generator."""
    return _C._randint(low, high, _shape(size), int64 if dtype is None else dtype)


def clamp(input, min=None, max=None):
    """input limited to [min, max] (either may be None)."""
    return _as_tensor(input).clip(min, max)


clip = clamp


def stop_gradient(value):
    """value without its history: no gradient flows through it."""
    return _as_tensor(value).detach()


def grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """zenith.grad (mindspore.ops.grad)."""
    from zenith._grad import grad as _grad
    return _grad(fn, grad_position, weights, has_aux, return_ids)


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """zenith.value_and_grad (mindspore.ops.value_and_grad)."""
    from zenith._grad import value_and_grad as _vg
    return _vg(fn, grad_position, weights, has_aux, return_ids)
