"""zenith.Tensor, zenith.Parameter and the dtypes.

Tensor is the C++ tensor (``_zenith.Tensor``): a handle to memory shared by its views. The
MindSpore-named methods below are written with the C++ ops and attached to that class here, so
``Tensor.sum``, ``Tensor.argmax``, indexing etc. work on every tensor the C++ side returns.
"""

from zenith import _zenith as _C

Tensor = _C.Tensor
dtype = _C.dtype

float16 = dtype.float16
float32 = dtype.float32
float64 = dtype.float64
bfloat16 = dtype.bfloat16
int32 = dtype.int32
int64 = dtype.int64
uint8 = dtype.uint8
bool_ = dtype.bool_

_DTYPE_NAMES = {
    float16: "Float16", float32: "Float32", float64: "Float64", bfloat16: "BFloat16",
    int32: "Int32", int64: "Int64", uint8: "UInt8", bool_: "Bool",
}
dtype.__repr__ = lambda self: _DTYPE_NAMES[self]
dtype.__str__ = lambda self: _DTYPE_NAMES[self]


def _as_tensor(value, dtype=None):
    """A Tensor from a Tensor (itself), numpy array (shared), number or sequence."""
    if isinstance(value, Tensor) and dtype is None:
        return value
    return _C._to_tensor(value, dtype)


def _axes(axis, ndim):
    """MindSpore's axis argument (None, int, tuple or list) as a list of dims (None: all)."""
    if axis is None:
        return []
    if isinstance(axis, int):
        return [axis]
    axes = list(axis)
    if not axes:
        return []
    return axes


# ---- the MindSpore-named methods, attached to the C++ class below


def _repr(self):
    values = str(self.asnumpy()) if self.dtype != bfloat16 else str(self.astype(float32).asnumpy())
    sep = "\n" if self.ndim > 1 else " "
    return f"Tensor(shape={list(self.shape)}, dtype={self.dtype!r}, value={sep}{values})"


def _str(self):
    return str(self.asnumpy())


def _normalize_index(index, ndim):
    """The index as a tuple with the ellipsis expanded (None entries kept)."""
    if not isinstance(index, tuple):
        index = (index,)
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out = []
    for i in index:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(i)
    return tuple(out)


def _getitem(self, index):
    """Basic indexing: ints, slices (positive steps), None, ..., and one integer or bool tensor
    (or list/array) along a dimension (a copy, as index_select)."""
    index = _normalize_index(index, self.ndim)
    out = self
    dim = 0
    for i in index:
        if i is None:
            out = out.unsqueeze(dim)
            dim += 1
        elif isinstance(i, slice):
            start, stop, step = i.start, i.stop, i.step
            if step is None:
                step = 1
            if step <= 0:
                raise ValueError("Tensor slicing needs a positive step")
            size = out.shape[dim]
            out = out._slice(dim, 0 if start is None else int(start),
                             size if stop is None else int(stop), int(step))
            dim += 1
        elif isinstance(i, (int,)) and not isinstance(i, bool):
            if dim >= out.ndim:
                raise IndexError(f"too many indices for a tensor of {self.ndim} dimensions")
            out = out._select(dim, i)
        else:
            idx = _as_tensor(i)
            if idx.dtype == bool_:
                if idx.ndim != 1:
                    raise IndexError("a boolean index must be 1-d")
                import numpy as np
                idx = _as_tensor(np.nonzero(idx.asnumpy())[0].astype(np.int64))
            elif idx.dtype not in (int32, int64) and idx.dtype.name != "uint32":
                raise IndexError(f"tensors used as indices must be integer or bool, got {idx.dtype}")
            if idx.ndim == 0:
                out = out._select(dim, int(idx.item()))
                continue
            shape = idx.shape
            out = _C.ops.index_select(out, dim, idx.reshape(-1))
            if len(shape) != 1:
                out = out.reshape(*(out.shape[:dim] + shape + out.shape[dim + 1:]))
            dim += len(shape)
    return out


