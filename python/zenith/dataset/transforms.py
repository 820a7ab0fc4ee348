"""Generic transforms (mindspore.dataset.transforms): TypeCast and Compose."""

from zenith import _zenith as _C
from zenith.dataset.vision import _Transform

__all__ = ["TypeCast", "Compose"]


class TypeCast(_Transform):
    """Converts a column to data_type (e.g. zenith.int32)."""

    def __init__(self, data_type):
        super().__init__([_C.data.TypeCast(data_type)])


class Compose(_Transform):
    """Several transforms applied in order, as one."""

    def __init__(self, transforms):
        from zenith.dataset import _operations
        super().__init__(_operations(list(transforms)))
