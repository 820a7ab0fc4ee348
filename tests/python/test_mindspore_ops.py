"""mindspore.ops functions added for MindSpore programs (zenith/_ms_functions.py), checked
against PyTorch (values and gradients) or numpy."""

import numpy as np
import pytest
import torch

import zenith
from zenith import Tensor, ops

F = torch.nn.functional
F32 = np.float32


def t(a):
    return Tensor(np.asarray(a, F32) if np.asarray(a).dtype.kind == "f" else np.asarray(a))


def close(z, ref, tol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    np.testing.assert_allclose(np.asarray(z.asnumpy(), np.float64), ref, rtol=tol, atol=tol)


_A = np.array([[0.3, -0.6, 0.9], [0.1, 0.5, -0.2]], F32)
_B = np.array([[0.7, 0.2, -0.4], [0.0, 0.8, 0.6]], F32)
_P = np.abs(_A) * 0.9 + 0.05
DIFFERENTIABLE = [
    ("asinh", lambda a: ops.asinh(a), torch.asinh, _A),
    ("acosh", lambda a: ops.acosh(a + 2.0), lambda a: torch.acosh(a + 2.0), _A),
    ("atanh", lambda a: ops.atanh(a), torch.atanh, _A),
    ("sinh", lambda a: ops.sinh(a), torch.sinh, _A),
    ("cosh", lambda a: ops.cosh(a), torch.cosh, _A),
    ("expm1", lambda a: ops.expm1(a), torch.expm1, _A),
    ("log1p", lambda a: ops.log1p(a), torch.log1p, _A),
    ("erfc", lambda a: ops.erfc(a), torch.erfc, _A),
    ("logit", lambda a: ops.logit(a), torch.logit, _P),
    ("xlogy", lambda a: ops.xlogy(a, t(_P)), lambda a: torch.xlogy(a, torch.tensor(_P)), _A),
    ("xdivy", lambda a: ops.xdivy(a, t(_B + 2)), lambda a: a / torch.tensor(_B + 2), _A),
    ("lerp", lambda a: ops.lerp(a, t(_B), 0.3), lambda a: torch.lerp(a, torch.tensor(_B), 0.3),
     _A),
    ("inv", lambda a: ops.inv(a + 2.0), lambda a: 1 / (a + 2.0), _A),
    ("addn", lambda a: ops.addn([a, a * 2.0, t(_B)]), lambda a: a + a * 2 + torch.tensor(_B),
     _A),
    ("accumulate_n", lambda a: ops.accumulate_n([a, a]), lambda a: 2 * a, _A),
    ("bias_add", lambda a: ops.bias_add(a, t([1.0, 2.0, 3.0])),
     lambda a: a + torch.tensor([1.0, 2.0, 3.0]), _A),
    ("fast_gelu", lambda a: ops.fast_gelu(a), lambda a: a * torch.sigmoid(1.702 * a), _A),
    ("hardshrink", lambda a: ops.hardshrink(a, 0.4), lambda a: F.hardshrink(a, 0.4), _A),
    ("soft_shrink", lambda a: ops.soft_shrink(a, 0.4), lambda a: F.softshrink(a, 0.4), _A),
    ("prelu", lambda a: ops.prelu(a, t([0.1, 0.2, 0.3])),
     lambda a: F.prelu(a, torch.tensor([0.1, 0.2, 0.3])), _A),
    ("binary_cross_entropy", lambda a: ops.binary_cross_entropy(a, t(np.round(_P))),
     lambda a: F.binary_cross_entropy(a, torch.tensor(np.round(_P))), _P),
    ("nll_loss", lambda a: ops.nll_loss(a, Tensor(np.array([2, 0]))),
     lambda a: F.nll_loss(a, torch.tensor([2, 0])), np.log(_P)),
    ("smooth_l1_loss", lambda a: ops.smooth_l1_loss(a, t(_B), 0.5, "mean"),
     lambda a: F.smooth_l1_loss(a, torch.tensor(_B), beta=0.5), _A),
    ("kl_div", lambda a: ops.kl_div(a, t(_P), "batchmean"),
     lambda a: F.kl_div(a, torch.tensor(_P), reduction="batchmean"), np.log(_P)),
    ("dot", lambda a: ops.dot(a, t(_B.T)), lambda a: a @ torch.tensor(_B.T), _A),
    ("batch_dot", lambda a: ops.batch_dot(a, t(_B)),
     lambda a: (a * torch.tensor(_B)).sum(-1, keepdim=True), _A),
    ("ger", lambda a: ops.ger(a[0], t(_B[1])), lambda a: torch.outer(a[0], torch.tensor(_B[1])),
     _A),
    ("cdist", lambda a: ops.cdist(a, t(_B)), lambda a: torch.cdist(a, torch.tensor(_B)), _A),
    ("narrow", lambda a: ops.narrow(a, 1, 1, 2), lambda a: a.narrow(1, 1, 2), _A),
    ("slice", lambda a: ops.slice(a, (0, 1), (2, -1)), lambda a: a[0:2, 1:], _A),
    ("split", lambda a: ops.split(a, 2, 1)[1], lambda a: torch.split(a, 2, 1)[1], _A),
    ("unstack", lambda a: ops.unstack(a, 1)[2], lambda a: torch.unbind(a, 1)[2], _A),
    ("tile", lambda a: ops.tile(a, (2, 3)), lambda a: a.tile((2, 3)), _A),
    ("repeat_elements", lambda a: ops.repeat_elements(a, 2, 1),
     lambda a: torch.repeat_interleave(a, 2, 1), _A),
    ("diag", lambda a: ops.diag(a[0]), lambda a: torch.diag(a[0]), _A),
    ("masked_select", lambda a: ops.masked_select(a, Tensor(_A > 0)),
     lambda a: torch.masked_select(a, torch.tensor(_A > 0)), _A),
    ("top_k", lambda a: ops.top_k(a, 2)[0], lambda a: torch.topk(a, 2)[0], _A),
    ("median", lambda a: ops.median(a, 1)[0], lambda a: torch.median(a, 1)[0], _A),
    ("gather_d", lambda a: ops.gather_d(a, 1, Tensor(np.array([[2, 0], [1, 1]]))),
     lambda a: torch.gather(a, 1, torch.tensor([[2, 0], [1, 1]])), _A),
    ("gather_nd", lambda a: ops.gather_nd(a, Tensor(np.array([[0, 2], [1, 0]]))),
     lambda a: a[[0, 1], [2, 0]], _A),
    ("select", lambda a: ops.select(Tensor(_A > 0), a, t(_B)),
     lambda a: torch.where(torch.tensor(_A > 0), a, torch.tensor(_B)), _A),
    ("clip_by_global_norm", lambda a: ops.clip_by_global_norm((a, a * 2.0), 0.5)[1],
     lambda a: 2 * a * 0.5 / torch.sqrt(5 * (a * a).sum()), _A),
]


@pytest.mark.parametrize("name,fn,ref,x", DIFFERENTIABLE, ids=[d[0] for d in DIFFERENTIABLE])
def test_functions_match_torch(name, fn, ref, x):
    close(fn(t(x)), ref(torch.tensor(x)), 1e-5)
    xt = torch.tensor(x, requires_grad=True)
    ref(xt).sum().backward()
    close(zenith.grad(lambda a: fn(a).sum())(t(x)), xt.grad, 1e-4)


def test_building_and_index_functions_match_numpy():
    assert ops.fill(zenith.float32, (2,), 1.5).asnumpy().tolist() == [1.5, 1.5]
    assert ops.fills(t(_A), 2.0).asnumpy().tolist() == [[2.0] * 3] * 2
    close(ops.eye(2, 3), np.eye(2, 3))
    close(ops.linspace(Tensor(0.0), Tensor(1.0), 5), np.linspace(0, 1, 5))
    close(ops.one_hot(Tensor(np.array([1, 0])), 3, Tensor(2.0), Tensor(0.0)), np.eye(3)[[1, 0]] * 2)
    x, y = ops.meshgrid((t([1.0, 2.0, 3.0]), t([4.0, 5.0])))
    nx, ny = np.meshgrid([1.0, 2.0, 3.0], [4.0, 5.0])
    close(x, nx)
    close(y, ny)
    xi, yi = ops.meshgrid(t([1.0, 2.0, 3.0]), t([4.0, 5.0]), indexing="ij")
    close(xi, np.meshgrid([1.0, 2.0, 3.0], [4.0, 5.0], indexing="ij")[0])
    assert ops.sequence_mask(Tensor(np.array([1, 3])), 4).asnumpy().tolist() == \
        [[True, False, False, False], [True, True, True, False]]
    assert int(ops.count_nonzero(t([[0.0, 1.0], [2.0, 0.0]])).asnumpy()) == 2
    assert ops.nonzero(t([0.0, 3.0, 0.0, 1.0])).asnumpy().tolist() == [[1], [3]]
    assert ops.isclose(t([1.0, 2.0]), t([1.0 + 1e-9, 2.1])).asnumpy().tolist() == [True, False]
    assert ops.approximate_equal(t([1.0, 2.0]), t([1.000001, 2.5])).asnumpy().tolist() == \
        [True, False]
    assert ops.intopk(t(_A), Tensor(np.array([2, 0])), 1).asnumpy().tolist() == [True, False]
    assert (ops.shape(t(_A)), ops.size(t(_A)), ops.rank(t(_A))) == ((2, 3), 6, 2)
    values, index = ops.top_k(t(_A), 2)
    assert index.asnumpy().tolist() == np.argsort(-_A, 1)[:, :2].tolist()
    zenith.set_seed(3)
    assert ops.standard_normal((1000,)).asnumpy().std() == pytest.approx(1.0, abs=0.1)


def test_piecewise_constant_and_integer_functions_match_numpy():
    a = np.array([-1.5, -0.5, 0.5, 2.7], F32)
    for name, ref in (("floor", np.floor), ("ceil", np.ceil), ("round", np.round),
                      ("trunc", np.trunc), ("sign", np.sign)):
        close(getattr(ops, name)(t(a)), ref(a))
    i, j = np.array([12, 5, -7], np.int32), np.array([10, 3, 2], np.int32)
    for name, ref in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                      ("bitwise_xor", np.bitwise_xor)):
        assert getattr(ops, name)(Tensor(i), Tensor(j)).asnumpy().tolist() == ref(i, j).tolist()
    assert ops.invert(Tensor(i)).asnumpy().tolist() == np.invert(i).tolist()
    assert ops.truncate_div(Tensor(i), Tensor(j)).asnumpy().tolist() == [1, 1, -3]
    assert ops.truncate_mod(Tensor(i), Tensor(j)).asnumpy().tolist() == np.fmod(i, j).tolist()
    assert ops.population_count(Tensor(np.array([7, 8], np.int32))).asnumpy().tolist() == [3, 1]
    b1, b2 = np.array([True, False, True]), np.array([True, True, False])
    assert ops.logical_and(Tensor(b1), Tensor(b2)).asnumpy().tolist() == [True, False, False]
    assert ops.logical_or(Tensor(b1), Tensor(b2)).asnumpy().tolist() == [True, True, True]
    values, inverse = ops.unique(Tensor(np.array([3, 1, 3, 2])))
    assert values.asnumpy().tolist() == [1, 2, 3] and inverse.asnumpy().tolist() == [2, 0, 2, 1]
    out, idx, counts = ops.unique_consecutive(Tensor(np.array([1, 1, 2, 2, 3, 1])), True, True)
    assert out.asnumpy().tolist() == [1, 2, 3, 1]
    assert idx.asnumpy().tolist() == [0, 0, 1, 1, 2, 3]
    assert counts.asnumpy().tolist() == [2, 2, 1, 1]


