"""Generic transforms (mindspore.dataset.transforms): TypeCast and Compose."""

from zenith import _zenith as _C
from zenith.dataset.vision import _Transform

__all__ = ["TypeCast", "Compose"]


class TypeCast(_Transform):
    """Converts a column to data_type (e.g. zenith.int32; zenith.uint32 casts to the int64 the
    pipeline carries such a column in, and the column comes out as uint32)."""

    def __init__(self, data_type):
        from zenith._tensor import int64
        from zenith._uint32 import uint32
        self._to_uint32 = data_type is uint32
        super().__init__([_C.data.TypeCast(int64 if self._to_uint32 else data_type)])

    def __call__(self, img):
        out = super().__call__(img)
        return out.astype("uint32") if self._to_uint32 else out


class Compose(_Transform):
    """Several transforms applied in order, as one."""

    def __init__(self, transforms):
        from zenith.dataset import _operations
        super().__init__(_operations(list(transforms)))
