"""zenith.common: MindSpore's mindspore.common names (initializer, Tensor, Parameter, dtype)."""

from zenith._tensor import Parameter, ParameterTuple, Tensor, dtype
from zenith.common import initializer

__all__ = ["initializer", "Tensor", "Parameter", "ParameterTuple", "dtype"]
