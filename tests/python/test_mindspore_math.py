"""mindspore.ops math, scatter and rearrangement functions (zenith/_ms_math.py,
_ms_scatter.py) and their primitives (_ms_prims3.py), checked against PyTorch (values and
first derivatives) or numpy."""

import numpy as np
import pytest
import torch

import zenith
from zenith import Parameter, Tensor, ops

F32 = np.float32
S = torch.special


def T(a):
    return torch.tensor(np.ascontiguousarray(a), dtype=torch.float64)


def t(a):
    a = np.ascontiguousarray(a)
    return Tensor(np.asarray(a, F32) if np.asarray(a).dtype.kind == "f" else np.asarray(a))


def close(z, ref, tol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    np.testing.assert_allclose(np.asarray(z.asnumpy(), np.float64), ref, rtol=tol, atol=tol)


_A = np.array([[0.3, -0.6, 0.9], [0.1, 0.5, -0.2]], F32)
_POS = np.array([[0.3, 1.6, 4.9], [7.5, 12.0, 0.05]], F32)
_WIDE = np.array([[-9.0, -2.5, -0.4], [0.0, 3.3, 11.0]], F32)
_M = np.array([[2.0, 0.5, -0.3], [0.1, 1.5, 0.4], [-0.2, 0.3, 1.2]], F32)
DIFFERENTIABLE = [
    ("sin", ops.sin, torch.sin, _WIDE), ("cos", ops.cos, torch.cos, _WIDE),
    ("tan", ops.tan, torch.tan, _A), ("asin", ops.asin, torch.asin, _A),
    ("acos", ops.acos, torch.acos, _A), ("atan", ops.atan, torch.atan, _WIDE),
    ("atan2", lambda a: ops.atan2(a, t(-_A[::-1])), lambda a: torch.atan2(a, T(-_A[::-1])), _A),
    ("bessel_j0", ops.bessel_j0, S.bessel_j0, _WIDE),
    ("bessel_j1", ops.bessel_j1, S.bessel_j1, _WIDE),
    ("bessel_y0", ops.bessel_y0, S.bessel_y0, _POS),
    ("bessel_y1", ops.bessel_y1, S.bessel_y1, _POS),
    ("bessel_i0", ops.bessel_i0, S.i0, _WIDE), ("bessel_i1", ops.bessel_i1, S.i1, _WIDE),
    ("bessel_i0e", ops.bessel_i0e, S.i0e, _WIDE), ("bessel_i1e", ops.bessel_i1e, S.i1e, _WIDE),
    ("bessel_k0", ops.bessel_k0, S.modified_bessel_k0, _POS),
    ("bessel_k1", ops.bessel_k1, S.modified_bessel_k1, _POS),
    ("bessel_k0e", ops.bessel_k0e, S.scaled_modified_bessel_k0, _POS),
    ("bessel_k1e", ops.bessel_k1e, S.scaled_modified_bessel_k1, _POS),
    ("erfinv", ops.erfinv, torch.erfinv, _A),
    ("prod", lambda a: ops.prod(a, 1), lambda a: torch.prod(a, 1), _A),
    ("prod_all", lambda a: ops.prod(a), torch.prod, _A),
    ("prod_zero", lambda a: ops.prod(a * t([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]]), 1, True),
     lambda a: torch.prod(a * T([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]]), 1, True), _A),
    ("matrix_determinant", ops.matrix_determinant, torch.linalg.det, _M),
    ("log_matrix_determinant", lambda a: ops.log_matrix_determinant(a)[1],
     lambda a: torch.linalg.slogdet(a)[1], _M),
    ("matrix_inverse", ops.matrix_inverse, torch.linalg.inv, _M),
    ("matrix_solve", lambda a: ops.matrix_solve(a, t(_M.T)),
     lambda a: torch.linalg.solve(a, T(_M.T)), _M),
    ("renorm", lambda a: ops.renorm(a, 2, 0, 0.7), lambda a: torch.renorm(a, 2, 0, 0.7), _A),
    ("Sin", lambda a: ops.Sin()(a), torch.sin, _A),
    ("ReduceProd", lambda a: ops.ReduceProd(True)(a, 0), lambda a: torch.prod(a, 0, True), _A),
    ("scatter_nd", lambda a: ops.scatter_nd(t(np.array([[1], [0]])), a, (3, 3)),
     lambda a: torch.zeros(3, 3, dtype=torch.float64).index_add(0, torch.tensor([1, 0]), a), _A),
    ("tensor_scatter_add", lambda a: ops.tensor_scatter_add(a, t(np.array([[1, 2], [1, 2]])),
                                                            t([5.0, 6.0])),
     lambda a: a + T([[0, 0, 0], [0, 0, 11.0]]), _A),
    ("tensor_scatter_update", lambda a: ops.tensor_scatter_update(
        a, t(np.array([[0, 1]])), t([5.0])), lambda a: a.index_put(
        (torch.tensor([0]), torch.tensor([1])), T([5.0])), _A),
    ("space_to_depth", lambda a: ops.space_to_depth(a.reshape(1, 1, 2, 3)[..., :2], 2)
     * t(np.arange(4).reshape(1, 4, 1, 1)),
     lambda a: F_unshuffle(a.reshape(1, 1, 2, 3)[..., :2]) * torch.arange(4.0, dtype=torch.float64).reshape(
         1, 4, 1, 1), _A),
]


