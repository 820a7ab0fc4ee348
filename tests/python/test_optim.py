"""Optimizers (called with gradients, and driven by Model) against numpy's formulas, and the
learning-rate schedules."""

import math

import numpy as np
import pytest

import zenith
from zenith import Parameter, Tensor, nn


def param(values):
    return Parameter(Tensor(np.array(values, np.float32)), name="p")


def run(opt_cls, steps, grads, **kwargs):
    p = param([1.0, -2.0, 3.0])
    opt = opt_cls([p], **kwargs)
    for g in grads[:steps]:
        opt((Tensor(np.array(g, np.float32)),))
    return p.asnumpy()


GRADS = [[0.5, -1.0, 0.25], [0.1, 0.2, -0.3], [-0.4, 0.0, 1.0]]


def test_momentum_and_sgd_match_numpy():
    def ref(lr, momentum, wd, nesterov):
        p, v = np.array([1.0, -2.0, 3.0]), np.zeros(3)
        for g in GRADS:
            g = np.array(g) + wd * p
            v = momentum * v + g
            p = p - lr * (g + momentum * v if nesterov else v)
        return p

    np.testing.assert_allclose(run(nn.Momentum, 3, GRADS, learning_rate=0.1, momentum=0.9),
                               ref(0.1, 0.9, 0.0, False), rtol=1e-6)
    np.testing.assert_allclose(
        run(nn.Momentum, 3, GRADS, learning_rate=0.1, momentum=0.9, weight_decay=0.01,
            use_nesterov=True), ref(0.1, 0.9, 0.01, True), rtol=1e-6)
    np.testing.assert_allclose(run(nn.SGD, 3, GRADS, learning_rate=0.2), ref(0.2, 0.0, 0.0, False),
                               rtol=1e-6)
    np.testing.assert_allclose(run(nn.SGD, 3, GRADS, learning_rate=0.2, momentum=0.5,
                                   nesterov=True), ref(0.2, 0.5, 0.0, True), rtol=1e-6)


def adam_ref(lr, b1, b2, eps, wd, decoupled):
    p, m, v = np.array([1.0, -2.0, 3.0]), np.zeros(3), np.zeros(3)
    for t, g in enumerate(GRADS, 1):
        g = np.array(g)
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mh, vh = m / (1 - b1 ** t), v / (1 - b2 ** t)
        p = p - lr * mh / (np.sqrt(vh) + eps)
    return p


def test_adam_adamw_match_numpy():
    np.testing.assert_allclose(run(nn.Adam, 3, GRADS, learning_rate=0.01),
                               adam_ref(0.01, 0.9, 0.999, 1e-8, 0.0, False), rtol=1e-5)
    np.testing.assert_allclose(run(nn.Adam, 3, GRADS, learning_rate=0.01, weight_decay=0.1),
                               adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, False), rtol=1e-5)
    np.testing.assert_allclose(run(nn.AdamW, 3, GRADS, learning_rate=0.01),
                               adam_ref(0.01, 0.9, 0.999, 1e-8, 1e-2, True), rtol=1e-5)
    np.testing.assert_allclose(run(nn.AdamWeightDecay, 3, GRADS, learning_rate=0.01,
                                   weight_decay=0.05),
                               adam_ref(0.01, 0.9, 0.999, 1e-6, 0.05, True), rtol=1e-5)


def test_learning_rate_forms():
    # a per-step list: the last value holds afterwards
    got = run(nn.SGD, 3, GRADS, learning_rate=[0.1, 0.01])
    expected = np.array([1.0, -2.0, 3.0]) - 0.1 * np.array(GRADS[0]) - 0.01 * (
        np.array(GRADS[1]) + np.array(GRADS[2]))
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    got = run(nn.SGD, 2, GRADS, learning_rate=Tensor(np.array([0.1, 0.01], np.float32)))
    np.testing.assert_allclose(got, np.array([1.0, -2.0, 3.0]) - 0.1 * np.array(GRADS[0])
                               - 0.01 * np.array(GRADS[1]), rtol=1e-5)
    got = run(nn.SGD, 1, GRADS, learning_rate=Tensor(0.5))
    np.testing.assert_allclose(got, np.array([1.0, -2.0, 3.0]) - 0.5 * np.array(GRADS[0]))
    sched = nn.WarmUpLR(1.0, 2)
    got = run(nn.SGD, 2, GRADS, learning_rate=sched)  # rates 0 then 0.5
    np.testing.assert_allclose(got, np.array([1.0, -2.0, 3.0]) - 0.5 * np.array(GRADS[1]),
                               rtol=1e-6)
    got = run(nn.SGD, 2, GRADS, learning_rate=lambda step: 0.1 * (step + 1))
    np.testing.assert_allclose(got, np.array([1.0, -2.0, 3.0]) - 0.1 * np.array(GRADS[0])
                               - 0.2 * np.array(GRADS[1]), rtol=1e-6)


