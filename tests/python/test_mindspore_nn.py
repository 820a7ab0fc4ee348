"""mindspore.nn cells added for MindSpore programs (zenith/nn/more.py): losses, activations,
tools and schedules, each checked against PyTorch or numpy (values and gradients)."""

import math

import numpy as np
import pytest
import torch

import zenith
from zenith import Tensor, nn

F = torch.nn.functional
F32 = np.float32


def t(a):
    return Tensor(np.asarray(a, F32))


def close(z, ref, tol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    np.testing.assert_allclose(z.asnumpy(), ref, rtol=tol, atol=tol)


def grads_match(cell_fn, torch_fn, *arrays, tol=1e-4):
    """Values and the gradient with respect to the first input."""
    zs = [t(a) for a in arrays]
    ts = [torch.tensor(a, requires_grad=(i == 0)) for i, a in enumerate(arrays)]
    close(cell_fn(*zs), torch_fn(*ts), tol)
    torch_fn(*ts).sum().backward()
    close(zenith.grad(lambda first: cell_fn(first, *zs[1:]).sum())(zs[0]), ts[0].grad, tol)


def test_losses_match_torch(rng):
    p = rng.uniform(0.05, 0.95, size=(4, 3)).astype(F32)
    y = rng.integers(0, 2, size=(4, 3)).astype(F32)
    w = rng.uniform(0.5, 1.5, size=(4, 3)).astype(F32)
    grads_match(lambda a, b: nn.BCELoss(reduction="sum")(a, b),
                lambda a, b: F.binary_cross_entropy(a, b, reduction="sum"), p, y)
    grads_match(lambda a, b: nn.BCELoss(t(w))(a, b),
                lambda a, b: F.binary_cross_entropy(a, b, torch.tensor(w)), p, y)
    x, z = (rng.normal(size=(4, 3)) * 2).astype(F32), rng.normal(size=(4, 3)).astype(F32)
    grads_match(lambda a, b: nn.SmoothL1Loss(0.5)(a, b),
                lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.5), x, z)
    grads_match(lambda a, b: nn.HuberLoss(delta=0.7)(a, b),
                lambda a, b: F.huber_loss(a, b, delta=0.7), x, z)
    sign = np.sign(z).astype(F32)
    grads_match(lambda a, b: nn.SoftMarginLoss()(a, b),
                lambda a, b: F.soft_margin_loss(a, b), x, sign)
    grads_match(lambda a, b: nn.RMSELoss()(a, b),
                lambda a, b: torch.sqrt(F.mse_loss(a, b)), x, z)
    labels = np.array([1, -1, 1, -1], F32)
    grads_match(lambda a, b: nn.CosineEmbeddingLoss(0.1)(a, b, t(labels)),
                lambda a, b: F.cosine_embedding_loss(a, b, torch.tensor(labels), 0.1), x, z)
    logp = np.log(rng.dirichlet(np.ones(3), size=5)).astype(F32)
    target = np.array([0, 2, 1, 2, 0])
    cw = np.array([1.0, 2.0, 0.5], F32)
    grads_match(lambda a: nn.NLLLoss(t(cw))(a, Tensor(target)),
                lambda a: F.nll_loss(a, torch.tensor(target), torch.tensor(cw)), logp)
    ignore = np.array([0, -100, 1, 2, -100])
    grads_match(lambda a: nn.NLLLoss(reduction="sum")(a, Tensor(ignore)),
                lambda a: F.nll_loss(a, torch.tensor(ignore), reduction="sum"), logp)
    dice = nn.DiceLoss(smooth=1.0)(t(p), t(y))
    want = 1 - (2 * (p * y).sum() + 1) / ((p * p).sum() + (y * y).sum() + 1)
    np.testing.assert_allclose(float(dice.asnumpy()), want, rtol=1e-5)


