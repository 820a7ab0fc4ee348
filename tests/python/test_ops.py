"""zenith.ops against numpy: every op's values, and its gradient against central differences
of the numpy reference (float64, random output weights)."""

import math

import numpy as np
import pytest

import zenith
from zenith import Tensor, ops

RNG = np.random.default_rng(1234)


def normal(*shape):
    return RNG.normal(size=shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.0, size=shape)


def numeric_grad(f, x, eps=1e-6):
    """d f / d x of a scalar numpy function, by central differences."""
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = f()
        flat[i] = keep - eps
        down = f()
        flat[i] = keep
        gflat[i] = (up - down) / (2 * eps)
    return g


def check(op, ref, inputs, grads=(0,), rtol=1e-6, atol=1e-8, grad_rtol=1e-5):
    """op(*tensors) == ref(*arrays), and d sum(w * op) / d inputs[grads] == numpy's."""
    inputs = [np.array(a, dtype=np.float64) if isinstance(a, (np.ndarray, float)) else a
              for a in inputs]
    tensors = [Tensor(a) if isinstance(a, np.ndarray) else a for a in inputs]
    out = op(*tensors)
    expected = ref(*inputs)
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=rtol, atol=atol)
    if not grads:
        return
    w = RNG.normal(size=np.shape(expected))

    def loss(*ts):
        return (op(*ts) * Tensor(w)).sum()

    got = zenith.grad(loss, grad_position=tuple(grads))(*tensors)
    for k, pos in enumerate(grads):
        x = inputs[pos]
        num = numeric_grad(lambda: float((ref(*inputs) * w).sum()), x)
        np.testing.assert_allclose(got[k].asnumpy(), num, rtol=grad_rtol, atol=1e-7,
                                   err_msg=f"gradient of input {pos}")


# ---- elementwise


@pytest.mark.parametrize("name,ref", [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
    ("maximum", np.maximum), ("minimum", np.minimum)])
def test_binary_broadcast(name, ref):
    check(getattr(ops, name), ref, [positive(3, 1, 4), positive(2, 4)], grads=(0, 1))


def test_pow_tensor_and_scalar_exponent():
    check(ops.pow, np.power, [positive(3, 4), normal(3, 4)], grads=(0, 1))
    check(lambda x: ops.pow(x, 3), lambda x: x ** 3, [normal(5)])
    check(lambda x: ops.pow(x, 0.5), np.sqrt, [positive(5)])


def test_scalar_operands():
    check(lambda x: ops.add(x, 2.0), lambda x: x + 2.0, [normal(4)])
    check(lambda x: ops.sub(1.0, x), lambda x: 1.0 - x, [normal(4)])
    check(lambda x: ops.mul(x, 3), lambda x: x * 3, [normal(4)])
    assert ops.add(1, 2).item() == 3
    assert ops.div(Tensor([1, 2]), 2).dtype == zenith.float32


def _erf(x):
    return np.vectorize(math.erf)(x)


@pytest.mark.parametrize("name,ref,make", [
    ("neg", np.negative, normal), ("exp", np.exp, normal), ("log", np.log, positive),
    ("sqrt", np.sqrt, positive), ("rsqrt", lambda x: 1 / np.sqrt(x), positive),
    ("abs", np.abs, positive), ("tanh", np.tanh, normal),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), normal), ("relu", lambda x: np.maximum(x, 0),
                                                          positive),
    ("silu", lambda x: x / (1 + np.exp(-x)), normal), ("square", np.square, normal),
    ("erf", _erf, normal)])
def test_unary(name, ref, make):
    check(getattr(ops, name), ref, [make(3, 5)])


def test_relu_and_abs_away_from_the_kink():
    x = np.array([-2.0, -0.5, 0.5, 3.0])
    check(ops.relu, lambda v: np.maximum(v, 0), [x])
    check(ops.abs, np.abs, [x])


def test_gelu_exact_and_tanh():
    check(ops.gelu, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), [normal(6)])
    tanh = lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    check(lambda x: ops.gelu(x, approximate="tanh"), tanh, [normal(6)])
    with pytest.raises(ValueError):
        ops.gelu(Tensor([1.0]), approximate="fast")


