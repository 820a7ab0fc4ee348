"""The built-in layers with MindSpore's arguments and defaults (mindspore.nn).

Each is a C++ cell: __new__ builds it with the C++ factory and gives it the Python class, so
it computes in C++ (GIL released) and Model/SequentialCell chains of them never enter Python.
Parameters keep zenith's names (weight, bias, running_mean, running_var), the same in
checkpoints written from C++ and by `zenith train`.
"""

import math

from zenith import _zenith as _C
from zenith._tensor import _as_tensor
from zenith.nn.cell import Cell

__all__ = [
    "Conv2d", "Dense", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Flatten", "MaxPool2d",
    "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm2d", "Dropout", "Embedding", "LayerNorm",
    "RMSNorm",
]


class _Builtin(Cell):
    """A layer computed by C++ (construct is the C++ forward)."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        pass  # built in __new__

    __call__ = _C.nn.Cell._forward

    def construct(self, x):
        return self._forward(x)

    def extend_repr(self):
        # The C++ layer's arguments: "Name(a=1, b=2)" -> "a=1, b=2".
        text = self._repr()
        start = text.find("(")
        return text[start + 1:text.rfind(")")] if start >= 0 and "\n" not in text else ""


def _make(cls, cell, **attrs):
    """The C++ `cell` as an instance of cls, with MindSpore's attributes (in_channels, ...)."""
    cell.__class__ = cls
    for k, v in attrs.items():
        object.__setattr__(cell, k, v)
    return cell


def _int(v, name):
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, (tuple, list)) and len(set(v)) == 1 and isinstance(v[0], int):
            return v[0]
        raise ValueError(f"{name} must be an int (or a tuple of equal ints), got {v!r}")
    return v


def _param(cell, name):
    for n, t in cell._named_parameters():
        if n == name:
            return t
    return None


def _initialize(cell, name, init):
    """Applies a MindSpore weight_init / bias_init to the parameter `name` of `cell`: None keeps
    the default (PyTorch's), a string ('normal', 'zeros', 'ones', 'uniform', 'xavier_uniform',
    'he_uniform', 'he_normal'), a number, or a Tensor/array of the parameter's shape."""
    t = _param(cell, name)
    if init is None or t is None:
        return
    init_ = _C.nn.init
    if isinstance(init, str):
        key = init.lower()
        if key == "normal":
            init_.normal_(t, 0.0, 0.01)
        elif key == "zeros":
            init_.constant_(t, 0.0)
        elif key == "ones":
            init_.constant_(t, 1.0)
        elif key == "uniform":
            init_.uniform_(t, -0.07, 0.07)
        elif key in ("xavier_uniform", "xavieruniform"):
            init_.xavier_uniform_(t)
        elif key in ("he_uniform", "heuniform"):
            init_.kaiming_uniform_(t, 0.0)
        elif key in ("he_normal", "henormal"):
            init_.normal_(t, 0.0, math.sqrt(2.0 / init_.fan_in(t)))
        else:
            raise ValueError(f"unknown initializer {init!r} (known: normal, zeros, ones, uniform, "
                             "xavier_uniform, he_uniform, he_normal)")
    elif isinstance(init, (int, float)) and not isinstance(init, bool):
        init_.constant_(t, float(init))
    else:
        value = _as_tensor(init)
        if tuple(value.shape) != tuple(t.shape):
            raise ValueError(f"initializer for {name} has shape {value.shape}, expected {t.shape}")
        t._assign(value)


class Conv2d(_Builtin):
    """2-d convolution over NCHW input (mindspore.nn.Conv2d).

    Conv2d(in_channels, out_channels, kernel_size, stride=1, pad_mode='same', padding=0,
           dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None)
    pad_mode: 'same' (output H/stride), 'valid' (no padding) or 'pad' (padding on each side).
    Square kernels, strides and dilations. Weight [out, in/group, k, k]; PyTorch's default
    initialisation unless weight_init/bias_init is given.
    """

    __slots__ = ()

    def __new__(cls, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
                bias_init=None, data_format="NCHW", dtype=None):
        if data_format != "NCHW":
            raise ValueError("Conv2d: only data_format='NCHW' is supported")
        k, s, d = (_int(kernel_size, "kernel_size"), _int(stride, "stride"),
                   _int(dilation, "dilation"))
        p = _int(padding, "padding")
        cell = _C.nn.Conv2d(in_channels, out_channels, k, s, pad_mode, p, d, group, has_bias)
        _initialize(cell, "weight", weight_init)
        _initialize(cell, "bias", bias_init)
        return _make(cls, cell, in_channels=in_channels, out_channels=out_channels,
                     kernel_size=(k, k), stride=(s, s), pad_mode=pad_mode, padding=p,
                     dilation=(d, d), group=group, has_bias=has_bias,
                     weight_init=weight_init, bias_init=bias_init)

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"pad_mode={self.pad_mode}, padding={self.padding}, dilation={self.dilation}, "
                f"group={self.group}, has_bias={self.has_bias}, "
                f"weight_init={self.__dict__.get('weight_init')}, "
                f"bias_init={self.__dict__.get('bias_init')}, format=NCHW")


