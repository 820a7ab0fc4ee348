"""The compiled part of zenith.llm, loaded on first use (see python/src/llm/llm.cpp: it links
the tokenizer libraries, which `import zenith` alone should not load)."""

from zenith._tensor import Tensor, _as_tensor


def ext():
    """The zenith._zenith_llm module."""
    from zenith import _zenith_llm
    return _zenith_llm


def ids_list(ids, what="input_ids"):
    """Token ids as a list of ints: from a list/tuple of ints, a numpy array or a Tensor, 1-d or
    of shape [1, T]. Raises TypeError/ValueError naming `what`."""
    if isinstance(ids, (list, tuple)):
        out = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                if hasattr(i, "__index__") and not isinstance(i, bool):
                    i = i.__index__()
                else:
                    raise TypeError(f"{what}: token ids must be ints, got {type(i).__name__}")
            out.append(i)
        return out
    if ids is None:
        raise TypeError(f"{what}: expected token ids, got None")
    t = _as_tensor(ids)
    if t.dtype.is_floating_point:
        raise TypeError(f"{what}: token ids must be integers, got a {t.dtype!r} tensor")
    shape = tuple(t.shape)
    if len(shape) == 2 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) != 1:
        raise ValueError(f"{what}: expected one sequence (shape [T] or [1, T]), got shape "
                         f"{list(t.shape)}")
    return [int(i) for i in t.asnumpy().reshape(-1)]


def is_tensor(value):
    return isinstance(value, Tensor)