def test_cast_is_differentiable_between_floats():
    check(lambda x: ops.cast(x, zenith.float32).astype(zenith.float64), lambda x: x,
          [normal(4)], rtol=1e-6, atol=1e-6, grad_rtol=1e-4)
    assert ops.cast(Tensor([1.6]), zenith.int32).item() == 1


# ---- comparisons and selection


@pytest.mark.parametrize("name,ref", [
    ("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
    ("less_equal", np.less_equal), ("greater", np.greater), ("greater_equal", np.greater_equal)])
def test_comparisons(name, ref):
    a, b = RNG.integers(0, 3, (4, 5)), RNG.integers(0, 3, (5,))
    out = getattr(ops, name)(Tensor(a), Tensor(b))
    assert out.dtype == zenith.bool_
    np.testing.assert_array_equal(out.asnumpy(), ref(a, b))


def test_where_and_masked_fill():
    cond = RNG.random((3, 4)) > 0.5
    check(lambda a, b: ops.where(Tensor(cond), a, b), lambda a, b: np.where(cond, a, b),
          [normal(3, 4), normal(4)], grads=(0, 1))
    mask = RNG.random((3, 4)) > 0.5
    check(lambda x: ops.masked_fill(x, Tensor(mask), -1.5),
          lambda x: np.where(mask, -1.5, x), [normal(3, 4)])


# ---- reductions


def test_sum_mean_over_axes():
    check(lambda x: ops.sum(x), lambda x: x.sum(), [normal(3, 4)])
    check(lambda x: ops.sum(x, (0, 2), keepdim=True), lambda x: x.sum((0, 2), keepdims=True),
          [normal(2, 3, 4)])
    check(lambda x: ops.mean(x, 1), lambda x: x.mean(1), [normal(2, 3, 4)])
    check(lambda x: ops.mean(x, axis=-1, keep_dims=True), lambda x: x.mean(-1, keepdims=True),
          [normal(2, 3)])


def test_max_min_amax_amin_argmax_argmin():
    x = RNG.permutation(24).reshape(2, 3, 4).astype(np.float64)  # distinct values
    check(lambda t: ops.amax(t, 1), lambda a: a.max(1), [x])
    check(lambda t: ops.amin(t, axis=2, keepdims=True), lambda a: a.min(2, keepdims=True), [x])
    check(lambda t: ops.amax(t), lambda a: a.max(), [x])
    check(lambda t: ops.amin(t), lambda a: a.min(), [x])
    values, indices = ops.max(Tensor(x), axis=0)
    np.testing.assert_array_equal(values.asnumpy(), x.max(0))
    np.testing.assert_array_equal(indices.asnumpy(), x.argmax(0))
    values, indices = ops.min(Tensor(x), axis=2)
    np.testing.assert_array_equal(indices.asnumpy(), x.argmin(2))
    assert ops.argmax(Tensor(x)).item() == x.argmax()
    np.testing.assert_array_equal(ops.argmax(Tensor(x), 1).asnumpy(), x.argmax(1))
    np.testing.assert_array_equal(ops.argmin(Tensor(x), 1, keepdims=True).asnumpy(),
                                  x.argmin(1)[:, None])
    assert ops.argmax(Tensor(x)).dtype == zenith.int64


def test_var_std():
    check(lambda x: ops.var(x, 1), lambda x: x.var(1), [normal(3, 5)])
    check(lambda x: ops.var(x, ddof=1), lambda x: x.var(ddof=1), [normal(3, 5)])
    check(lambda x: ops.std(x, 0, keepdims=True), lambda x: x.std(0, keepdims=True),
          [normal(4, 3)])


# ---- linear algebra, convolution, pooling


def test_matmul_and_dense():
    check(ops.matmul, np.matmul, [normal(2, 3, 4), normal(4, 5)], grads=(0, 1))
    check(ops.matmul, np.matmul, [normal(4), normal(4, 2)], grads=(0, 1))
    check(ops.dense, lambda x, w, b: x @ w.T + b, [normal(3, 4), normal(2, 4), normal(2)],
          grads=(0, 1, 2))
    check(lambda x, w: ops.dense(x, w), lambda x, w: x @ w.T, [normal(3, 4), normal(2, 4)],
          grads=(0, 1))


def conv2d_ref(x, w, b, stride, pad, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (x.shape[2] - dilation * (kh - 1) - 1) // stride + 1
    ow = (x.shape[3] - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(oh):
            for j in range(ow):
                patch = xs[:, :, i * stride:i * stride + dilation * (kh - 1) + 1:dilation,
                           j * stride:j * stride + dilation * (kw - 1) + 1:dilation]
                out[:, g * og:(g + 1) * og, i, j] = np.einsum(
                    "nchw,ochw->no", patch, w[g * og:(g + 1) * og])
    return out + (0 if b is None else b[None, :, None, None])


@pytest.mark.parametrize("stride,pad_mode,padding,dilation,groups", [
    (1, "valid", 0, 1, 1), (2, "pad", 1, 1, 1), (1, "same", 0, 1, 1), (1, "valid", 0, 2, 1),
    (1, "pad", 1, 1, 2)])
def test_conv2d(stride, pad_mode, padding, dilation, groups):
    x, w, b = normal(2, 4, 7, 7), normal(6, 4 // groups, 3, 3), normal(6)
    pad = {"valid": 0, "pad": padding, "same": 1}[pad_mode]
    check(lambda x_, w_, b_: ops.conv2d(x_, w_, b_, stride, pad_mode, padding, dilation, groups),
          lambda x_, w_, b_: conv2d_ref(x_, w_, b_, stride, (pad, pad), dilation, groups),
          [x, w, b], grads=(0, 1, 2), rtol=1e-5, atol=1e-6, grad_rtol=1e-4)


def pool_ref(x, k, s, p, reduce, fill):
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    oh, ow = (x.shape[2] - k) // s + 1, (x.shape[3] - k) // s + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = reduce(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return out


def test_pooling():
    x = RNG.permutation(2 * 3 * 6 * 6).reshape(2, 3, 6, 6).astype(np.float64) / 10
    check(lambda t: ops.max_pool2d(t, 2), lambda a: pool_ref(a, 2, 2, 0, np.max, -np.inf), [x])
    check(lambda t: ops.max_pool2d(t, 3, 1, 1), lambda a: pool_ref(a, 3, 1, 1, np.max, -np.inf),
          [x])
    check(lambda t: ops.avg_pool2d(t, 2, 2), lambda a: pool_ref(a, 2, 2, 0, np.mean, 0), [x])
    check(lambda t: ops.avg_pool2d(t, 3, 1, 1), lambda a: pool_ref(a, 3, 1, 1, np.mean, 0), [x])
    check(lambda t: ops.adaptive_avg_pool2d(t, 3), lambda a: pool_ref(a, 2, 2, 0, np.mean, 0),
          [x])
    with pytest.raises(ValueError):
        ops.avg_pool2d(Tensor(x), 2, ceil_mode=True)


# ---- normalisation, dropout


def test_batch_norm_training_and_eval():
    x, w, b = normal(4, 3, 2, 2), positive(3), normal(3)

    def ref(x_, w_, b_):
        mean = x_.mean((0, 2, 3), keepdims=True)
        var = x_.var((0, 2, 3), keepdims=True)
        return (x_ - mean) / np.sqrt(var + 1e-5) * w_[None, :, None, None] + b_[None, :, None,
                                                                                 None]

    check(lambda x_, w_, b_: ops.batch_norm(x_, None, None, w_, b_, training=True),
          ref, [x, w, b], grads=(0, 1, 2), grad_rtol=1e-4)
    mean, var = Tensor(np.zeros(3)), Tensor(np.ones(3))
    ops.batch_norm(Tensor(x), mean, var, Tensor(w), Tensor(b), training=True, momentum=0.1)
    np.testing.assert_allclose(mean.asnumpy(), 0.1 * x.mean((0, 2, 3)), rtol=1e-6)
    n = x.size / 3
    np.testing.assert_allclose(var.asnumpy(), 0.9 + 0.1 * x.var((0, 2, 3)) * n / (n - 1),
                               rtol=1e-6)
    out = ops.batch_norm(Tensor(x), mean, var, Tensor(w), Tensor(b), training=False)
    expected = (x - mean.asnumpy()[None, :, None, None]) / np.sqrt(
        var.asnumpy()[None, :, None, None] + 1e-5) * w[None, :, None, None] + b[None, :, None,
                                                                                 None]
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-6)


def test_layer_norm_and_rms_norm():
    def ln(x, w, b):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w + b

    check(lambda x, w, b: ops.layer_norm(x, (5,), w, b), ln, [normal(3, 5), positive(5),
                                                              normal(5)],
          grads=(0, 1, 2), grad_rtol=1e-4)
    check(lambda x: ops.layer_norm(x, 5), lambda x: ln(x, 1.0, 0.0), [normal(2, 5)],
          grad_rtol=1e-4)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w

    check(ops.rms_norm, rms, [normal(3, 4), positive(4)], grads=(0, 1), grad_rtol=1e-4)


def test_dropout():
    x = Tensor(np.ones((200, 50)))
    np.testing.assert_array_equal(ops.dropout(x, 0.5, training=False).asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(ops.dropout(x, 0.0).asnumpy(), x.asnumpy())
    y = ops.dropout(x, 0.5).asnumpy()
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert 0.45 < (y == 0).mean() < 0.55


# ---- softmax and losses


def log_softmax_ref(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def test_softmax_log_softmax():
    check(lambda x: ops.softmax(x), lambda x: np.exp(log_softmax_ref(x)), [normal(3, 5)])
    check(lambda x: ops.log_softmax(x, 0), lambda x: log_softmax_ref(x, 0), [normal(3, 5)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_indices(reduction):
    labels = np.array([0, 3, 1, 3])

    def ref(x):
        nll = -log_softmax_ref(x)[np.arange(4), labels]
        return {"mean": nll.mean(), "sum": nll.sum(), "none": nll}[reduction]

    check(lambda x: ops.cross_entropy(x, Tensor(labels), reduction=reduction), ref,
          [normal(4, 5)])
    check(lambda x: ops.cross_entropy(x, Tensor(labels.astype(np.int32)), reduction=reduction),
          ref, [normal(4, 5)])


def test_cross_entropy_probabilities_smoothing_ignore_index():
    target = RNG.dirichlet(np.ones(5), size=4)
    check(lambda x, t: ops.cross_entropy(x, t), lambda x, t: -(t * log_softmax_ref(x)).sum(1).mean(),
          [normal(4, 5), target], grads=(0, 1))
    labels = np.array([1, -100, 2, 4])
    keep = labels != -100

    def smooth(x):
        lp = log_softmax_ref(x)[keep]
        nll = -lp[np.arange(keep.sum()), labels[keep]]
        return (0.9 * nll + 0.1 * -lp.mean(1)).mean()

    check(lambda x: ops.cross_entropy(x, Tensor(labels), label_smoothing=0.1), smooth,
          [normal(4, 5)])
    with pytest.raises(ValueError):
        ops.cross_entropy(Tensor(normal(2, 3)), Tensor([0, 1]), weight=Tensor([1.0, 1.0, 1.0]))


def test_mse_loss():
    check(ops.mse_loss, lambda a, b: ((a - b) ** 2).mean(), [normal(3, 4), normal(3, 4)],
          grads=(0, 1))
    check(lambda a, b: ops.mse_loss(a, b, "none"), lambda a, b: (a - b) ** 2,
          [normal(3), normal(3)], grads=(0, 1))


# ---- indexing, joining and shapes


def test_embedding_gather_index_select():
    idx = np.array([[0, 2], [3, 0]])
    check(lambda w: ops.embedding(Tensor(idx), w), lambda w: w[idx], [normal(4, 3)])
    check(lambda x: ops.index_select(x, 1, Tensor([2, 0])), lambda x: x[:, [2, 0]],
          [normal(3, 4)])
    check(lambda x: ops.gather(x, Tensor(idx), 0), lambda x: x[idx], [normal(4, 3)])
    check(lambda x: ops.gather(x, Tensor([1, 1]), 1), lambda x: x[:, [1, 1]], [normal(2, 3)])
    index = np.array([[0, 1, 0], [2, 0, 1]])
    check(lambda x: ops.gather_elements(x, 0, Tensor(index)),
          lambda x: np.take_along_axis(x, index, 0), [normal(3, 3)])


def test_cat_concat_stack():
    check(lambda a, b: ops.cat([a, b], 1), lambda a, b: np.concatenate([a, b], 1),
          [normal(2, 3), normal(2, 2)], grads=(0, 1))
    check(lambda a, b: ops.concat((a, b)), lambda a, b: np.concatenate([a, b]),
          [normal(1, 3), normal(2, 3)], grads=(0, 1))
    check(lambda a, b: ops.stack([a, b], 1), lambda a, b: np.stack([a, b], 1),
          [normal(2, 3), normal(2, 3)], grads=(0, 1))


def test_shape_ops():
    check(lambda x: ops.reshape(x, (4, 3)), lambda x: x.reshape(4, 3), [normal(2, 6)])
    check(lambda x: ops.transpose(x, (1, 0, 2)), lambda x: x.transpose(1, 0, 2), [normal(2, 3, 4)])
    check(lambda x: ops.permute(x, (2, 0, 1)), lambda x: x.transpose(2, 0, 1), [normal(2, 3, 4)])
    check(lambda x: ops.flatten(x), lambda x: x.reshape(2, -1), [normal(2, 3, 4)])
    check(lambda x: ops.flatten(x, start_dim=0), lambda x: x.reshape(-1), [normal(2, 3)])
    check(lambda x: ops.squeeze(x), np.squeeze, [normal(1, 3, 1)])
    check(lambda x: ops.squeeze(x, 2), lambda x: x.squeeze(2), [normal(1, 3, 1)])
    check(lambda x: ops.unsqueeze(x, 1), lambda x: x[:, None], [normal(2, 3)])
    check(lambda x: ops.expand_dims(x, 0), lambda x: x[None], [normal(2, 3)])
    check(lambda x: ops.broadcast_to(x, (4, 3)), lambda x: np.broadcast_to(x, (4, 3)),
          [normal(1, 3)])
    check(lambda x: ops.clamp(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
          [np.array([-2.0, -0.2, 0.3, 1.0])])
    check(lambda x: ops.clip(x, min=0.0), lambda x: np.maximum(x, 0.0),
          [np.array([-2.0, 0.3])])


def test_stop_gradient():
    def f(x):
        return (x * ops.stop_gradient(x)).sum()

    x = Tensor(np.array([1.0, 2.0]))
    np.testing.assert_allclose(zenith.grad(f)(x).asnumpy(), [1.0, 2.0])


# ---- creation


def test_creation():
    assert ops.zeros((2, 3)).asnumpy().tolist() == [[0.0] * 3] * 2
    assert ops.zeros(4, zenith.int32).dtype == zenith.int32
    assert ops.ones((2,), zenith.float64).asnumpy().tolist() == [1.0, 1.0]
    assert ops.full((2,), 7).dtype == zenith.int64 and ops.full((2,), 7).item is not None
    assert ops.full((1,), True).dtype == zenith.bool_
    assert ops.full([2, 2], 1.5).asnumpy().sum() == 6.0
    x = Tensor(np.ones((2, 3), np.float64))
    assert ops.zeros_like(x).dtype == zenith.float64 and ops.zeros_like(x).shape == (2, 3)
    assert ops.ones_like(x, dtype=zenith.int32).dtype == zenith.int32
    assert ops.full_like(x, 3).asnumpy().sum() == 18
    assert ops.arange(5).asnumpy().tolist() == [0, 1, 2, 3, 4]
    assert ops.arange(5).dtype == zenith.int64
    np.testing.assert_allclose(ops.arange(0, 1, 0.25).asnumpy(), [0, 0.25, 0.5, 0.75])
    assert ops.arange(2, 8, 3, dtype=zenith.float32).asnumpy().tolist() == [2.0, 5.0]
    zenith.set_seed(3)
    a = ops.randn(1000).asnumpy()
    zenith.set_seed(3)
    np.testing.assert_array_equal(ops.randn((1000,)).asnumpy(), a)
    assert abs(a.mean()) < 0.15 and 0.85 < a.std() < 1.15
    r = ops.rand(2, 500).asnumpy()
    assert r.shape == (2, 500) and r.min() >= 0 and r.max() < 1
    u = ops.uniform((1000,), -2.0, 3.0).asnumpy()
    assert u.min() >= -2 and u.max() < 3
    i = ops.randint(3, 7, (1000,)).asnumpy()
    assert i.dtype == np.int64 and set(np.unique(i)) == {3, 4, 5, 6}


def test_grad_aliases_in_ops():
    f = lambda x: (x * x).sum()
    x = Tensor([3.0])
    assert ops.grad(f)(x).item() == 6.0
    value, g = ops.value_and_grad(f)(x)
    assert value.item() == 9.0 and g.item() == 6.0
