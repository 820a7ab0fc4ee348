"""mindspore.ops primitive classes of zenith/_ms_prims2.py, checked against PyTorch (values
and gradients) or numpy."""

import numpy as np
import pytest
import torch

import zenith
from zenith import Parameter, Tensor
from zenith.ops import operations as P

F = torch.nn.functional
F32 = np.float32
_A = np.array([[0.3, -0.6, 0.9], [0.1, 0.5, -0.2]], F32)
_B = np.array([[0.7, 0.2, -0.4], [0.4, 0.8, 0.6]], F32)
_P = np.abs(_A) * 0.9 + 0.05
TB, TP = torch.tensor(_B), torch.tensor(_P)


def t(a):
    return Tensor(np.asarray(a))


def close(z, ref, tol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    np.testing.assert_allclose(np.asarray(z.asnumpy(), np.float64), ref, rtol=tol, atol=tol)


DIFF = [
    ("Asinh", (), lambda a: [a], torch.asinh),
    ("Acosh", (), lambda a: [a + 2.0], lambda a: torch.acosh(a + 2)),
    ("Atanh", (), lambda a: [a], torch.atanh),
    ("Sinh", (), lambda a: [a], torch.sinh),
    ("Cosh", (), lambda a: [a], torch.cosh),
    ("Expm1", (), lambda a: [a], torch.expm1),
    ("Log1p", (), lambda a: [a], torch.log1p),
    ("Erfc", (), lambda a: [a], torch.erfc),
    ("Xlogy", (), lambda a: [a, t(_P)], lambda a: torch.xlogy(a, TP)),
    ("Xdivy", (), lambda a: [a, t(_B + 2)], lambda a: a / (TB + 2)),
    ("Lerp", (), lambda a: [a, t(_B), 0.25], lambda a: torch.lerp(a, TB, 0.25)),
    ("Inv", (), lambda a: [a + 2.0], lambda a: 1 / (a + 2)),
    ("MulNoNan", (), lambda a: [a, t(_B)], lambda a: a * TB),
    ("AccumulateNV2", (), lambda a: [[a, a]], lambda a: 2 * a),
    ("Addcdiv", (), lambda a: [a, t(_B), t(_P), 0.5], lambda a: torch.addcdiv(a, TB, TP,
                                                                               value=0.5)),
    ("Addcmul", (), lambda a: [a, t(_B), t(_P), 0.5], lambda a: torch.addcmul(a, TB, TP,
                                                                               value=0.5)),
    ("ReduceMax", (True,), lambda a: [a, 1], lambda a: a.amax(1, keepdim=True)),
    ("ReduceMin", (), lambda a: [a, 0], lambda a: a.amin(0)),
    ("Ger", (), lambda a: [a[0], t(_B[1])], lambda a: torch.outer(a[0], TB[1])),
    ("Tile", (), lambda a: [a, (2, 1)], lambda a: a.tile((2, 1))),
    ("Slice", (), lambda a: [a, (0, 1), (1, 2)], lambda a: a[0:1, 1:3]),
    ("Split", (1, 3), lambda a: [a], lambda a: torch.split(a, 1, 1)[2]),
    ("Sort", (1, True), lambda a: [a], lambda a: torch.sort(a, 1, True)[0]),
    ("MaskedSelect", (), lambda a: [a, t(_A > 0)], lambda a: a[torch.tensor(_A > 0)]),
    ("GatherNd", (), lambda a: [a, t(np.array([[1, 2], [0, 0]]))], lambda a: a[[1, 0], [2, 0]]),
    ("ReverseV2", ([0, 1],), lambda a: [a], lambda a: torch.flip(a, [0, 1])),
    ("CumSum", (), lambda a: [a, 1], lambda a: torch.cumsum(a, 1)),
    ("CumSum", (True, True), lambda a: [a, 0],
     lambda a: torch.flip(torch.cumsum(torch.flip(a, [0]), 0), [0]) - a),
    ("UnsortedSegmentSum", (), lambda a: [a, t(np.array([1, 1])), 3],
     lambda a: torch.stack([torch.zeros(3), a.sum(0), torch.zeros(3)])),
    ("L2Normalize", (1,), lambda a: [a], lambda a: a / torch.sqrt((a * a).sum(1, keepdim=True))),
    ("LpNorm", ([1],), lambda a: [a], lambda a: torch.linalg.norm(a, dim=1)),
    ("Cdist", (), lambda a: [a, t(_B)], lambda a: torch.cdist(a, TB)),
    ("KLDivLoss", ("sum",), lambda a: [a, t(_P)],
     lambda a: F.kl_div(a, TP, reduction="sum")),
    ("BCEWithLogitsLoss", ("mean",), lambda a: [a, t(np.round(_P)), t(_P), t(_B[0] + 1)],
     lambda a: F.binary_cross_entropy_with_logits(a, torch.round(TP), TP,
                                                  pos_weight=TB[0] + 1)),
    ("BinaryCrossEntropy", ("sum",), lambda a: [a * 0.5 + 0.5, t(np.round(_P)), t(_P)],
     lambda a: F.binary_cross_entropy(a * 0.5 + 0.5, torch.round(TP), TP, reduction="sum")),
    ("SoftMarginLoss", (), lambda a: [a, t(np.sign(_B))],
     lambda a: F.soft_margin_loss(a, torch.sign(TB))),
    ("SigmoidCrossEntropyWithLogits", (), lambda a: [a, t(_P)],
     lambda a: F.binary_cross_entropy_with_logits(a, TP, reduction="none")),
    ("FastGeLU", (), lambda a: [a], lambda a: a * torch.sigmoid(1.702 * a)),
    ("HShrink", (0.4,), lambda a: [a], lambda a: F.hardshrink(a, 0.4)),
    ("SoftShrink", (0.4,), lambda a: [a], lambda a: F.softshrink(a, 0.4)),
    ("Mish", (), lambda a: [a], F.mish),
    ("SeLU", (), lambda a: [a], torch.selu),
    ("PReLU", (), lambda a: [a, t(np.array([0.1, 0.2, 0.3], F32))],
     lambda a: F.prelu(a, torch.tensor([0.1, 0.2, 0.3]))),
]


@pytest.mark.parametrize("name,attrs,inputs,ref", DIFF, ids=[d[0] for d in DIFF])
def test_primitives_match_torch(name, attrs, inputs, ref):
    pick = {"Split": 2, "Sort": 0}.get(name)
    raw = getattr(P, name)(*attrs)
    prim = raw if pick is None else (lambda *a: raw(*a)[pick])  # noqa: E731
    close(prim(*inputs(t(_A))), ref(torch.tensor(_A)))
    at = torch.tensor(_A, requires_grad=True)
    ref(at).sum().backward()
    close(zenith.grad(lambda a: prim(*inputs(a)).sum())(t(_A)), at.grad, 1e-4)


def test_numpy_valued_primitives():
    i, j = np.array([12, 5, -7], np.int32), np.array([10, 3, 2], np.int32)
    assert P.BitwiseAnd()(t(i), t(j)).asnumpy().tolist() == (i & j).tolist()
    assert P.BitwiseOr()(t(i), t(j)).asnumpy().tolist() == (i | j).tolist()
    assert P.BitwiseXor()(t(i), t(j)).asnumpy().tolist() == (i ^ j).tolist()
    assert P.Invert()(t(i)).asnumpy().tolist() == (~i).tolist()
    assert P.TruncateDiv()(t(i), t(j)).asnumpy().tolist() == [1, 1, -3]
    assert P.TruncateMod()(t(i), t(j)).asnumpy().tolist() == np.fmod(i, j).tolist()
    assert P.Mod()(t(i), t(j)).asnumpy().tolist() == np.fmod(i, j).tolist()
    a = np.array([-1.5, 0.5, 2.5], F32)
    close(P.Trunc()(t(a)), np.trunc(a))
    close(P.Rint()(t(a)), np.rint(a))
    b1, b2 = np.array([True, False]), np.array([True, True])
    assert P.LogicalAnd()(t(b1), t(b2)).asnumpy().tolist() == [True, False]
    assert P.LogicalOr()(t(b1), t(b2)).asnumpy().tolist() == [True, True]
    m = np.array([[True, False], [True, True]])
    assert P.ReduceAll()(t(m), 1).asnumpy().tolist() == [False, True]
    assert P.ReduceAny(True)(t(m), 0).asnumpy().tolist() == [[True, True]]
    index, values = P.ArgMaxWithValue(1)(t(_A))
    assert index.asnumpy().tolist() == _A.argmax(1).tolist()
    close(values, _A.max(1))
    index, values = P.ArgMinWithValue(0, True)(t(_A))
    assert index.asnumpy().tolist() == [_A.argmin(0).tolist()]
    assert P.IsInf()(t(np.array([1.0, np.inf, -np.inf], F32))).asnumpy().tolist() == \
        [False, True, True]
    assert P.EqualCount()(t(i), t(np.array([12, 0, -7], np.int32))).asnumpy().tolist() == [2]
    assert P.ApproximateEqual(0.1)(t(_A), t(_A + 0.05)).asnumpy().all()
    assert P.InTopK(1)(t(_A), t(np.array([2, 0]))).asnumpy().tolist() == [True, False]
    values, indices = P.TopK()(t(_A), 2)
    assert indices.asnumpy().tolist() == np.argsort(-_A, 1)[:, :2].tolist()
    close(P.LinSpace()(t(np.float32(0)), t(np.float32(2)), 5), np.linspace(0, 2, 5))
    assert P.Range()(t(1), t(7), t(2)).asnumpy().tolist() == [1, 3, 5]
    zenith.set_seed(1)
    assert P.StandardNormal()((500,)).asnumpy().std() == pytest.approx(1.0, abs=0.15)
    u = P.UniformReal()((500,)).asnumpy()
    assert u.min() >= 0 and u.max() < 1
    x, y = P.Meshgrid("ij")((t(np.array([1.0, 2.0], F32)), t(np.array([3.0, 4.0, 5.0], F32))))
    close(x, np.meshgrid([1.0, 2.0], [3.0, 4.0, 5.0], indexing="ij")[0])
    values, inverse = P.Unique()(t(np.array([3, 1, 3])))
    assert values.asnumpy().tolist() == [1, 3] and inverse.asnumpy().tolist() == [1, 0, 1]
    assert P.InvertPermutation()((3, 4, 0, 2, 1)) == (2, 4, 3, 0, 1)
    assert P.TensorShape()(t(_A)).asnumpy().tolist() == [2, 3]


def test_nn_and_parameter_primitives(rng):
    x = rng.normal(size=(1, 2, 6, 6)).astype(F32)
    w = rng.normal(size=(3, 2, 3, 3)).astype(F32)
    close(P.Conv2D(3, 3)(t(x), t(w)), F.conv2d(torch.tensor(x), torch.tensor(w)), 1e-4)
    close(P.MaxPool(2, 2)(t(x)), F.max_pool2d(torch.tensor(x), 2, 2))
    close(P.AvgPool(3, 3)(t(x)), F.avg_pool2d(torch.tensor(x), 3, 3))
    close(P.AdaptiveAvgPool2D(3)(t(x)), F.adaptive_avg_pool2d(torch.tensor(x), 3), 1e-6)
    logp = np.log(_P)
    loss, total = P.NLLLoss("sum")(t(logp), t(np.array([2, 0])), t(np.array([1, 2, 3], F32)))
    close(loss, F.nll_loss(torch.tensor(logp), torch.tensor([2, 0]),
                           torch.tensor([1.0, 2.0, 3.0]), reduction="sum"))
    assert float(total.asnumpy()) == 4.0
    zenith.set_seed(0)
    out, mask = P.Dropout(0.5)(t(np.ones((1000,), F32)))
    kept = mask.asnumpy()
    assert 0.4 < kept.mean() < 0.6 and set(out.asnumpy()[kept].tolist()) == {2.0}
    var = Parameter(t(np.array([1.0, 2.0], F32)), name="v")
    P.AssignAdd()(var, t(np.array([0.5, 0.5], F32)))
    P.AssignSub()(var, t(np.array([1.0, 0.0], F32)))
    assert var.asnumpy().tolist() == [0.5, 2.5]
    P.ApplyGradientDescent()(var, t(np.float32(0.1)), t(np.array([1.0, -1.0], F32)))
    close(var, [0.4, 2.6])
    accum = Parameter(t(np.array([0.1, 0.1], F32)), name="a")
    P.ApplyAdagrad()(var, accum, t(np.float32(0.1)), t(np.array([1.0, 2.0], F32)))
    close(accum, [1.1, 4.1])
    close(var, np.array([0.4, 2.6]) - 0.1 * np.array([1.0, 2.0]) / np.sqrt([1.1, 4.1]))