def _setitem(self, index, value):
    """Writes value (broadcast, converted to this tensor's dtype) into self[index] in place;
    the index must select a view: ints, slices, None and ...."""
    parts = index if isinstance(index, tuple) else (index,)
    for i in parts:
        if isinstance(i, bool) or not (i is None or i is Ellipsis or isinstance(i, (int, slice))):
            raise IndexError("Tensor assignment takes ints, slices, None and ... (a view), got "
                             f"{type(i).__name__}")
    target = _getitem(self, index)
    target._assign(value if isinstance(value, Tensor) else _C._to_tensor(value, self.dtype))


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(self.shape[0]):
        yield self._select(0, i)


def _reduce_dims(self, axis):
    return _axes(axis, self.ndim)


def _sum(self, axis=None, dtype=None, keepdims=False, initial=None):
    """Sum over axis (None: all); dtype converts first; initial is added."""
    x = self if dtype is None else self.astype(dtype)
    if not x.dtype.is_floating_point and x.dtype != int64:
        x = x.astype(int64)
    out = _C.ops.sum(x, _reduce_dims(x, axis), keepdims)
    return out if initial is None else out + initial


def _mean(self, axis=None, keep_dims=False):
    """Mean over axis (None: all)."""
    x = self if self.dtype.is_floating_point else self.astype(float32)
    return _C.ops.mean(x, _reduce_dims(x, axis), keep_dims)


def _max_min(self, cpp_dim, cpp_all, axis, keepdims, return_indices, argfn):
    if axis is None:
        values = cpp_all(self)
        if keepdims:
            values = values.reshape(*([1] * self.ndim))
        if return_indices:
            return values, argfn(self.reshape(-1), 0, False)
        return values
    values = cpp_dim(self, axis, keepdims)
    if return_indices:
        return values, argfn(self, axis, keepdims)
    return values


def _argmin_cpp(x, dim, keepdim):
    return _C.ops.argmax(-x if x.dtype != bool_ else x.astype(int64) * -1, dim, keepdim)


def _max(self, axis=None, keepdims=False, *, initial=None, where=None, return_indices=False):
    """Maximum over axis (None: all elements); return_indices also gives the argmax."""
    if initial is not None or where is not None:
        raise ValueError("Tensor.max: initial and where are not supported")
    return _max_min(self, _C.ops.max, _C.ops.max_all, axis, keepdims, return_indices,
                    _C.ops.argmax)


def _min(self, axis=None, keepdims=False, *, initial=None, where=None, return_indices=False):
    """Minimum over axis (None: all elements); return_indices also gives the argmin."""
    if initial is not None or where is not None:
        raise ValueError("Tensor.min: initial and where are not supported")
    return _max_min(self, _C.ops.min, _C.ops.min_all, axis, keepdims, return_indices,
                    _argmin_cpp)


def _argmax(self, axis=None, keepdims=False):
    """Index of the maximum along axis (None: of the flattened tensor), int64."""
    if axis is None:
        return _C.ops.argmax(self.reshape(-1), 0, False)
    return _C.ops.argmax(self, axis, keepdims)


def _argmin(self, axis=None, keepdims=False):
    """Index of the minimum along axis (None: of the flattened tensor), int64."""
    if axis is None:
        return _argmin_cpp(self.reshape(-1), 0, False)
    return _argmin_cpp(self, axis, keepdims)


def _var(self, axis=None, ddof=0, keepdims=False):
    """Variance over axis with ddof delta degrees of freedom (0 or 1)."""
    if ddof not in (0, 1):
        raise ValueError(f"Tensor.var: ddof must be 0 or 1, got {ddof}")
    return _C.ops.var(self, _reduce_dims(self, axis), bool(ddof), keepdims)


def _std(self, axis=None, ddof=0, keepdims=False):
    """Standard deviation over axis."""
    return _C.ops.sqrt(_var(self, axis, ddof, keepdims))


def _transpose(self, *axes):
    """Permutes the dims: transpose() reverses them, transpose(1, 0, 2) or transpose((1, 0, 2))."""
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    if not axes:
        axes = tuple(reversed(range(self.ndim)))
    return self.permute(*axes)


