"""Higher-order gradients: zenith.grad(zenith.grad(f)) as in MindSpore, checked against central
finite differences of the first derivative in float64; ops computed in numpy (their derivative
attached as a constant slope) refuse a nested gradient instead of returning 0."""

import numpy as np
import pytest

import zenith as z
from zenith import nn, ops

RNG = np.random.default_rng(0)
X0 = RNG.uniform(0.3, 1.2, (3, 4))
COEF = np.linspace(0.5, 1.5, 12).reshape(3, 4)
W = z.Tensor(RNG.normal(size=(4, 5)))

CASES = {
    "tanh": lambda x: ops.tanh(x),
    "exp": lambda x: ops.exp(x),
    "log": lambda x: ops.log(x),
    "sigmoid": lambda x: ops.sigmoid(x),
    "sqrt": lambda x: ops.sqrt(x),
    "pow": lambda x: ops.pow(x, 3.0),
    "reciprocal": lambda x: 1.0 / x,
    "softmax": lambda x: ops.softmax(x, -1) * z.Tensor(np.arange(4.0)),
    "log_softmax": lambda x: ops.log_softmax(x, -1) * z.Tensor(np.arange(4.0)),
    "matmul": lambda x: ops.matmul(x * x, W),
    "mean": lambda x: (x * x).mean(),
    "gelu": lambda x: ops.gelu(x),
    "silu": lambda x: x * ops.sigmoid(x),
}


def _finite_difference(h, x0, eps=1e-6):
    out = np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        up, down = x0.copy(), x0.copy()
        up[i] += eps
        down[i] -= eps
        out[i] = (h(up) - h(down)) / (2 * eps)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_derivative_equals_finite_differences_of_the_first(name):
    f = CASES[name]
    first = z.grad(lambda x: f(x).sum())
    second = z.grad(lambda x: (first(x) * z.Tensor(COEF)).sum())
    got = second(z.Tensor(X0)).asnumpy()
    want = _finite_difference(
        lambda a: float((first(z.Tensor(a)).asnumpy() * COEF).sum()), X0)
    assert np.abs(want).max() > 1e-3  # not a zero that would hide a detached tape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8 * np.abs(want).max())


def test_third_derivative_of_a_cube():
    x = z.Tensor(np.array([0.5, -1.0, 2.0]))
    f = lambda t: (t * t * t).sum()
    d1 = z.grad(f)
    d2 = z.grad(lambda t: d1(t).sum())
    d3 = z.grad(lambda t: d2(t).sum())
    np.testing.assert_allclose(d1(x).asnumpy(), 3 * x.asnumpy() ** 2)
    np.testing.assert_allclose(d2(x).asnumpy(), 6 * x.asnumpy())
    np.testing.assert_allclose(d3(x).asnumpy(), [6.0, 6.0, 6.0])


def test_gradient_penalty_reaches_the_weights():
    """WGAN-GP's pattern: the input gradient's norm, differentiated with respect to the weights."""
    rng = np.random.default_rng(3)
    w1, b1 = (z.Parameter(z.Tensor(rng.normal(size=shape)), name=name)
              for shape, name in (((4, 6), "w1"), ((6,), "b1")))
    w2 = z.Parameter(z.Tensor(rng.normal(size=(6, 1))), name="w2")
    weights = [w1, b1, w2]

    def net(t):
        return ops.matmul(ops.tanh(ops.matmul(t, w1) + b1), w2)

    x = z.Tensor(X0)
    input_grad = z.grad(lambda t: net(t).sum())

    def penalty():
        return ((((input_grad(x) ** 2).sum(-1) - 1.0) ** 2).mean())

    grads = z.grad(penalty, None, weights)()
    w0 = weights[0]
    base = w0.asnumpy().copy()

    def at(a):
        w0.set_data(z.Tensor(a))
        value = float(penalty().asnumpy())
        w0.set_data(z.Tensor(base))
        return value

    want = _finite_difference(at, base)
    assert np.abs(want).max() > 1e-4
    np.testing.assert_allclose(grads[0].asnumpy(), want, rtol=1e-6,
                               atol=1e-8 * np.abs(want).max())


@pytest.mark.parametrize("op", ["sin", "atan", "erfinv", "bessel_j0", "prod"])
def test_an_op_computed_in_numpy_refuses_a_nested_gradient_naming_itself(op):
    fn = getattr(ops, op)
    x = z.Tensor(np.array([0.1, 0.2, 0.3]))
    call = (lambda t: fn(t, -1)) if op == "prod" else fn
    # Its first derivative flows ...
    assert np.abs(z.grad(lambda t: call(t).sum())(x).asnumpy()).max() > 0
    # ... a second one would be silently 0, so it is refused by name.
    inner = z.grad(lambda t: call(t).sum())
    with pytest.raises(NotImplementedError, match=rf"zenith\.ops\.{op}: second derivatives"):
        z.grad(lambda t: inner(t).sum())(x)
