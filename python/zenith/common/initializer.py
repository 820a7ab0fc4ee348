"""Initializers with MindSpore's names (mindspore.common.initializer): One(), Zero(),
Constant(v), Normal(sigma, mean), Uniform(scale), TruncatedNormal(sigma), XavierUniform(gain),
HeUniform(), HeNormal(), and initializer(init, shape, dtype) giving a Tensor. Random ones draw
from zenith's global generator (seeded by zenith.set_seed)."""

import math

import numpy as np

from zenith import _zenith as _C
from zenith._tensor import Tensor, float32

__all__ = ["Initializer", "One", "Zero", "Constant", "Normal", "Uniform", "TruncatedNormal",
           "XavierUniform", "XavierNormal", "HeUniform", "HeNormal", "initializer"]


def _fans(shape):
    if len(shape) < 2:
        return shape[0] if shape else 1, shape[0] if shape else 1
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


class Initializer:
    """Fills a float tensor in place: init(tensor)."""

    def fill(self, t):
        raise NotImplementedError

    def __call__(self, t):
        self.fill(t)
        return t


class Constant(Initializer):
    """Every element value."""

    def __init__(self, value):
        self.value = float(value)

    def fill(self, t):
        _C.nn.init.constant_(t, self.value)


class One(Constant):
    """Every element 1."""

    def __init__(self):
        super().__init__(1.0)


class Zero(Constant):
    """Every element 0."""

    def __init__(self):
        super().__init__(0.0)


class Normal(Initializer):
    """N(mean, sigma^2) (MindSpore's defaults: sigma 0.01, mean 0)."""

    def __init__(self, sigma=0.01, mean=0.0):
        self.sigma, self.mean = float(sigma), float(mean)

    def fill(self, t):
        _C.nn.init.normal_(t, self.mean, self.sigma)


class Uniform(Initializer):
    """U(-scale, scale) (default scale 0.07)."""

    def __init__(self, scale=0.07):
        self.scale = float(scale)

    def fill(self, t):
        _C.nn.init.uniform_(t, -self.scale, self.scale)


class TruncatedNormal(Initializer):
    """N(0, sigma^2) redrawn outside [-2 sigma, 2 sigma]."""

    def __init__(self, sigma=0.01):
        self.sigma = float(sigma)

    def fill(self, t):
        _C.nn.init.normal_(t, 0.0, self.sigma)
        a = t.asnumpy()
        while True:
            bad = np.abs(a) > 2 * self.sigma
            if not bad.any():
                break
            fresh = Tensor(shape=(int(bad.sum()),), dtype=t.dtype)
            _C.nn.init.normal_(fresh, 0.0, self.sigma)
            a[bad] = fresh.asnumpy()


class XavierUniform(Initializer):
    """U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out))."""

    def __init__(self, gain=1):
        self.gain = float(gain)

    def fill(self, t):
        fan_in, fan_out = _fans(tuple(t.shape))
        b = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        _C.nn.init.uniform_(t, -b, b)


class XavierNormal(Initializer):
    """N(0, s^2), s = gain * sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, gain=1):
        self.gain = float(gain)

    def fill(self, t):
        fan_in, fan_out = _fans(tuple(t.shape))
        _C.nn.init.normal_(t, 0.0, self.gain * math.sqrt(2.0 / (fan_in + fan_out)))


class HeUniform(Initializer):
    """U(-b, b), b = sqrt(6 / ((1 + a^2) fan_in)) (mode 'fan_in')."""

    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        self.a, self.mode = float(negative_slope), mode

    def fill(self, t):
        fan_in, fan_out = _fans(tuple(t.shape))
        fan = fan_in if self.mode == "fan_in" else fan_out
        b = math.sqrt(6.0 / ((1 + self.a ** 2) * fan))
        _C.nn.init.uniform_(t, -b, b)


class HeNormal(Initializer):
    """N(0, s^2), s = sqrt(2 / ((1 + a^2) fan_in)) (mode 'fan_in')."""

    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        self.a, self.mode = float(negative_slope), mode

    def fill(self, t):
        fan_in, fan_out = _fans(tuple(t.shape))
        fan = fan_in if self.mode == "fan_in" else fan_out
        _C.nn.init.normal_(t, 0.0, math.sqrt(2.0 / ((1 + self.a ** 2) * fan)))


_BY_NAME = {"ones": One, "zeros": Zero, "normal": Normal, "uniform": Uniform,
            "truncatednormal": TruncatedNormal, "xavier_uniform": XavierUniform,
            "xavieruniform": XavierUniform, "xavier_normal": XavierNormal,
            "he_uniform": HeUniform, "heuniform": HeUniform, "he_normal": HeNormal,
            "henormal": HeNormal}


def _as_initializer(init):
    if isinstance(init, Initializer):
        return init
    if isinstance(init, str):
        key = init.lower()
        if key not in _BY_NAME:
            raise ValueError(f"initializer: unknown name {init!r} (known: {sorted(_BY_NAME)})")
        return _BY_NAME[key]()
    if isinstance(init, (int, float)) and not isinstance(init, bool):
        return Constant(init)
    raise TypeError(f"initializer: init must be an Initializer, a name or a number, got "
                    f"{type(init).__name__}")


def initializer(init, shape=None, dtype=float32):
    """A Tensor of shape and dtype filled by init (an Initializer, its name, a number, or a
    Tensor returned as is)."""
    if isinstance(init, Tensor):
        return init
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    t = Tensor(shape=shape, dtype=float32)
    _as_initializer(init).fill(t)
    return t if dtype == float32 else t.astype(dtype)