def F_unshuffle(a):
    return torch.nn.functional.pixel_unshuffle(a, 2)


@pytest.mark.parametrize("name,fn,ref,x", DIFFERENTIABLE, ids=[c[0] for c in DIFFERENTIABLE])
def test_math_matches_torch(name, fn, ref, x):
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    want = ref(xt)
    close(fn(t(x)), want, 1e-4)
    if want.requires_grad:
        want.sum().backward()
        slope = xt.grad
    else:  # torch.special's Bessel functions have no gradient: central differences in float64
        h = 1e-6
        slope = (ref(T(x) + h) - ref(T(x) - h)) / (2 * h)
    close(zenith.grad(lambda a: fn(a).sum())(t(x)), slope, 2e-4)


def test_linear_algebra_and_random_draws():
    spd = _M @ _M.T
    close(ops.cholesky(t(spd)), np.linalg.cholesky(spd), 1e-4)
    close(ops.cholesky_inverse(ops.cholesky(t(spd))), np.linalg.inv(spd), 1e-4)
    s, u, v = ops.svd(t(_M))
    close(ops.matmul(ops.matmul(u, Tensor(np.diag(s.asnumpy()))), v.swapaxes(0, 1)), _M, 1e-4)
    close(ops.cumprod(t(_A), 1), np.cumprod(_A, 1))
    assert ops.same_type_shape(t(_A), t(_A)).shape == (2, 3)
    with pytest.raises(TypeError, match="same_type_shape"):
        ops.same_type_shape(t(_A), t(_M))
    g = ops.gamma((4000,), t([2.0]), t([4.0]), seed=3).asnumpy()
    assert abs(g.mean() - 0.5) < 0.03
    assert abs(ops.random_poisson((4000,), t([3.0]), seed=1).asnumpy().mean() - 3) < 0.15
    assert abs(np.abs(ops.standard_laplace((4000,), seed=2).asnumpy()).mean() - 1) < 0.06
    draws = ops.multinomial(t([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]), 5, seed=4).asnumpy()
    assert (draws == [[1] * 5, [0] * 5]).all()
    idx, mask = ops.choice_with_mask(Tensor(np.array([[True, False], [False, True]])), 3)
    assert mask.asnumpy().tolist() == [True, True, False]
    assert sorted(map(tuple, idx.asnumpy()[:2].tolist())) == [(0, 0), (1, 1)]
    assert sorted(ops.randperm(t(np.array([6]))).asnumpy().tolist()) == list(range(6))


def test_scatters_match_numpy():
    x = np.arange(12, dtype=F32).reshape(4, 3)
    ind = np.array([[0], [2], [0]])
    upd = np.ones((3, 3), F32) * np.array([[2], [3], [4]], F32)
    want = x.copy()
    np.maximum.at(want, ind[:, 0], upd)
    close(ops.tensor_scatter_max(t(x), t(ind), t(upd)), want)
    want = x.copy()
    np.multiply.at(want, ind[:, 0], upd)
    close(ops.TensorScatterMul()(t(x), t(ind), t(upd)), want)
    close(ops.tensor_scatter_div(t(x), t(ind[:2]), t(upd[:2])), x / np.array(
        [[2], [1], [3], [1]], F32))
    close(ops.tensor_scatter_elements(t(x), t(np.array([[2, 0, 1]])), t([[7.0, 8.0, 9.0]]), 0),
          torch.tensor(x).scatter(0, torch.tensor([[2, 0, 1]]), torch.tensor([[7.0, 8, 9]])))
    p = Parameter(t(x), name="p")
    ops.ScatterAdd()(p, t(np.array([1, 1])), t(np.ones((2, 3), F32)))
    close(p, x + np.array([[0], [2], [0], [0]], F32))
    ops.scatter_update(p, t(np.array([3])), t(np.zeros((1, 3), F32)))
    assert p.asnumpy()[3].tolist() == [0, 0, 0]
    ops.ScatterNdSub()(p, t(np.array([[0, 0]])), t([5.0]))
    assert p.asnumpy()[0, 0] == -5
    close(ops.inplace_add(t(x), t(np.ones((1, 3), F32)), 2), x + np.array([[0], [0], [1], [0]]))
    close(ops.InplaceUpdate()(t(x), t(np.zeros((2, 3), F32)), (0, 1)), np.concatenate(
        [np.zeros((2, 3)), x[2:]]))
    close(ops.index_fill(t(x), 1, t(np.array([0, 2])), 9.0),
          torch.tensor(x).index_fill(1, torch.tensor([0, 2]), 9.0))
    ids = t(np.array([1, 0, 1, 1]))
    close(ops.unsorted_segment_max(t(x), ids, 3)[:2], [x[1], x[[0, 2, 3]].max(0)])
    assert ops.unsorted_segment_min(t(x), ids, 3).asnumpy()[2, 0] == np.finfo(F32).max
    close(ops.UnsortedSegmentProd()(t(x), ids, 2), [x[1], x[[0, 2, 3]].prod(0)])
    close(ops.sparse_segment_mean(t(x), t(np.array([0, 1, 3])), t(np.array([0, 0, 1]))),
          [(x[0] + x[1]) / 2, x[3]])
    out, index = ops.unique_with_pad(t(np.array([3, 1, 3, 2])), -1)
    assert out.asnumpy().tolist() == [3, 1, 2, -1] and index.asnumpy().tolist() == [0, 1, 0, 2]
    seq = np.arange(8, dtype=F32).reshape(2, 4)
    close(ops.reverse_sequence(t(seq), t(np.array([3, 1])), 1), [[2, 1, 0, 3], [4, 5, 6, 7]])


