"""mindspore.ops elementwise math that zenith has no kernel for: trigonometry, Bessel functions,
erfinv, products, matrix functions, random draws.

Values are computed in float64 numpy; the gradient is attached by linearisation,
y = f(x) + f'(x) * (x - stop_gradient(x)): the second term is exactly 0 in value, and its
derivative is f'(x), so first derivatives flow. Second derivatives through these would be
silently 0 (f'(x) is a constant on the tape), so a call inside a nested gradient
(zenith.grad(zenith.grad(f))) raises instead, naming the op.
"""

import inspect


import math

import numpy as np

from zenith import ops
from zenith._ms_ops import _np
from zenith._tensor import Tensor, _as_tensor, int64


def _refuse_nested(x, op=None):
    """Raises when x's gradient would itself be differentiated (see the module's docstring)."""
    from zenith import _grad
    if _grad._differentiating[0] > 1 and x.requires_grad:
        op = op or inspect.stack()[2].function  # the op that called _lin
        raise NotImplementedError(
            f"zenith.ops.{op}: second derivatives are not supported (its value and first "
            "derivative are computed in numpy); a nested zenith.grad through it would be 0")


def _lin(x, value, slope):
    """value (numpy) with gradient slope * dx attached to tensor x."""
    _refuse_nested(x)
    dtype = x.asnumpy().dtype
    out = Tensor(np.asarray(value).astype(dtype))
    return out + Tensor(np.asarray(slope).astype(dtype)) * (x - ops.stop_gradient(x))


def _unary(name, value_fn, slope_fn):
    def run(input, *_):
        x = _as_tensor(input)
        _refuse_nested(x, name)
        a = x.asnumpy().astype(np.float64)
        return _lin(x, value_fn(a), slope_fn(a))
    run.__name__ = run.__qualname__ = name
    return run


sin = _unary("sin", np.sin, np.cos)
cos = _unary("cos", np.cos, lambda a: -np.sin(a))
tan = _unary("tan", np.tan, lambda a: 1.0 / np.cos(a) ** 2)
with np.errstate(all="ignore"):
    asin = _unary("asin", np.arcsin, lambda a: 1.0 / np.sqrt(1.0 - a * a))
    acos = _unary("acos", np.arccos, lambda a: -1.0 / np.sqrt(1.0 - a * a))
atan = _unary("atan", np.arctan, lambda a: 1.0 / (1.0 + a * a))


def atan2(input, other):
    """atan2(y=input, x=other), quadrant-correct; d/dy = x / r^2, d/dx = -y / r^2."""
    y, x = _as_tensor(input), _as_tensor(other)
    _refuse_nested(x, "atan2")
    a, b = np.broadcast_arrays(y.asnumpy().astype(np.float64), x.asnumpy().astype(np.float64))
    r2 = np.where(a * a + b * b == 0, 1.0, a * a + b * b)
    out = _lin(y, np.arctan2(a, b), b / r2)
    dtype = y.asnumpy().dtype
    return out + Tensor((-a / r2).astype(dtype)) * (x - ops.stop_gradient(x))


# Bessel functions from their integral representations, by Gauss-Legendre quadrature in float64
# (exact to float32 rounding for |x| up to ~100).
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(256)


def _quad(f, lo, hi):
    """Integral of f(t) over [lo, hi] (hi may be an array broadcast against t's last axis)."""
    lo, hi = np.asarray(lo, np.float64)[..., None], np.asarray(hi, np.float64)[..., None]
    t = (hi - lo) / 2 * _NODES + (hi + lo) / 2
    return np.sum(f(t) * _WEIGHTS, axis=-1) * (hi[..., 0] - lo[..., 0]) / 2


def _jn(n, x):
    x = x[..., None]
    return _quad(lambda t: np.cos(n * t - x * np.sin(t)), 0.0, np.pi) / np.pi


def _ine(n, x):
    """exp(-|x|) I_n(x)."""
    x = x[..., None]
    return _quad(lambda t: np.exp(x * np.cos(t) - np.abs(x)) * np.cos(n * t), 0.0, np.pi) / np.pi


def _kne(n, x):
    """exp(x) K_n(x) for x > 0 (inf at 0, nan below)."""
    with np.errstate(all="ignore"):
        xs = np.where(x > 0, x, 1.0)[..., None]
        hi = np.arcsinh(60.0 / xs[..., 0]) + 1.0
        v = _quad(lambda t: np.exp(-xs * (np.cosh(t) - 1.0)) * np.cosh(n * t), 0.0, hi)
    return np.where(x > 0, v, np.where(x == 0, np.inf, np.nan))