class Dense(_Builtin):
    """Fully connected layer y = x W^T + b (mindspore.nn.Dense).

    Dense(in_channels, out_channels, weight_init=None, bias_init=None, has_bias=True)
    Weight [out, in], bias [out]. For an activation, follow it with one (SequentialCell).
    """

    __slots__ = ()

    def __new__(cls, in_channels, out_channels, weight_init=None, bias_init=None,
                has_bias=True, activation=None, dtype=None):
        if activation is not None:
            raise ValueError("Dense: activation is not supported; use "
                             "nn.SequentialCell(nn.Dense(...), nn.ReLU())")
        cell = _C.nn.Dense(in_channels, out_channels, has_bias)
        _initialize(cell, "weight", weight_init)
        _initialize(cell, "bias", bias_init)
        return _make(cls, cell, in_channels=in_channels, out_channels=out_channels,
                     has_bias=has_bias)

    def extend_repr(self):
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"has_bias={self.has_bias}")

    @property
    def matmul(self):
        """MindSpore's MatMul inside Dense: dense.matmul.shard(strategy) under semi-auto
        parallel splits the weight over the ranks (zenith.nn.shard)."""
        from zenith.nn.shard import MatMulShard
        return MatMulShard(self)


class ReLU(_Builtin):
    """max(x, 0) (mindspore.nn.ReLU)."""
    __slots__ = ()

    def __new__(cls):
        return _make(cls, _C.nn.ReLU())


class GELU(_Builtin):
    """GELU (mindspore.nn.GELU); approximate=True (MindSpore's default) uses the tanh formula."""
    __slots__ = ()

    def __new__(cls, approximate=True):
        return _make(cls, _C.nn.GELU(bool(approximate)), approximate=approximate)


class SiLU(_Builtin):
    """x * sigmoid(x) (mindspore.nn.SiLU)."""
    __slots__ = ()

    def __new__(cls):
        return _make(cls, _C.nn.SiLU())


class Sigmoid(_Builtin):
    """1 / (1 + exp(-x)) (mindspore.nn.Sigmoid)."""
    __slots__ = ()

    def __new__(cls):
        return _make(cls, _C.nn.Sigmoid())


class Tanh(_Builtin):
    """tanh(x) (mindspore.nn.Tanh)."""
    __slots__ = ()

    def __new__(cls):
        return _make(cls, _C.nn.Tanh())


class Flatten(_Builtin):
    """[N, ...] -> [N, prod(...)] (mindspore.nn.Flatten with its defaults)."""
    __slots__ = ()

    def __new__(cls, start_dim=1, end_dim=-1):
        if (start_dim, end_dim) != (1, -1):
            raise ValueError("Flatten: only start_dim=1, end_dim=-1 are supported")
        return _make(cls, _C.nn.Flatten())


def _pool_padding(pad_mode, padding, name):
    if pad_mode not in ("valid", "pad"):
        raise ValueError(f"{name}: pad_mode must be 'valid' or 'pad' (with padding), got "
                         f"{pad_mode!r}")
    return _int(padding, "padding") if pad_mode == "pad" else 0


class MaxPool2d(_Builtin):
    """Max pooling over NCHW windows (mindspore.nn.MaxPool2d).

    MaxPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0): MindSpore's defaults
    (stride 1: pass stride=kernel_size for non-overlapping windows).
    """

    __slots__ = ()

    def __new__(cls, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1,
                return_indices=False, ceil_mode=False, data_format="NCHW"):
        if dilation != 1 or return_indices or ceil_mode:
            raise ValueError("MaxPool2d: dilation, return_indices and ceil_mode are not supported")
        k, s = _int(kernel_size, "kernel_size"), _int(stride, "stride")
        p = _pool_padding(pad_mode, padding, "MaxPool2d")
        return _make(cls, _C.nn.MaxPool2d(k, s, p), kernel_size=k, stride=s, pad_mode=pad_mode)


class AvgPool2d(_Builtin):
    """Average pooling over NCHW windows (mindspore.nn.AvgPool2d; defaults kernel 1, stride 1,
    'valid')."""

    __slots__ = ()

    def __new__(cls, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None, data_format="NCHW"):
        if ceil_mode or divisor_override is not None or not count_include_pad:
            raise ValueError("AvgPool2d: ceil_mode, divisor_override and count_include_pad=False "
                             "are not supported")
        k, s = _int(kernel_size, "kernel_size"), _int(stride, "stride")
        p = _pool_padding(pad_mode, padding, "AvgPool2d")
        return _make(cls, _C.nn.AvgPool2d(k, s, p), kernel_size=k, stride=s, pad_mode=pad_mode)


