"""MindSpore Tensor behaviour added to zenith.Tensor: Tensor(shape=, dtype=, init=),
Tensor.from_numpy (sharing memory), % and //, and the sparse CSRTensor and COOTensor."""

import numpy as np

from zenith._tensor import Tensor, _as_tensor, float32

_CPP_INIT = Tensor.__init__


def _init(self, input_data=None, dtype=None, shape=None, init=None, internal=False,
          const_arg=False, device=None):
    """Tensor(input_data=None, dtype=None, shape=None, init=None): with init (an initializer
    from zenith.common.initializer, or its name), a tensor of shape and dtype filled by it."""
    if init is None:
        _CPP_INIT(self, input_data, dtype, shape)
        return
    if input_data is not None or shape is None:
        raise ValueError("Tensor: init needs shape (and dtype) and no input_data")
    from zenith.common.initializer import _as_initializer
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    value = Tensor(None, float32, shape)
    _as_initializer(init).fill(value)
    _CPP_INIT(self, value if dtype in (None, float32) else value.astype(dtype))


def _floordiv(a, b):
    from zenith import ops
    return ops.floor_divide(a, b)


def _mod(a, b):
    from zenith import ops
    return ops.floor_mod(a, b)


class COOTensor:
    """A sparse tensor as (indices [N, ndim] int32, values [N], shape) (mindspore.COOTensor)."""

    def __init__(self, indices=None, values=None, shape=None, coo_tensor=None):
        if coo_tensor is not None:
            indices, values, shape = coo_tensor.indices, coo_tensor.values, coo_tensor.shape
        self.indices, self.values = _as_tensor(indices), _as_tensor(values)
        self.shape = tuple(shape)

    @property
    def dtype(self):
        return self.values.dtype

    def astype(self, dtype):
        return COOTensor(self.indices, self.values.astype(dtype), self.shape)

    def to_dense(self):
        out = np.zeros(self.shape, self.values.asnumpy().dtype)
        idx = self.indices.asnumpy()
        np.add.at(out, tuple(idx.T), self.values.asnumpy())
        return Tensor(out)


class CSRTensor:
    """A sparse matrix as (indptr, indices, values, shape) (mindspore.CSRTensor)."""

    def __init__(self, indptr=None, indices=None, values=None, shape=None, csr_tensor=None):
        if csr_tensor is not None:
            indptr, indices = csr_tensor.indptr, csr_tensor.indices
            values, shape = csr_tensor.values, csr_tensor.shape
        self.indptr, self.indices = _as_tensor(indptr), _as_tensor(indices)
        self.values, self.shape = _as_tensor(values), tuple(shape)

    @property
    def dtype(self):
        return self.values.dtype

    def astype(self, dtype):
        return CSRTensor(self.indptr, self.indices, self.values.astype(dtype), self.shape)

    def to_dense(self):
        out = np.zeros(self.shape, self.values.asnumpy().dtype)
        indptr, cols, vals = (self.indptr.asnumpy(), self.indices.asnumpy(),
                              self.values.asnumpy())
        for row in range(len(indptr) - 1):
            for k in range(indptr[row], indptr[row + 1]):
                out[row, cols[k]] += vals[k]
        return Tensor(out)


def install():
    Tensor.__init__ = _init
    Tensor.from_numpy = staticmethod(lambda array: Tensor(np.asarray(array)))
    Tensor.__floordiv__ = _floordiv
    Tensor.__rfloordiv__ = lambda self, other: _floordiv(other, self)
    Tensor.__mod__ = _mod
    Tensor.__rmod__ = lambda self, other: _mod(other, self)