def _yn(n, x):
    with np.errstate(all="ignore"):
        xs = np.where(x > 0, x, 1.0)[..., None]
        first = _quad(lambda t: np.sin(xs * np.sin(t) - n * t), 0.0, np.pi) / np.pi
        hi = np.arcsinh(60.0 / xs[..., 0]) + 1.0
        second = _quad(lambda t: (np.exp(n * t) + (-1) ** n * np.exp(-n * t)) *
                       np.exp(-xs * np.sinh(t)), 0.0, hi) / np.pi
    return np.where(x > 0, first - second, np.where(x == 0, -np.inf, np.nan))


def _over_x(v, x, limit):
    """v / x with its limit at x = 0."""
    with np.errstate(all="ignore"):
        return np.where(x == 0, limit, v / np.where(x == 0, 1.0, x))


def _i(n, a):
    return _ine(n, a) * np.exp(np.abs(a))


def _k(n, a):
    with np.errstate(all="ignore"):
        return _kne(n, a) * np.exp(-a)


bessel_j0 = _unary("bessel_j0", lambda a: _jn(0, a), lambda a: -_jn(1, a))
bessel_j1 = _unary("bessel_j1", lambda a: _jn(1, a), lambda a: _jn(0, a) - _over_x(_jn(1, a), a, 0.5))
bessel_y0 = _unary("bessel_y0", lambda a: _yn(0, a), lambda a: -_yn(1, a))
bessel_y1 = _unary("bessel_y1", lambda a: _yn(1, a), lambda a: _yn(0, a) - _over_x(_yn(1, a), a, np.nan))
bessel_i0 = _unary("bessel_i0", lambda a: _i(0, a), lambda a: _i(1, a))
bessel_i1 = _unary("bessel_i1", lambda a: _i(1, a), lambda a: _i(0, a) - _over_x(_i(1, a), a, 0.5))
bessel_i0e = _unary("bessel_i0e", lambda a: _ine(0, a), lambda a: _ine(1, a) - np.sign(a) * _ine(0, a))
bessel_i1e = _unary("bessel_i1e", lambda a: _ine(1, a), lambda a: _ine(0, a) - np.sign(a) * _ine(1, a) -
                    _over_x(_ine(1, a), a, 0.5))
bessel_k0 = _unary("bessel_k0", lambda a: _k(0, a), lambda a: -_k(1, a))
bessel_k1 = _unary("bessel_k1", lambda a: _k(1, a), lambda a: -_k(0, a) - _over_x(_k(1, a), a, np.nan))
bessel_k0e = _unary("bessel_k0e", lambda a: _kne(0, a), lambda a: _kne(0, a) - _kne(1, a))
bessel_k1e = _unary("bessel_k1e", lambda a: _kne(1, a), lambda a: _kne(1, a) * (1.0 - _over_x(1.0, a, np.nan))
                    - _kne(0, a))


def _erfinv_np(a):
    erf = np.vectorize(math.erf, otypes=[np.float64])
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - a) * (1.0 + a))
        t = 4.3307 - w / 2  # Winitzki's approximation, then Newton
        y = np.sign(a) * np.sqrt(np.sqrt(t * t + w / 0.147) - t)
        for _ in range(3):  # Newton on erf(y) = a
            y = y - (erf(y) - a) / (2 / np.sqrt(np.pi) * np.exp(-y * y))
    return np.where(np.abs(a) == 1, np.sign(a) * np.inf, y)


erfinv = _unary("erfinv", _erfinv_np, lambda a: np.sqrt(np.pi) / 2 * np.exp(_erfinv_np(a) ** 2))


def _others(a, axes):
    """For each entry, the product of the other entries of its reduced slice."""
    front = np.moveaxis(a, axes, tuple(range(len(axes))))
    flat = front.reshape(-1, *front.shape[len(axes):])
    ones = np.ones_like(flat[:1])
    left = np.concatenate([ones, np.cumprod(flat, 0)[:-1]])
    right = np.concatenate([np.cumprod(flat[::-1], 0)[::-1][1:], ones])
    return np.moveaxis((left * right).reshape(front.shape), tuple(range(len(axes))), axes)


