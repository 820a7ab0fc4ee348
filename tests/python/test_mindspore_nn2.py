"""mindspore.nn cells of zenith/nn/more2.py checked against PyTorch or MindSpore's update
rules written with numpy."""

import numpy as np
import pytest
import torch

import zenith
from zenith import Parameter, Tensor, nn

F = torch.nn.functional
F32 = np.float32


def t(a):
    return Tensor(np.asarray(a, F32))


def close(z, ref, tol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    np.testing.assert_allclose(np.asarray(z.asnumpy(), np.float64), ref, rtol=tol, atol=tol)


def both(fn, ref, x, tol=1e-5):
    close(fn(t(x)), ref(torch.tensor(x)), tol)
    xt = torch.tensor(x, requires_grad=True)
    (ref(xt) * torch.arange(float(ref(xt).numel())).reshape(ref(xt).shape)).sum().backward()
    w = t(np.arange(float(np.prod(fn(t(x)).shape))).reshape(fn(t(x)).shape))
    close(zenith.grad(lambda a: (fn(a) * w).sum())(t(x)), xt.grad, 1e-4)


def _steps(opt_cls, kwargs, rule, rng):
    w0 = rng.normal(size=(3,)).astype(F32)
    p = Parameter(t(w0), name="w")
    opt = opt_cls([p], **kwargs)
    state, w = {}, w0.astype(np.float64)
    for step in range(1, 4):
        g = rng.normal(size=(3,)).astype(F32)
        opt((t(g),))
        w = rule(w, g.astype(np.float64), state, step)
    close(p, w, 1e-5)


def test_optimizers_follow_mindspores_rules(rng):
    def rmsprop(w, g, s, step, lr=0.01, decay=0.9, mom=0.5, eps=1e-10):
        s["ms"] = decay * s.get("ms", 0) + (1 - decay) * g * g
        s["m"] = mom * s.get("m", 0) + lr * g / np.sqrt(s["ms"] + eps)
        return w - s["m"]
    _steps(nn.RMSProp, dict(learning_rate=0.01, momentum=0.5), rmsprop, rng)

    def centered(w, g, s, step, lr=0.01, decay=0.9, eps=1e-10):
        s["ms"] = decay * s.get("ms", 0) + (1 - decay) * g * g
        s["mg"] = decay * s.get("mg", 0) + (1 - decay) * g
        s["m"] = lr * g / np.sqrt(s["ms"] - s["mg"] ** 2 + eps)
        return w - s["m"]
    _steps(nn.RMSProp, dict(learning_rate=0.01, centered=True), centered, rng)

    def adagrad(w, g, s, step, lr=0.05):
        s["a"] = s.get("a", 0.1) + g * g
        return w - lr * g / np.sqrt(s["a"])
    _steps(nn.Adagrad, dict(learning_rate=0.05), adagrad, rng)

    def adadelta(w, g, s, step, lr=1.0, rho=0.9, eps=1e-6):
        s["a"] = rho * s.get("a", 0) + (1 - rho) * g * g
        u = np.sqrt(s.get("u", 0) + eps) / np.sqrt(s["a"] + eps) * g
        s["u"] = rho * s.get("u", 0) + (1 - rho) * u * u
        return w - lr * u
    _steps(nn.Adadelta, {}, adadelta, rng)

    def adamax(w, g, s, step, lr=0.002, b1=0.9, b2=0.999, eps=1e-8):
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["v"] = np.maximum(b2 * s.get("v", 0), np.abs(g))
        return w - lr / (1 - b1 ** step) * s["m"] / (s["v"] + eps)
    _steps(nn.AdaMax, dict(learning_rate=0.002), adamax, rng)
    p = Parameter(t([1.0]), name="p")
    assert isinstance(nn.LazyAdam([p], 0.1), nn.Adam)


def test_padding_matches_torch(rng):
    x = rng.normal(size=(1, 2, 3, 4)).astype(F32)
    both(lambda a: nn.ZeroPad2d((1, 2, 0, 1))(a), lambda a: F.pad(a, (1, 2, 0, 1)), x)
    both(lambda a: nn.ConstantPad1d(2, 0.5)(a), lambda a: F.pad(a, (2, 2), value=0.5), x)
    both(lambda a: nn.ConstantPad3d((1, 0, 0, 1, 1, 0), 1.0)(a),
         lambda a: F.pad(a, (1, 0, 0, 1, 1, 0), value=1.0), x)
    both(lambda a: nn.ConstantPad2d(1, -1.0)(a), lambda a: F.pad(a, (1, 1, 1, 1), value=-1.0), x)
    both(lambda a: nn.ReflectionPad2d((2, 1, 1, 2))(a),
         lambda a: F.pad(a, (2, 1, 1, 2), mode="reflect"), x)
    both(lambda a: nn.ReflectionPad1d((1, 2))(a[0]),
         lambda a: F.pad(a[0], (1, 2), mode="reflect"), x)
    both(lambda a: nn.Pad(((0, 0), (1, 0), (0, 2), (1, 1)))(a),
         lambda a: F.pad(a, (1, 1, 0, 2, 1, 0)), x)
    both(lambda a: nn.Pad(((0, 0), (0, 0), (1, 1), (2, 2)), "REFLECT")(a),
         lambda a: F.pad(a, (2, 2, 1, 1), mode="reflect"), x)


def test_pooling_matches_torch(rng):
    x = rng.normal(size=(2, 3, 8)).astype(F32)
    both(lambda a: nn.MaxPool1d(3, 2)(a), lambda a: F.max_pool1d(a, 3, 2), x)
    both(lambda a: nn.AvgPool1d(2, 2)(a), lambda a: F.avg_pool1d(a, 2, 2), x)
    both(lambda a: nn.AdaptiveAvgPool1d(4)(a), lambda a: F.adaptive_avg_pool1d(a, 4), x)
    both(lambda a: nn.AdaptiveMaxPool1d(2)(a), lambda a: F.adaptive_max_pool1d(a, 2), x)
    x2 = rng.normal(size=(1, 2, 4, 6)).astype(F32)
    both(lambda a: nn.AdaptiveMaxPool2d((2, 3))(a), lambda a: F.adaptive_max_pool2d(a, (2, 3)),
         x2)


def test_normalisation_matches_torch(rng):
    x = rng.normal(size=(4, 6, 5)).astype(F32)
    both(lambda a: nn.GroupNorm(3, 6)(a), lambda a: F.group_norm(a, 3), x, 1e-4)
    both(lambda a: nn.InstanceNorm1d(6)(a), lambda a: F.instance_norm(a), x, 1e-4)
    x4 = rng.normal(size=(2, 3, 4, 4)).astype(F32)
    both(lambda a: nn.InstanceNorm2d(3)(a), lambda a: F.instance_norm(a), x4, 1e-4)
    bn = nn.BatchNorm1d(6).set_train()
    ref = torch.nn.BatchNorm1d(6, momentum=0.1)
    x2 = rng.normal(size=(8, 6)).astype(F32)
    close(bn(t(x2)), ref(torch.tensor(x2)), 1e-4)
    close(bn.moving_mean, ref.running_mean, 1e-5)
    close(bn.moving_variance, ref.running_var, 1e-5)
    bn.set_train(False)
    ref.eval()
    close(bn(t(x2)), ref(torch.tensor(x2)), 1e-4)
    assert [p.name for p in bn.trainable_params()] == ["gamma", "beta"]


def test_dropout2d_rrelu_focal_loss(rng):
    d = nn.Dropout2d(0.5).set_train()
    zenith.set_seed(0)
    out = d(t(np.ones((4, 8, 2, 2)))).asnumpy()
    per_channel = out.reshape(4, 8, -1)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()  # whole channels
    assert (nn.Dropout2d(0.5).set_train(False)(t(np.ones((1, 2, 1, 1)))).asnumpy() == 1).all()
    x = rng.normal(size=(3, 4)).astype(F32)
    both(lambda a: nn.RReLU(0.1, 0.3)(a), lambda a: F.leaky_relu(a, 0.2), x)
    labels = np.array([1, 0, 3])
    logp = F.log_softmax(torch.tensor(x), 1)[torch.arange(3), torch.tensor(labels)]
    want = (-(1 - logp.exp()) ** 2 * logp).mean()
    close(nn.FocalLoss(gamma=2.0)(t(x), Tensor(labels)), want)


def test_matrices_and_images_match_numpy(rng):
    x = rng.normal(size=(2, 3)).astype(F32)
    close(nn.MatrixDiag()(t(x)), np.stack([np.diag(r) for r in x]))
    m = rng.normal(size=(2, 3, 3)).astype(F32)
    close(nn.MatrixDiagPart()(t(m)), np.stack([np.diag(a) for a in m]))
    out = nn.MatrixSetDiag()(t(m), t(x))
    want = m.copy()
    for i in range(2):
        np.fill_diagonal(want[i], x[i])
    close(out, want)
    img = rng.normal(size=(1, 1, 6, 8)).astype(F32)
    close(nn.CentralCrop(0.5)(t(img)), img[..., 1:5, 2:6])
    dy, dx = nn.ImageGradients()(t(img))
    close(dy[..., :-1, :], np.diff(img, axis=2))
    close(dx[..., :, -1], np.zeros((1, 1, 6)))
    a, b = rng.uniform(size=(2, 1, 4, 4)).astype(F32), rng.uniform(size=(2, 1, 4, 4)).astype(F32)
    mse = ((a - b) ** 2).reshape(2, -1).mean(1)
    close(nn.PSNR()(t(a), t(b)), 10 * np.log10(1 / mse), 1e-4)


def test_loss_scale_training_cells(rng):
    x, y = t(rng.normal(size=(6, 4))), Tensor(rng.integers(0, 3, 6).astype(np.int32))
    net = nn.Dense(4, 3)
    loss_net = nn.WithLossCell(net, nn.CrossEntropyLoss())
    opt = nn.SGD(net.trainable_params(), 0.1)
    step = nn.TrainOneStepWithLossScaleCell(loss_net, opt, nn.FixedLossScaleUpdateCell(64.0))
    before = nn.CrossEntropyLoss()(net(x), y).asnumpy()
    loss, overflow, scale = step(x, y)
    np.testing.assert_allclose(loss.asnumpy(), before, rtol=1e-5)
    assert not bool(overflow.asnumpy()) and float(scale.asnumpy()) == 64.0
    assert nn.CrossEntropyLoss()(net(x), y).asnumpy() < before
    dyn = nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 1)
    step = nn.TrainOneStepWithLossScaleCell(loss_net, opt, dyn)
    step(x, y)
    assert dyn.get_loss_scale() == 2.0 ** 11  # grew after scale_window=1 finite step
    with pytest.raises(ValueError, match="only pad_mode"):
        nn.MaxPool1d(2, 2, "same")
