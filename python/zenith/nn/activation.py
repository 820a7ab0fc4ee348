"""Activation cells with MindSpore's names and arguments (mindspore.nn), written with zenith.ops
(so gradients flow through them): Softmax, LogSoftmax, LeakyReLU, ReLU6, ELU, Softplus, Softsign,
HSigmoid, HSwish, Hardtanh, Mish, SeLU, CELU, Tanhshrink, Softmin."""


from zenith import ops
from zenith.nn.cell import Cell

__all__ = ["Softmax", "LogSoftmax", "Softmin", "LeakyReLU", "ReLU6", "ELU", "CELU", "SeLU",
           "Softplus", "Softsign", "HSigmoid", "HSwish", "Hardtanh", "Mish", "Tanhshrink"]


class _Activation(Cell):
    def extend_repr(self):
        return ""

    def __repr__(self):
        extra = self.extend_repr()
        return f"{type(self).__name__}<{extra}>"


class Softmax(_Activation):
    """exp(x) / sum(exp(x)) along axis (default -1)."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def construct(self, x):
        return ops.softmax(x, self.axis)


class LogSoftmax(_Activation):
    """log(softmax(x)) along axis (default -1)."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def construct(self, x):
        return ops.log_softmax(x, self.axis)


class Softmin(_Activation):
    """softmax(-x) along axis (default -1)."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def construct(self, x):
        return ops.softmax(-x, self.axis)


class LeakyReLU(_Activation):
    """x for x >= 0, alpha * x otherwise (alpha default 0.2, as MindSpore)."""

    def __init__(self, alpha=0.2):
        super().__init__()
        self.alpha = float(alpha)

    def construct(self, x):
        return ops.relu(x) - ops.relu(-x) * self.alpha


class ReLU6(_Activation):
    """min(max(x, 0), 6)."""

    def construct(self, x):
        return ops.clamp(x, 0.0, 6.0)


class ELU(_Activation):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def construct(self, x):
        return ops.relu(x) + (ops.exp(-ops.relu(-x)) - 1.0) * self.alpha


class CELU(_Activation):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def construct(self, x):
        return ops.relu(x) + (ops.exp(-ops.relu(-x) / self.alpha) - 1.0) * self.alpha


class SeLU(_Activation):
    """scale * ELU(x, alpha) with the self-normalising constants."""

    _ALPHA = 1.6732632423543772
    _SCALE = 1.0507009873554805

    def construct(self, x):
        return (ops.relu(x) + (ops.exp(-ops.relu(-x)) - 1.0) * self._ALPHA) * self._SCALE


def _softplus(x):
    # max(x, 0) + log(1 + exp(-|x|)): no overflow for large |x|.
    return ops.relu(x) + ops.log(ops.exp(-ops.abs(x)) + 1.0)


class Softplus(_Activation):
    """log(1 + exp(x))."""

    def construct(self, x):
        return _softplus(x)


class Softsign(_Activation):
    """x / (1 + |x|)."""

    def construct(self, x):
        return x / (ops.abs(x) + 1.0)


class HSigmoid(_Activation):
    """relu6(x + 3) / 6."""

    def construct(self, x):
        return ops.clamp(x + 3.0, 0.0, 6.0) / 6.0


class HSwish(_Activation):
    """x * relu6(x + 3) / 6."""

    def construct(self, x):
        return x * ops.clamp(x + 3.0, 0.0, 6.0) / 6.0


class Hardtanh(_Activation):
    """clamp(x, min_val, max_val)."""

    def __init__(self, min_val=-1.0, max_val=1.0):
        super().__init__()
        self.min_val, self.max_val = float(min_val), float(max_val)

    def construct(self, x):
        return ops.clamp(x, self.min_val, self.max_val)


class Mish(_Activation):
    """x * tanh(softplus(x))."""

    def construct(self, x):
        return x * ops.tanh(_softplus(x))


class Tanhshrink(_Activation):
    """x - tanh(x)."""

    def construct(self, x):
        return x - ops.tanh(x)