def _squeeze(self, axis=None):
    """Removes size-1 dims (all, or those in axis)."""
    if axis is None:
        dims = [d for d, s in enumerate(self.shape) if s == 1]
    else:
        dims = [axis] if isinstance(axis, int) else list(axis)
        dims = [d % self.ndim for d in dims]
        for d in dims:
            if self.shape[d] != 1:
                raise ValueError(f"squeeze: dim {d} has size {self.shape[d]}, not 1")
    out = self
    for d in sorted(dims, reverse=True):
        out = out.squeeze_dim(d)
    return out


def _flatten(self, order="C", *, start_dim=0, end_dim=-1):
    """Flattens dims start_dim..end_dim (all by default) into one."""
    if order != "C":
        raise ValueError("Tensor.flatten: only order='C' is supported")
    return self.flatten_dims(start_dim, end_dim)


def _tolist(self):
    return self.asnumpy().tolist()


def _clip(self, min=None, max=None):
    """Clamps the values to [min, max] (either may be None)."""
    out = self
    if min is not None:
        out = _C.ops.maximum(*_pair(out, min))
    if max is not None:
        out = _C.ops.minimum(*_pair(out, max))
    return out


def _pair(a, b):
    """Two tensors for a binary op: a Python number takes the other operand's dtype (a float
    with an integer tensor gives float32), as the operators do."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = _as_tensor(a)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a, b
    if isinstance(b, Tensor):
        b2, a2 = _pair(b, a)
        return a2, b2
    if isinstance(b, (bool, int, float)):
        dt = a.dtype
        if isinstance(b, float) and not dt.is_floating_point:
            dt = float32
        elif dt == bool_ and not isinstance(b, bool):
            dt = int64
        a = a if a.dtype == dt else a.astype(dt)
        return a, _C._to_tensor(b, dt)
    return a, _as_tensor(b)


def _all(self, axis=None, keep_dims=False):
    """True where every element along axis is non-zero."""
    zeros = _C.ops.eq(self.astype(float32), _C._to_tensor(0.0, float32)).astype(int64)
    return _C.ops.eq(_C.ops.sum(zeros, _reduce_dims(self, axis), keep_dims),
                     _C._to_tensor(0, int64))


def _any(self, axis=None, keep_dims=False):
    """True where some element along axis is non-zero."""
    nonzero = _C.ops.ne(self.astype(float32), _C._to_tensor(0.0, float32)).astype(int64)
    return _C.ops.gt(_C.ops.sum(nonzero, _reduce_dims(self, axis), keep_dims),
                     _C._to_tensor(0, int64))


_METHODS = {
    "__repr__": _repr,
    "__str__": _str,
    "__getitem__": _getitem,
    "__setitem__": _setitem,
    "__iter__": _iter,
    "__array_priority__": 1000,  # numpy_array * tensor uses Tensor.__rmul__
    "sum": _sum,
    "mean": _mean,
    "max": _max,
    "min": _min,
    "argmax": _argmax,
    "argmin": _argmin,
    "var": _var,
    "std": _std,
    "transpose": _transpose,
    "squeeze": _squeeze,
    "flatten": _flatten,
    "tolist": _tolist,
    "clip": _clip,
    "clamp": _clip,
    "all": _all,
    "any": _any,
    "numel": lambda self: self.size,
    "dim": lambda self: self.ndim,
    "abs": lambda self: _C.ops.abs(self),
    "exp": lambda self: _C.ops.exp(self),
    "log": lambda self: _C.ops.log(self),
    "sqrt": lambda self: _C.ops.sqrt(self),
    "rsqrt": lambda self: _C.ops.rsqrt(self),
    "square": lambda self: _C.ops.square(self),
    "sigmoid": lambda self: _C.ops.sigmoid(self),
    "tanh": lambda self: _C.ops.tanh(self),
    "pow": lambda self, exponent: self ** exponent,
    "matmul": lambda self, other: self @ other,
    "softmax": lambda self, axis=-1: _C.ops.softmax(self, axis),
    "log_softmax": lambda self, axis=-1: _C.ops.log_softmax(self, axis),
    "expand_as": lambda self, other: self.broadcast_to(other.shape),
    "view_as": lambda self, other: self.view(*other.shape),
    "masked_fill": lambda self, mask, value: _C.ops.masked_fill(self, mask, float(value)),
    "index_select": lambda self, axis, index: _C.ops.index_select(self, axis, index),
    "to": lambda self, dtype: self.astype(dtype),
    "float": lambda self: self.astype(float32),
    "half": lambda self: self.astype(float16),
    "double": lambda self: self.astype(float64),
    "int": lambda self: self.astype(int32),
    "long": lambda self: self.astype(int64),
    "bool": lambda self: self.astype(bool_),
    "fill": lambda self, value: (self._fill(float(value)), self)[1],
    "zero_": lambda self: (self._fill(0.0), self)[1],
    "assign_value": lambda self, value: (self._assign(_as_tensor(value, self.dtype)), self)[1],
    "T": property(lambda self: self.permute(*reversed(range(self.ndim)))),
}
for _name, _fn in _METHODS.items():
    if callable(_fn) and not isinstance(_fn, property) and _fn.__doc__ is None:
        _fn.__doc__ = f"Tensor.{_name}: as mindspore.Tensor.{_name}."
    setattr(Tensor, _name, _fn)


class Parameter(Tensor):
    """A trainable tensor of a Cell (MindSpore's Parameter).

    Parameter(default_input, name=None, requires_grad=True)
      default_input: a Tensor, numpy array, number or sequence; copied into memory the
      parameter owns (optimizers update it in place). Set as an attribute of a Cell, it is
      registered under the attribute's name; trainable_params() gives it its dotted name.
    """

    def __init__(self, default_input, name=None, requires_grad=True, layerwise_parallel=False,
                 parallel_optimizer=True):
        data = _as_tensor(default_input).detach().copy()
        Tensor.__init__(self, data)
        self.name = name
        if requires_grad and data.dtype.is_floating_point:
            self.requires_grad = True

    @classmethod
    def _wrap(cls, tensor, name):
        """The parameter `tensor` itself (same memory, same gradient) named `name`."""
        p = cls.__new__(cls)
        Tensor.__init__(p, tensor)
        p.name = name
        return p

    @property
    def data(self):
        return self

    def value(self):
        """The parameter's value (the parameter itself, a Tensor)."""
        return self

    def set_data(self, data, slice_shape=False):
        """Replaces the value: copied in place when the shape is the same, else the parameter
        takes the new shape (cells and optimizers holding it see the change)."""
        src = _as_tensor(data)
        if tuple(src.shape) == tuple(self.shape):
            self._assign(src.astype(self.dtype) if src.dtype != self.dtype else src)
        else:
            self._replace_data(src.astype(self.dtype) if src.dtype != self.dtype else src)
        return self

    def clone(self, init="same"):
        """A new parameter: a copy of the value (init='same'), or of the same shape and dtype
        filled by init (an initializer of zenith.common.initializer, its name such as 'zeros',
        or a number)."""
        p = Parameter(self, name=self.name, requires_grad=self.requires_grad)
        if not (isinstance(init, str) and init == "same"):
            from zenith.common.initializer import initializer
            p.set_data(initializer(init, tuple(self.shape), float32).astype(self.dtype))
        return p

    def __repr__(self):
        return (f"Parameter (name={self.name}, shape={self.shape}, dtype={self.dtype!r}, "
                f"requires_grad={self.requires_grad})")


class ParameterTuple(tuple):
    """A tuple of Parameters (MindSpore's ParameterTuple)."""

    def __new__(cls, iterable):
        items = tuple(iterable)
        for p in items:
            if not isinstance(p, Tensor):
                raise TypeError(f"ParameterTuple takes Parameters, got {type(p).__name__}")
        return super().__new__(cls, items)

    def clone(self, prefix, init="same"):
        """New Parameters named '<prefix>.<name>', copies (init='same') or filled by init
        ('zeros', an initializer, ...), as MindSpore's ParameterTuple.clone."""
        out = []
        for p in self:
            c = p.clone(init) if isinstance(p, Parameter) else Parameter(p).clone(init)
            c.name = f"{prefix}.{p.name}"
            out.append(c)
        return ParameterTuple(out)