def test_optimizer_state_and_methods():
    p = param([1.0, 2.0, 3.0])
    opt = nn.Momentum([p], [0.1, 0.05], 0.9)
    assert isinstance(opt, nn.Optimizer) and isinstance(opt, nn.Cell)
    assert isinstance(opt.parameters, zenith.ParameterTuple) and opt.parameters[0]._same(p)
    assert opt.get_lr().item() == pytest.approx(0.1)
    assert opt((Tensor(np.ones(3, np.float32)),)) is True
    assert opt.global_step == 1 and opt.get_lr().item() == pytest.approx(0.05)
    # PyTorch style: backward then step / zero_grad
    loss = (p * p).sum()
    zenith._zenith.autograd.backward(loss)
    opt.step()
    assert opt.global_step == 2
    opt.zero_grad()
    assert zenith._zenith.autograd.get_grad(p) is None


def test_optimizer_errors():
    p = param([1.0])
    with pytest.raises(ValueError, match="1 parameters"):
        nn.SGD([p], 0.1)((Tensor([1.0]), Tensor([1.0])))
    with pytest.raises(zenith.Error, match="does not match"):
        nn.SGD([p], 0.1)((Tensor([1.0, 2.0]),))
    with pytest.raises(ValueError, match="empty"):
        nn.SGD([], 0.1)
    with pytest.raises(ValueError, match="group 0: unknown key"):  # groups: test_mindspore_train
        nn.SGD([{"params": [p], "colour": 1}], 0.1)
    with pytest.raises(TypeError):
        nn.SGD([1.0], 0.1)
    with pytest.raises(ValueError):
        nn.SGD([p], -1.0)
    with pytest.raises(TypeError):
        nn.SGD([p], "fast")
    with pytest.raises(ValueError):
        nn.Momentum([p], 0.1, -0.9)
    with pytest.raises(ValueError):
        nn.SGD([p], 0.1, dampening=0.5)
    with pytest.raises(ValueError):
        nn.Adam([p], use_nesterov=True)
    with pytest.raises(ValueError):
        nn.Momentum([p], 0.1, 0.9, loss_scale=128.0)
    with pytest.raises(ValueError):
        nn.SGD([p], 0.1, weight_decay=-1)
    with pytest.raises(zenith.Error, match="twice"):
        nn.SGD([p, p], 0.1)


def test_schedule_functions():
    assert nn.piecewise_constant_lr([2, 5], [0.1, 0.05]) == [0.1, 0.1, 0.05, 0.05, 0.05]
    with pytest.raises(ValueError):
        nn.piecewise_constant_lr([2, 2], [0.1, 0.05])
    with pytest.raises(ValueError):
        nn.piecewise_constant_lr([2], [0.1, 0.05])
    lr = nn.exponential_decay_lr(0.1, 0.9, 6, 2, 1)
    assert lr == pytest.approx([0.1, 0.1, 0.09, 0.09, 0.081, 0.081])
    assert nn.exponential_decay_lr(0.1, 0.5, 4, 1, 2, is_stair=True) == pytest.approx(
        [0.1, 0.1, 0.05, 0.05])
    lr = nn.cosine_decay_lr(0.0, 0.1, 6, 2, 2)
    assert lr == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.0, 0.0], abs=1e-12)
    lr = nn.polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 1.0)
    assert lr == pytest.approx([0.1, 0.1, 0.055, 0.055, 0.01, 0.01])
    assert len(nn.polynomial_decay_lr(0.1, 0.01, 6, 1, 2, 2.0, update_decay_epoch=True)) == 6
    assert nn.warmup_lr(0.1, 4, 1, 2) == pytest.approx([0.0, 0.05, 0.1, 0.1])
    with pytest.raises(ValueError):
        nn.warmup_lr(0.1, 0, 1, 2)


def test_schedule_cells():
    step = Tensor(np.array(5, np.int32))
    assert nn.CosineDecayLR(0.0, 0.1, 10)(step).item() == pytest.approx(0.05)
    assert nn.ExponentialDecayLR(0.1, 0.5, 5)(step).item() == pytest.approx(0.05)
    assert nn.ExponentialDecayLR(0.1, 0.5, 2, is_stair=True)(step).item() == pytest.approx(0.025)
    assert nn.PolynomialDecayLR(0.1, 0.0, 10, 1.0)(step).item() == pytest.approx(0.05)
    assert nn.PolynomialDecayLR(0.1, 0.0, 4, 1.0, update_decay_steps=True)(step).item() == \
        pytest.approx(0.1 * (1 - 5 / 8))
    assert nn.WarmUpLR(0.1, 10)(step).item() == pytest.approx(0.05)
    assert isinstance(nn.WarmUpLR(0.1, 10), nn.LearningRateSchedule)
    with pytest.raises(NotImplementedError):
        nn.LearningRateSchedule()(step)
    assert math.isclose(nn.CosineDecayLR(0.0, 0.1, 10)(20).item(), 0.0, abs_tol=1e-9)