ACTIVATIONS = [
    (nn.LogSigmoid, F.logsigmoid),
    (lambda: nn.SoftShrink(0.7), lambda x: F.softshrink(x, 0.7)),
    (lambda: nn.HShrink(0.7), lambda x: F.hardshrink(x, 0.7)),
    (lambda: nn.Threshold(0.3, -1.0), lambda x: F.threshold(x, 0.3, -1.0)),
    (nn.FastGelu, lambda x: x * torch.sigmoid(1.702 * x)),
    (lambda: nn.PReLU(3, 0.1), lambda x: F.prelu(x, torch.full((3,), 0.1))),
]


@pytest.mark.parametrize("make,ref", ACTIVATIONS)
def test_activations_match_torch(rng, make, ref):
    x = (rng.normal(size=(2, 3, 4)) * 2).astype(F32)
    cell = make()
    grads_match(lambda a: cell(a), ref, x)


def test_prelu_weight_is_trainable_and_get_activation():
    cell = nn.PReLU(2, 0.25)
    assert [p.name for p in cell.trainable_params()] == ["w"]
    x = t([[[-1.0], [2.0]], [[-3.0], [-4.0]]])
    (gw,) = zenith.grad(lambda: cell(x).sum(), None, cell.trainable_params())()
    np.testing.assert_allclose(gw.asnumpy(), [-4.0, -4.0])
    assert isinstance(nn.get_activation("relu"), nn.ReLU)
    assert isinstance(nn.get_activation("softmax"), nn.Softmax)
    with pytest.raises(KeyError, match="unknown activation"):
        nn.get_activation("swoosh")


def test_tools_match_numpy(rng):
    x = rng.normal(size=(3, 4)).astype(F32)
    close(nn.Tril()(t(x)), np.tril(x))
    close(nn.Triu()(t(x), 1), np.triu(x, 1))
    close(nn.Norm(axis=1)(t(x)), np.linalg.norm(x, axis=1))
    close(nn.Norm()(t(x)), np.linalg.norm(x))
    close(nn.OneHot(depth=3)(Tensor(np.array([2, 0]))), np.eye(3)[[2, 0]])
    close(nn.OneHot(axis=0, depth=3, on_value=5.0)(Tensor(np.array([1]))),
          (np.eye(3)[[1]] * 5).T)
    assert nn.Range(1, 7, 2)().asnumpy().tolist() == [1, 3, 5]
    mean, var = nn.Moments(axis=1, keep_dims=True)(t(x))
    close(mean, x.mean(1, keepdims=True))
    close(var, x.var(1, keepdims=True))
    clipped = nn.ClipByNorm()(t(x), 1.0)
    np.testing.assert_allclose(np.linalg.norm(clipped.asnumpy()), 1.0, rtol=1e-5)
    close(nn.ClipByNorm()(t(x), 100.0), x)
    close(nn.L1Regularizer(0.5)(t(x)), 0.5 * np.abs(x).sum())
    close(nn.Roll(1, 1)(t(x)), np.roll(x, 1, 1))
    close(nn.Roll(-1, 0)(t(x)), np.roll(x, -1, 0))
    grads_match(lambda a: nn.Roll(2, 1)(a) * t(np.arange(12).reshape(3, 4)),
                lambda a: torch.roll(a, 2, 1) * torch.arange(12.0).reshape(3, 4), x)


def test_inverse_and_natural_exp_decay():
    inv = nn.InverseDecayLR(0.1, 0.5, 2)
    nat = nn.NaturalExpDecayLR(0.1, 0.5, 2, is_stair=True)
    for step in range(5):
        np.testing.assert_allclose(float(inv(Tensor(step)).asnumpy()), 0.1 / (1 + 0.5 * step / 2),
                                   rtol=1e-6)
        np.testing.assert_allclose(float(nat(Tensor(step)).asnumpy()),
                                   0.1 * math.exp(-0.5 * (step // 2)), rtol=1e-6)
    assert nn.inverse_decay_lr(0.1, 0.5, 6, 2, 1) == [0.1, 0.1, 0.1 / 1.5, 0.1 / 1.5, 0.05,
                                                      0.05]
    np.testing.assert_allclose(nn.natural_exp_decay_lr(0.1, 0.5, 4, 1, 2, True),
                               [0.1, 0.1, 0.1 * math.exp(-0.5), 0.1 * math.exp(-0.5)])