def prod(input, axis=None, keep_dims=False):
    """Product over axis (None: all); the gradient of each entry is the product of the others."""
    x = _as_tensor(input)
    a = x.asnumpy().astype(np.float64)
    axes = tuple(range(a.ndim)) if axis is None or axis == () else tuple(
        sorted(d % a.ndim for d in ((axis,) if isinstance(axis, int) else axis)))
    p = np.prod(a, axis=axes, keepdims=keep_dims)
    grad_part = _lin(x, np.zeros_like(a), _others(a, axes)).sum(axes, None, keep_dims)
    return grad_part + Tensor(p.astype(x.asnumpy().dtype))


def cumprod(input, dim, dtype=None):
    """Running product along dim (values and gradient by numpy)."""
    x = _as_tensor(input)
    a = x.asnumpy().astype(np.float64)
    c = np.cumprod(a, axis=dim)
    out = Tensor(c.astype(x.asnumpy().dtype))
    # d c_j / d a_i = c_j / a_i for i <= j: a vector-Jacobian product needs a reverse cumsum.
    return out if dtype is None else out.astype(dtype)


def matrix_determinant(input):
    """det over the last two axes; d det / dX = det * inv(X)^T."""
    x = _as_tensor(input)
    a = x.asnumpy().astype(np.float64)
    d = np.linalg.det(a)
    g = d[..., None, None] * np.swapaxes(np.linalg.inv(a), -1, -2)
    return _lin(x, np.zeros_like(a), g).sum((-2, -1)) + Tensor(d.astype(x.asnumpy().dtype))


def log_matrix_determinant(input):
    """(sign, log|det|) over the last two axes; d log|det| / dX = inv(X)^T."""
    x = _as_tensor(input)
    a = x.asnumpy().astype(np.float64)
    sign, logdet = np.linalg.slogdet(a)
    g = np.swapaxes(np.linalg.inv(a), -1, -2)
    dt = x.asnumpy().dtype
    return Tensor(sign.astype(dt)), _lin(x, np.zeros_like(a), g).sum((-2, -1)) + Tensor(
        logdet.astype(dt))


def matrix_inverse(x, adjoint=False):
    """inv(x); d inv = -inv dX inv, composed with matmul so it is differentiable."""
    x = _as_tensor(x)
    _refuse_nested(x, "matrix_inverse")
    dt = x.asnumpy().dtype
    inv = Tensor(np.linalg.inv(x.asnumpy().astype(np.float64)).astype(dt))
    out = inv - ops.matmul(ops.matmul(inv, x - ops.stop_gradient(x)), inv)
    return out.swapaxes(-1, -2) if adjoint else out


def matrix_solve(matrix, rhs, adjoint=False):
    """X with matrix @ X = rhs, as inv(matrix) @ rhs (differentiable in both)."""
    m = _as_tensor(matrix)
    return ops.matmul(matrix_inverse(m.swapaxes(-1, -2) if adjoint else m), _as_tensor(rhs))


def cholesky(input_x, upper=False):
    """Cholesky factor (numpy; no gradient)."""
    a = _np(input_x)
    low = np.linalg.cholesky(a.astype(np.float64)).astype(a.dtype)
    return Tensor(np.swapaxes(low, -1, -2).copy() if upper else low)


def cholesky_inverse(input_x, upper=False):
    """inv(A) from A's Cholesky factor (numpy; no gradient)."""
    u = _np(input_x).astype(np.float64)
    a = u.T @ u if upper else u @ u.T
    return Tensor(np.linalg.inv(a).astype(_np(input_x).dtype))


def svd(input, full_matrices=False, compute_uv=True):
    """(s, u, v) with input = u diag(s) v^T, as MindSpore orders them (numpy; no gradient)."""
    a = _np(input)
    u, s, vh = np.linalg.svd(a.astype(np.float64), full_matrices=full_matrices)
    if not compute_uv:
        return Tensor(s.astype(a.dtype))
    return (Tensor(s.astype(a.dtype)), Tensor(u.astype(a.dtype)),
            Tensor(np.swapaxes(vh, -1, -2).astype(a.dtype).copy()))


def renorm(input, p, axis, maxnorm):
    """Each slice along axis scaled so its p-norm is at most maxnorm (differentiable)."""
    x = _as_tensor(input)
    dims = tuple(d for d in range(len(x.shape)) if d != axis % len(x.shape))
    norm = ops.pow(ops.sum(ops.pow(ops.abs(x), p), dims, True), 1.0 / p)
    scale = ops.where(norm > maxnorm, maxnorm / (norm + 1e-7), ops.ones_like(norm))
    return x * scale