# ---- _ms_functions2: pooling, padding, bands, segments, cumulative, random, vjp, ...

MORE = [
    ("adaptive_avg_pool1d", lambda a: ops.adaptive_avg_pool1d(a.reshape(1, 2, 3), 1),
     lambda a: F.adaptive_avg_pool1d(a.reshape(1, 2, 3), 1)),
    ("adaptive_max_pool1d", lambda a: ops.adaptive_max_pool1d(a.reshape(1, 1, 6), 3),
     lambda a: F.adaptive_max_pool1d(a.reshape(1, 1, 6), 3)),
    ("adaptive_max_pool2d", lambda a: ops.adaptive_max_pool2d(a.reshape(1, 1, 2, 3), (1, 3)),
     lambda a: F.adaptive_max_pool2d(a.reshape(1, 1, 2, 3), (1, 3))),
    ("avg_pool1d", lambda a: ops.avg_pool1d(a.reshape(1, 1, 6), 2, 2),
     lambda a: F.avg_pool1d(a.reshape(1, 1, 6), 2, 2)),
    ("pad", lambda a: ops.pad(a, (1, 2, 0, 1), value=0.5),
     lambda a: F.pad(a, (1, 2, 0, 1), value=0.5)),
    ("pad_reflect", lambda a: ops.pad(a, (1, 1), mode="reflect"),
     lambda a: F.pad(a, (1, 1), mode="reflect")),
    ("matrix_band_part", lambda a: ops.matrix_band_part(a, 0, 1),
     lambda a: torch.triu(torch.tril(a, 1))),
    ("matrix_diag_part", lambda a: ops.matrix_diag_part(a[:, :2]),
     lambda a: torch.diagonal(a[:, :2], dim1=-2, dim2=-1)),
    ("unsorted_segment_sum", lambda a: ops.unsorted_segment_sum(a, Tensor(np.array([1, 0])), 2),
     lambda a: torch.stack([a[1], a[0]])),
    ("index_add", lambda a: ops.index_add(a, Tensor(np.array([0, 2, 0])),
                                          t(np.ones((2, 3), F32)), 1),
     lambda a: a.index_add(1, torch.tensor([0, 2, 0]), torch.ones(2, 3))),
    ("strided_slice", lambda a: ops.strided_slice(a, (0, 0), (2, 3), (1, 2)),
     lambda a: a[0:2, 0:3:2]),
    ("cummax", lambda a: ops.cummax(a, 1)[0], lambda a: torch.cummax(a, 1)[0]),
    ("cummin", lambda a: ops.cummin(a, 0)[0], lambda a: torch.cummin(a, 0)[0]),
    ("pdist", lambda a: ops.pdist(t(_B) + a), lambda a: F.pdist(torch.tensor(_B) + a)),
    ("tensor_dot", lambda a: ops.tensor_dot(a, t(_B), ((1,), (1,))),
     lambda a: torch.tensordot(a, torch.tensor(_B), ([1], [1]))),
]