class AdaptiveAvgPool2d(_Builtin):
    """Average pooling to a square output_size (mindspore.nn.AdaptiveAvgPool2d)."""
    __slots__ = ()

    def __new__(cls, output_size):
        return _make(cls, _C.nn.AdaptiveAvgPool2d(_int(output_size, "output_size")),
                     output_size=output_size)


class BatchNorm2d(_Builtin):
    """Batch normalisation over NCHW input (mindspore.nn.BatchNorm2d).

    BatchNorm2d(num_features, eps=1e-5, momentum=0.9, affine=True): running statistics move
    as running = momentum * running + (1 - momentum) * batch (MindSpore's convention).
    Parameters weight, bias; buffers running_mean, running_var.
    """

    __slots__ = ()

    def __new__(cls, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                use_batch_statistics=None, data_format="NCHW", dtype=None):
        if use_batch_statistics is not None:
            raise ValueError("BatchNorm2d: use_batch_statistics is not supported (set_train "
                             "chooses batch or running statistics)")
        cell = _C.nn.BatchNorm2d(num_features, eps, momentum, affine)
        if gamma_init != "ones":
            _initialize(cell, "weight", gamma_init)
        if beta_init != "zeros":
            _initialize(cell, "bias", beta_init)
        return _make(cls, cell, num_features=num_features, eps=eps, momentum=momentum)


class Dropout(_Builtin):
    """Zeroes elements with probability p during training, scaling the rest by 1/(1-p)
    (mindspore.nn.Dropout(keep_prob=None, p=None); p=0.5 when neither is given)."""

    __slots__ = ()

    def __new__(cls, keep_prob=None, p=None, dtype=None):
        if keep_prob is not None and p is not None:
            raise ValueError("Dropout: give keep_prob or p, not both")
        rate = 1.0 - keep_prob if keep_prob is not None else (0.5 if p is None else p)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1), got {rate}")
        return _make(cls, _C.nn.Dropout(rate), p=rate)


class Embedding(_Builtin):
    """A lookup table of vocab_size vectors of embedding_size (mindspore.nn.Embedding); the
    table is N(0, 1) initialised unless embedding_table is given."""

    __slots__ = ()

    def __new__(cls, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal",
                dtype=None, padding_idx=None):
        if use_one_hot or padding_idx is not None:
            raise ValueError("Embedding: use_one_hot and padding_idx are not supported")
        cell = _C.nn.Embedding(vocab_size, embedding_size)
        if embedding_table != "normal":
            _initialize(cell, "weight", embedding_table)
        return _make(cls, cell, vocab_size=vocab_size, embedding_size=embedding_size)


class LayerNorm(_Builtin):
    """Normalises over the trailing normalized_shape dims, then gamma * x + beta
    (mindspore.nn.LayerNorm; epsilon 1e-7 as MindSpore; the trailing dims are those of
    normalized_shape whatever begin_norm_axis says). Parameters weight, bias."""

    __slots__ = ()

    def __new__(cls, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1,
                gamma_init="ones", beta_init="zeros", epsilon=1e-7, dtype=None):
        shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        cell = _C.nn.LayerNorm(shape, epsilon)
        if gamma_init != "ones":
            _initialize(cell, "weight", gamma_init)
        if beta_init != "zeros":
            _initialize(cell, "bias", beta_init)
        return _make(cls, cell, normalized_shape=tuple(shape), epsilon=epsilon)


class RMSNorm(_Builtin):
    """x / sqrt(mean(x^2, last dim) + eps) * weight, over a last dim of size dim."""

    __slots__ = ()

    def __new__(cls, dim, eps=1e-6):
        return _make(cls, _C.nn.RMSNorm(_int(dim, "dim"), eps), dim=dim, eps=eps)


class _CppCell(_Builtin):
    """A cell made in C++ that has no Python class of its own (e.g. a ResNet block)."""
    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        raise TypeError("this cell type is made by C++ (zenith.models)")


_BY_TYPE_NAME = {}


def builtin_class(type_name):
    """The Python class for a C++ cell's type name."""
    if not _BY_TYPE_NAME:
        from zenith.nn.cell import SequentialCell
        for name in __all__:
            _BY_TYPE_NAME[name] = globals()[name]
        _BY_TYPE_NAME["SequentialCell"] = SequentialCell
        from zenith.nn.wrap import DistributedDataParallel
        _BY_TYPE_NAME["DistributedDataParallel"] = DistributedDataParallel
    return _BY_TYPE_NAME.get(type_name, _CppCell)