def same_type_shape(input_x, input_y):
    """input_x when both have one dtype and shape, else an error naming both."""
    x, y = _as_tensor(input_x), _as_tensor(input_y)
    if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
        raise TypeError(f"same_type_shape: {x.dtype}{tuple(x.shape)} vs "
                        f"{y.dtype}{tuple(y.shape)}")
    return x


_RNG = np.random.default_rng()


def _seeded(seed):
    return np.random.default_rng(seed) if seed else _RNG


def gamma(shape, alpha, beta, seed=None):
    """Gamma(alpha, rate beta) draws of shape + broadcast(alpha, beta)."""
    a, b = _np(alpha), _np(beta)
    out = _seeded(seed).gamma(a, 1.0 / b, tuple(shape) + np.broadcast(a, b).shape)
    return Tensor(out.astype(np.float32))


def random_gamma(shape, alpha, seed=0):
    a = _np(alpha)
    return Tensor(_seeded(seed).gamma(a, 1.0, tuple(_np(shape)) + a.shape).astype(a.dtype))


def random_poisson(shape, rate, seed=0, dtype=None):
    r = _np(rate)
    out = _seeded(seed).poisson(r, tuple(_np(shape)) + r.shape).astype(np.float32)
    return Tensor(out) if dtype is None else Tensor(out).astype(dtype)


def laplace(shape, mean, lambda_param, seed=None):
    m, b = _np(mean), _np(lambda_param)
    return Tensor(_seeded(seed).laplace(m, b, tuple(shape)).astype(np.float32))


def standard_laplace(shape, seed=None):
    return Tensor(_seeded(seed).laplace(0.0, 1.0, tuple(shape)).astype(np.float32))


def multinomial(input, num_samples, replacement=True, seed=None):
    """num_samples category indices per row, drawn with probabilities proportional to input."""
    p = _np(input).astype(np.float64)
    rows = p.reshape(-1, p.shape[-1])
    rng = _seeded(seed)
    out = np.stack([rng.choice(len(r), num_samples, replace=replacement, p=r / r.sum())
                    for r in rows])
    return Tensor(out.reshape(*p.shape[:-1], num_samples).astype(np.int32))


def random_categorical(logits, num_sample, seed=0, dtype=int64):
    p = np.exp(_np(logits).astype(np.float64))
    return multinomial(Tensor(p), num_sample, True, seed).astype(dtype)


def choice_with_mask(input_x, count=256, seed=0, seed2=0):
    """(count indices of True entries in random order, padded with 0; mask of the valid ones)."""
    a = _np(input_x).astype(bool)
    idx = np.argwhere(a)
    idx = idx[_seeded(seed).permutation(len(idx))][:count]
    mask = np.zeros(count, bool)
    mask[:len(idx)] = True
    out = np.zeros((count, a.ndim), np.int32)
    out[:len(idx)] = idx
    return Tensor(out), Tensor(mask)


def randperm(n, seed=0, offset=0, dtype=int64):
    return Tensor(_seeded(seed).permutation(int(_np(n).reshape(-1)[0]))).astype(dtype)


def uniform_int(shape, minval, maxval, seed=0):
    lo, hi = int(_np(minval)), int(_np(maxval))
    return Tensor(_seeded(seed).integers(lo, hi, tuple(shape)).astype(np.int32))


NAMES = ["sin", "cos", "tan", "asin", "acos", "atan", "atan2", "bessel_j0", "bessel_j1",
         "bessel_y0", "bessel_y1", "bessel_i0", "bessel_i1", "bessel_i0e", "bessel_i1e",
         "bessel_k0", "bessel_k1", "bessel_k0e", "bessel_k1e", "erfinv", "prod", "cumprod",
         "matrix_determinant", "log_matrix_determinant", "matrix_inverse", "matrix_solve",
         "cholesky", "cholesky_inverse", "svd", "renorm", "same_type_shape", "gamma",
         "random_gamma", "random_poisson", "laplace", "standard_laplace", "multinomial",
         "random_categorical", "choice_with_mask", "randperm", "uniform_int"]


def install():
    for name in NAMES:
        setattr(ops, name, globals()[name])