def test_space_batch_depth_match_torch():
    x = np.arange(2 * 4 * 4 * 4, dtype=F32).reshape(2, 4, 4, 4)
    # MindSpore's DepthToSpace is TF's DCR order: depth = (bh * b + bw) * C + c.
    d2s = ops.DepthToSpace(2)(t(x))
    ref = x.reshape(2, 2, 2, 1, 4, 4).transpose(0, 3, 4, 1, 5, 2).reshape(2, 1, 8, 8)
    close(d2s, ref)
    close(ops.SpaceToDepth(2)(d2s), x)
    b = ops.space_to_batch_nd(t(x), (2, 2), [[0, 0], [2, 2]])
    assert b.shape == (8, 4, 2, 4)
    close(ops.batch_to_space_nd(b, (2, 2), [[0, 0], [2, 2]]), x)


def test_elementwise_and_misc_primitives():
    x = t(_A)
    close(ops.Atan2()(x, t(_A + 1)), np.arctan2(_A, _A + 1))
    close(ops.BesselI0e()(x), S.i0e(torch.tensor(_A)))
    close(ops.Erfinv()(x), torch.erfinv(torch.tensor(_A)))
    close(ops.Real()(x), _A)
    close(ops.Imag()(x), np.zeros_like(_A))
    sx, sy = ops.SquareSumAll()(x, x)
    close(sx, (_A ** 2).sum())
    close(ops.Einsum("ij,kj->ik")((x, x)), _A @ _A.T)
    close(ops.MatrixInverse()(t(_M)), np.linalg.inv(_M), 1e-4)
    assert ops.Eps()(x).asnumpy()[0, 0] == np.finfo(F32).tiny
    close(ops.CumProd()(x, 0), np.cumprod(_A, 0))
    assert ops.HistogramFixedWidth(5)(t([0.0, 0.1, 2.0, 4.9, 9.0]), t([0.0, 5.0])).asnumpy(
    ).tolist() == [2, 0, 1, 0, 2]
    assert ops.DataFormatDimMap()(t(np.array([0, 1, 2, 3]))).asnumpy().tolist() == [0, 2, 3, 1]
    parts = ops.SplitV((1, 2), 1, 2)(x)
    close(parts[1], _A[:, 1:])
    assert ops.UniformInt()((50,), t(np.array(2)), t(np.array(5))).asnumpy().min() >= 2


def _param(a):
    return Parameter(t(a), name="w")


def test_optimizer_primitives_match_torch():
    w0, g = np.array([0.5, -1.0, 2.0], F32), np.array([0.1, -0.3, 0.2], F32)
    for opt, step in [
        # MindSpore puts epsilon inside the square root, torch outside: tiny here.
        (lambda p: torch.optim.RMSprop([p], lr=0.1, alpha=0.9, eps=1e-12, momentum=0.5),
         lambda w: ops.ApplyRMSProp()(w, _param(np.zeros(3)), _param(np.zeros(3)), 0.1,
                                      t(g), 0.9, 0.5, 1e-12)),
        (lambda p: torch.optim.Adadelta([p], lr=1.0, rho=0.9, eps=1e-6),
         lambda w: ops.ApplyAdadelta()(w, _param(np.zeros(3)), _param(np.zeros(3)), 1.0, 0.9,
                                       1e-6, t(g))),
        (lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9),
         lambda w: ops.SGD()(w, t(g), t([0.1]), _param(np.zeros(3)), t([0.9]), _param([1.0]))),
        (lambda p: torch.optim.Adamax([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8),
         lambda w: ops.ApplyAdaMax()(w, _param(np.zeros(3)), _param(np.zeros(3)), 0.9, 0.1, 0.9,
                                     0.999, 1e-8, t(g))),
    ]:
        p = torch.tensor(w0, requires_grad=True)
        o = opt(p)
        p.grad = torch.tensor(g)
        o.step()
        w = _param(w0)
        step(w)
        close(w, p, 1e-5)
    w = _param(w0)
    ops.ApplyProximalGradientDescent()(w, 0.1, 0.05, 0.2, t(g))
    prox = w0 - 0.1 * g
    close(w, np.sign(prox) * np.maximum(np.abs(prox) - 0.005, 0) / 1.02)
