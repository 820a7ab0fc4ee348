"""zenith.uint32: MindSpore's UInt32, the dtype of MnistDataset's and Cifar10Dataset's labels.

zenith's C++ tensors have no 32-bit unsigned type, so the Python front end carries it: a uint32
tensor is a Tensor subclass whose memory is int64 (every uint32 value exactly), shown as
``dtype=UInt32``, converted to numpy as uint32 arrays (a copy, not shared memory), kept by
indexing, iteration, ``Tensor(numpy uint32 array)``, ``Tensor(data, zenith.uint32)`` and
``astype(zenith.uint32)`` (values converted as numpy converts them: -1 becomes 4294967295).
Any op computes on the int64 values and
returns an int64 tensor (MindSpore's would be UInt32): ``SoftmaxCrossEntropyWithLogits(
sparse=True)`` and ``ops.one_hot`` take uint32 labels, where MindSpore wants int32 or int64
(its tutorials cast the labels with ``TypeCast(int32)``, which gives the same tensor in both).
"""

import numpy as np

from zenith._tensor import Tensor, int64

__all__ = ["uint32", "to_uint32", "is_uint32"]


class _StorageDType:
    """A dtype of the Python front end held in a wider core dtype (see the module's doc)."""

    __slots__ = ("name", "_display", "_numpy", "_storage")
    is_floating_point = False

    def __init__(self, name, display, numpy_type, storage):
        self.name, self._display, self._numpy, self._storage = name, display, numpy_type, storage

    @property
    def itemsize(self):
        return np.dtype(self._numpy).itemsize

    def __repr__(self):
        return self._display

    __str__ = __repr__

    def __reduce__(self):
        return (_dtype_named, (self.name,))


uint32 = _StorageDType("uint32", "UInt32", np.uint32, int64)


def _dtype_named(name):
    return {"uint32": uint32}[name]


class _UInt32Tensor(Tensor):
    """A zenith.uint32 tensor: int64 memory holding uint32 values (see the module's doc)."""

    __slots__ = ()

    def __init__(self, input_data=None, dtype=None, shape=None, init=None, **kwargs):
        if input_data is None:
            Tensor.__init__(self, None, int64, shape, init)
            return
        values = input_data.asnumpy() if isinstance(input_data, Tensor) else \
            np.asarray(input_data)
        Tensor.__init__(self, values.astype(np.uint32).astype(np.int64), None, shape)

    dtype = property(lambda self: uint32)
    itemsize = property(lambda self: 4)
    nbytes = property(lambda self: 4 * self.size)

    def asnumpy(self):
        return Tensor.asnumpy(self).astype(np.uint32)

    def __array__(self, dtype=None, copy=None):
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype)

    def astype(self, dtype):
        return self if dtype is uint32 else Tensor.astype(self, dtype)

    def __getitem__(self, index):
        out = Tensor.__getitem__(self, index)
        return _share(out) if isinstance(out, Tensor) else out

    def __iter__(self):
        return (_share(t) for t in Tensor.__iter__(self))


_CPP_NEW = Tensor.__new__


def _share(t):
    """A uint32 tensor on the memory of the int64 tensor t."""
    out = _CPP_NEW(_UInt32Tensor)
    Tensor.__init__(out, t)
    return out


def _new(cls, input_data=None, dtype=None, *args, **kwargs):
    """Tensor(...) of a numpy uint32 array or with dtype=zenith.uint32 is a uint32 tensor."""
    if cls is Tensor and (dtype is uint32 or (dtype is None and _numpy_uint32(input_data))):
        return _CPP_NEW(_UInt32Tensor)
    return _CPP_NEW(cls)


def _numpy_uint32(value):
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype == np.uint32


def is_uint32(value):
    return value is uint32


def to_uint32(t):
    """t as a zenith.uint32 tensor: an int64 tensor of uint32 values (the pipeline's) shared,
    others converted as numpy converts to uint32 (negative values wrap)."""
    if isinstance(t, _UInt32Tensor):
        return t
    if isinstance(t, Tensor) and t.dtype == int64:
        return _share(t)
    return _UInt32Tensor(t)


_CPP_ASTYPE = Tensor.astype


def _astype(self, dtype):
    return _UInt32Tensor(self) if dtype is uint32 else _CPP_ASTYPE(self, dtype)


def install():
    _astype.__doc__ = _CPP_ASTYPE.__doc__
    Tensor.astype = _astype
    Tensor.__new__ = _new