@pytest.mark.parametrize("name,fn,ref", MORE, ids=[m[0] for m in MORE])
def test_more_functions_match_torch(name, fn, ref):
    close(fn(t(_A)), ref(torch.tensor(_A)))
    at = torch.tensor(_A, requires_grad=True)
    ref(at).sum().backward()
    close(zenith.grad(lambda a: fn(a).sum())(t(_A)), at.grad, 1e-4)


def test_more_functions_match_numpy():
    assert ops.cummax(t(_A), 1)[1].asnumpy().tolist() == torch.cummax(torch.tensor(_A), 1)[
        1].tolist()
    close(ops.matrix_diag(t(_A[0])), np.diag(_A[0]))
    m = np.ones((2, 2), F32)
    close(ops.matrix_set_diag(t(m), t(np.array([5.0, 6.0], F32))), [[5, 1], [1, 6]])
    zenith.set_seed(2)
    n = ops.normal((2000,), 3.0, 0.5).asnumpy()
    assert abs(n.mean() - 3.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    b = ops.bernoulli(t(np.zeros(2000, F32)), 0.3).asnumpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.05
    s = ops.shuffle(t(np.arange(10, dtype=F32))).asnumpy()
    assert sorted(s.tolist()) == list(range(10))
    boxes = np.array([[0, 0, 9, 9]], F32)
    gts = np.array([[5, 5, 14, 14], [0, 0, 9, 9]], F32)
    close(ops.iou(t(boxes), t(gts)), [[25 / 175], [1.0]], 1e-6)
    close(ops.blackman_window(8), torch.blackman_window(8), 1e-6)
    close(ops.blackman_window(8, periodic=False), torch.blackman_window(8, periodic=False), 1e-6)
    assert ops.range(1, 8, 3).asnumpy().tolist() == [1, 4, 7]
    zenith.set_seed(0)
    out = ops.dropout2d(t(np.ones((2, 6, 2, 2), F32)), 0.5).asnumpy().reshape(2, 6, -1)
    assert (out.min(-1) == out.max(-1)).all() and set(np.unique(out)) <= {0.0, 2.0}
    var = zenith.Parameter(t(np.array([1.0, 2.0], F32)), name="v")
    ops.assign_add(var, t(np.array([1.0, 1.0], F32)))
    ops.assign_sub(var, t(np.array([0.5, 0.0], F32)))
    assert var.asnumpy().tolist() == [1.5, 3.0]
    ops.print_("printed by ops.print_")


def test_vjp_and_jacrev_match_torch():
    x = _A[0].copy()
    out, vjp_fn = ops.vjp(lambda a: a * a * 3.0, t(x))
    (g,) = vjp_fn(t(np.array([1.0, 2.0, 3.0], F32)))
    _, want = torch.autograd.functional.vjp(lambda a: a * a * 3, torch.tensor(x),
                                            torch.tensor([1.0, 2.0, 3.0]))
    close(out, 3 * x * x)
    close(g, want)
    jac = ops.jacrev(lambda a: ops.softmax(a, 0))(t(x))
    close(jac, torch.autograd.functional.jacobian(lambda a: torch.softmax(a, 0),
                                                  torch.tensor(x)), 1e-5)
