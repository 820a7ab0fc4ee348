"""zenith.Tensor: numpy in and out (shared memory), dtypes, metadata, views, indexing,
operators and the MindSpore-named methods; Parameter and ParameterTuple."""

import numpy as np
import pytest

import zenith
from zenith import Parameter, ParameterTuple, Tensor


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor(a)
    assert t.shape == (2, 3) and t.dtype == zenith.float32
    a[0, 0] = 42.0
    assert t.asnumpy()[0, 0] == 42.0
    out = t.asnumpy()
    out[1, 2] = -1.0
    assert a[1, 2] == -1.0
    assert np.shares_memory(out, a)


def test_strided_numpy_views_are_shared_and_read_correctly():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = a[::2, 1::2]
    t = Tensor(view)
    np.testing.assert_array_equal(t.asnumpy(), view)
    a[2, 3] = 100.0
    assert t.asnumpy()[1, 1] == 100.0
    assert not t.is_contiguous()
    assert t.strides == view.strides


def test_layouts_that_cannot_be_shared_are_copied():
    a = np.arange(5, dtype=np.float32)
    reversed_view = a[::-1]
    t = Tensor(reversed_view)
    np.testing.assert_array_equal(t.asnumpy(), reversed_view)
    a[0] = 9
    assert t.asnumpy()[-1] == 0.0  # a copy
    readonly = np.ones(3, dtype=np.float32)
    readonly.flags.writeable = False
    r = Tensor(readonly)
    r.asnumpy()[0] = 5
    assert readonly[0] == 1
    big_endian = np.arange(3, dtype=">i4")
    np.testing.assert_array_equal(Tensor(big_endian).asnumpy(), [0, 1, 2])


@pytest.mark.parametrize("np_dtype,dtype", [
    (np.float32, zenith.float32), (np.float64, zenith.float64), (np.float16, zenith.float16),
    (np.int32, zenith.int32), (np.int64, zenith.int64), (np.uint8, zenith.uint8),
    (np.bool_, zenith.bool_)])
def test_dtypes_round_trip(np_dtype, dtype):
    a = (np.arange(4) % 2).astype(np_dtype)
    t = Tensor(a)
    assert t.dtype == dtype
    assert t.asnumpy().dtype == np_dtype
    np.testing.assert_array_equal(t.asnumpy(), a)
    assert t.itemsize == a.itemsize and t.nbytes == a.nbytes


def test_bfloat16_converts_to_float32_for_numpy():
    t = Tensor(np.array([1.5, -2.0], np.float32)).astype(zenith.bfloat16)
    assert t.dtype == zenith.bfloat16
    np.testing.assert_array_equal(t.asnumpy(), np.array([1.5, -2.0], np.float32))
    assert "BFloat16" in repr(t)


def test_python_values_follow_mindspore_dtypes():
    assert Tensor(1.5).dtype == zenith.float32 and Tensor(1.5).shape == ()
    assert Tensor(3).dtype == zenith.int64
    assert Tensor(True).dtype == zenith.bool_
    assert Tensor([[1.0, 2.0]]).dtype == zenith.float32
    assert Tensor([1, 2]).dtype == zenith.int64
    assert Tensor(np.float64(2.0)).dtype == zenith.float64
    assert Tensor([1, 2], zenith.float32).dtype == zenith.float32
    assert Tensor([1, 2], dtype="float64").dtype == zenith.float64
    z = Tensor(shape=(2, 3), dtype=zenith.int32)
    assert z.shape == (2, 3) and z.dtype == zenith.int32 and z.asnumpy().sum() == 0
    same = Tensor([1.0])
    assert Tensor(same)._same(same)


def test_dtype_objects():
    assert repr(zenith.float32) == "Float32" and str(zenith.int64) == "Int64"
    assert zenith.float16.itemsize == 2 and zenith.bool_.itemsize == 1
    assert zenith.float64.is_floating_point and not zenith.uint8.is_floating_point
    assert isinstance(zenith.float32, zenith.dtype)
    assert zenith.bfloat16.itemsize == 2 and zenith.int32.itemsize == 4


def test_metadata_and_conversions():
    t = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert t.ndim == 3 - 1 and t.size == 12 and t.numel() == 12 and t.dim() == 2
    assert len(t) == 3
    assert Tensor([2.5]).item() == 2.5 and isinstance(Tensor(3).item(), int)
    assert Tensor(True).item() is True
    assert float(Tensor(1.25)) == 1.25 and int(Tensor(7)) == 7
    assert [0, 1, 2][Tensor(1)] == 1
    assert t.tolist()[1] == [4.0, 5.0, 6.0, 7.0]
    assert np.asarray(t).shape == (3, 4)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert bool(Tensor([1.0])) and not bool(Tensor(0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t)
    with pytest.raises(TypeError):
        len(Tensor(1.0))
    with pytest.raises(TypeError):
        [0][Tensor(0.5)]
    assert "Tensor(shape=[3, 4], dtype=Float32" in repr(t)
    assert str(Tensor([1, 2])) == "[1 2]"
    assert hash(t) == hash(Tensor(t))


def test_views_share_memory():
    t = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert t.reshape(6, 4).shape == (6, 4) and t.reshape((4, 6)).shape == (4, 6)
    assert t.reshape(-1).shape == (24,)
    assert t.view(4, 6).shape == (4, 6)
    assert t.permute(2, 0, 1).shape == (4, 2, 3)
    assert t.transpose().shape == (4, 3, 2) and t.transpose(1, 0, 2).shape == (3, 2, 4)
    assert t.swapaxes(0, 2).shape == (4, 3, 2)
    assert t.T.shape == (4, 3, 2)
    assert t.expand_dims(0).shape == (1, 2, 3, 4) and t.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert t.unsqueeze(0).squeeze().shape == (2, 3, 4)
    assert t.unsqueeze(0).squeeze(0).shape == (2, 3, 4)
    assert t.unsqueeze(1).squeeze_dim(1).shape == (2, 3, 4)
    with pytest.raises(ValueError):
        t.squeeze(0)
    assert t.flatten().shape == (24,) and t.flatten(start_dim=1).shape == (2, 12)
    assert t.flatten_dims(0, 1).shape == (6, 4)
    assert Tensor([1.0, 2.0]).broadcast_to((3, 2)).shape == (3, 2)
    assert Tensor([1.0]).expand_as(t).shape == (2, 3, 4)
    assert t.view_as(Tensor(np.zeros((6, 4)))).shape == (6, 4)
    p = t.permute(1, 0, 2)
    assert not p.is_contiguous() and p.contiguous().is_contiguous()
    c = t.copy()
    c[0, 0, 0] = 100.0
    assert t.asnumpy()[0, 0, 0] == 0.0
    t.reshape(24)[5] = -5.0
    assert t.asnumpy()[0, 1, 1] == -5.0
    assert t.detach()._same(t) is False and t.detach().asnumpy()[0, 1, 1] == -5.0


def test_getitem_matches_numpy():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = Tensor(a)
    for index in [1, -1, (1, 2), (slice(None), 2), (Ellipsis, 1), (slice(1, None, 2),),
                  (None, 0), (0, None, slice(1, 3)), (slice(None), slice(None), -2),
                  (Tensor([0, 2]),), (slice(None), [3, 1]), (np.array([True, False, True]),),
                  (slice(None), Tensor(1))]:
        np.testing.assert_array_equal(t[index].asnumpy(), a[tuple(
            i.asnumpy() if isinstance(i, Tensor) else i for i in (
                index if isinstance(index, tuple) else (index,)))], err_msg=str(index))
    with pytest.raises(ValueError):
        t[::-1]
    with pytest.raises(IndexError):
        t[Tensor([0.5])]
    with pytest.raises(Exception, match="out of range"):
        t[7]


def test_setitem_writes_through_views():
    t = Tensor(np.zeros((3, 4), np.float32))
    t[1] = 2.0
    t[:, 3] = Tensor([1.0, 2.0, 3.0])
    t[0, 0:2] = np.array([7.0, 8.0])
    expected = np.zeros((3, 4), np.float32)
    expected[1] = 2.0
    expected[:, 3] = [1.0, 2.0, 3.0]
    expected[0, 0:2] = [7.0, 8.0]
    np.testing.assert_array_equal(t.asnumpy(), expected)
    with pytest.raises(IndexError):
        t[Tensor([0])] = 1.0
    rows = [r.asnumpy().tolist() for r in t]
    assert rows == expected.tolist()


def test_operators_broadcast_and_promote():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = np.array([10.0, 20.0], np.float32)
    x, y = Tensor(a), Tensor(b)
    np.testing.assert_allclose((x + y).asnumpy(), a + b)
    np.testing.assert_allclose((x - y).asnumpy(), a - b)
    np.testing.assert_allclose((x * y).asnumpy(), a * b)
    np.testing.assert_allclose((x / y).asnumpy(), a / b)
    np.testing.assert_allclose((x ** 2).asnumpy(), a ** 2)
    np.testing.assert_allclose((2 ** x).asnumpy(), 2 ** a)
    np.testing.assert_allclose((1 - x).asnumpy(), 1 - a)
    np.testing.assert_allclose((1 / x).asnumpy(), 1 / a, rtol=1e-6)
    np.testing.assert_allclose((x @ x).asnumpy(), a @ a)
    np.testing.assert_allclose((a @ x).asnumpy(), a @ a)
    np.testing.assert_allclose((b * x).asnumpy(), b * a)  # numpy defers to Tensor
    np.testing.assert_allclose((-x).asnumpy(), -a)
    np.testing.assert_allclose(abs(-x).asnumpy(), a)
    assert (x == 2.0).asnumpy().tolist() == [[False, True], [False, False]]
    assert (x != 2.0).dtype == zenith.bool_
    assert (x > y).asnumpy().sum() == 0 and (x <= 3).asnumpy().sum() == 3
    assert (x < 2).asnumpy().sum() == 1 and (x >= 4).asnumpy().sum() == 1
    ints = Tensor([1, 2, 3])
    assert (ints * 2).dtype == zenith.int64
    assert (ints * 0.5).dtype == zenith.float32
    np.testing.assert_allclose((ints * 0.5).asnumpy(), [0.5, 1.0, 1.5])
    assert (ints / 2).dtype == zenith.float32
    assert (ints == None) is False  # noqa: E711 (not a tensor operand: identity comparison)
    with pytest.raises(TypeError):
        x + "a"
    half = Tensor(a.astype(np.float16))
    assert (half * 2.0).dtype == zenith.float16


def test_reductions_match_numpy():
    a = np.random.default_rng(1).normal(size=(3, 4, 5)).astype(np.float32)
    t = Tensor(a)
    np.testing.assert_allclose(t.sum().asnumpy(), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(t.sum(1).asnumpy(), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(t.sum((0, 2), keepdims=True).asnumpy(), a.sum((0, 2), keepdims=True),
                               rtol=1e-5)
    np.testing.assert_allclose(t.sum(initial=1.0).asnumpy(), a.sum() + 1.0, rtol=1e-5)
    assert Tensor([True, True, False]).sum().item() == 2
    np.testing.assert_allclose(t.mean(-1).asnumpy(), a.mean(-1), rtol=1e-5)
    np.testing.assert_allclose(Tensor([1, 2]).mean().asnumpy(), 1.5)
    np.testing.assert_allclose(t.max().asnumpy(), a.max())
    np.testing.assert_allclose(t.max(axis=1).asnumpy(), a.max(1))
    np.testing.assert_allclose(t.min(axis=2, keepdims=True).asnumpy(), a.min(2, keepdims=True))
    v, i = t.max(axis=0, return_indices=True)
    np.testing.assert_array_equal(i.asnumpy(), a.argmax(0))
    v, i = t.min(return_indices=True)
    assert i.item() == a.argmin()
    np.testing.assert_array_equal(t.argmax(2).asnumpy(), a.argmax(2))
    assert t.argmax().item() == a.argmax() and t.argmin().item() == a.argmin()
    np.testing.assert_array_equal(t.argmin(1).asnumpy(), a.argmin(1))
    np.testing.assert_allclose(t.var(1).asnumpy(), a.var(1), rtol=1e-4)
    np.testing.assert_allclose(t.var(1, ddof=1).asnumpy(), a.var(1, ddof=1), rtol=1e-4)
    np.testing.assert_allclose(t.std().asnumpy(), a.std(), rtol=1e-4)
    with pytest.raises(ValueError):
        t.var(ddof=2)
    with pytest.raises(ValueError):
        t.max(initial=0)
    with pytest.raises(ValueError):
        t.min(where=True)
    b = Tensor([[0, 1], [2, 3]])
    assert b.all().item() is False and b.any().item() is True
    assert b.all(axis=1).asnumpy().tolist() == [False, True]
    assert b.any(axis=0, keep_dims=True).shape == (1, 2)


def test_elementwise_methods_match_numpy():
    a = np.array([0.5, 1.0, 2.0], np.float32)
    t = Tensor(a)
    for name, ref in [("abs", np.abs), ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt),
                      ("rsqrt", lambda v: 1 / np.sqrt(v)), ("square", np.square),
                      ("sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("tanh", np.tanh)]:
        np.testing.assert_allclose(getattr(t, name)().asnumpy(), ref(a), rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(t.pow(3).asnumpy(), a ** 3, rtol=1e-6)
    np.testing.assert_allclose(t.reshape(1, 3).matmul(t.reshape(3, 1)).asnumpy(), [[a @ a]])
    s = np.exp(a) / np.exp(a).sum()
    np.testing.assert_allclose(t.softmax().asnumpy(), s, rtol=1e-6)
    np.testing.assert_allclose(t.log_softmax(0).asnumpy(), np.log(s), rtol=1e-5)
    np.testing.assert_allclose(t.clip(0.8, 1.5).asnumpy(), np.clip(a, 0.8, 1.5))
    np.testing.assert_allclose(t.clamp(max=1.0).asnumpy(), np.minimum(a, 1.0))
    np.testing.assert_allclose(t.masked_fill(t > 1.0, 0.0).asnumpy(), [0.5, 1.0, 0.0])
    np.testing.assert_allclose(t.index_select(0, Tensor([2, 0])).asnumpy(), a[[2, 0]])


def test_casts_and_in_place():
    t = Tensor([1.7, -2.2])
    assert t.astype(zenith.int32).asnumpy().tolist() == [1, -2]
    assert t.to(zenith.float64).dtype == zenith.float64
    assert t.float().dtype == zenith.float32 and t.half().dtype == zenith.float16
    assert t.double().dtype == zenith.float64 and t.int().dtype == zenith.int32
    assert t.long().dtype == zenith.int64 and t.bool().dtype == zenith.bool_
    with pytest.raises(TypeError):
        t.astype("complex64")
    u = Tensor(np.zeros(3, np.float32))
    assert u.fill(2.0) is u and u.asnumpy().tolist() == [2.0, 2.0, 2.0]
    u.zero_()
    assert u.asnumpy().sum() == 0
    u.assign_value([1, 2, 3])
    assert u.asnumpy().tolist() == [1.0, 2.0, 3.0]


def test_requires_grad_only_on_floating_leaves():
    t = Tensor([1.0, 2.0])
    assert t.requires_grad is False
    t.requires_grad = True
    assert t.requires_grad
    with pytest.raises(zenith.Error, match=r"\[requires_grad\]"):
        Tensor([1, 2]).requires_grad = True


def test_parameter():
    data = np.ones((2, 2), np.float32)
    p = Parameter(data, name="w")
    assert isinstance(p, Tensor) and p.name == "w" and p.requires_grad
    data[0, 0] = 5.0
    assert p.asnumpy()[0, 0] == 1.0  # a copy the parameter owns
    assert p.data is p
    p.set_data(Tensor(np.full((2, 2), 3.0, np.float32)))
    assert p.asnumpy().tolist() == [[3.0, 3.0], [3.0, 3.0]]
    p.set_data(Tensor(np.zeros(5, np.float32)))
    assert p.shape == (5,)
    q = p.clone()
    assert q.name == "w" and not q._same(p)
    with pytest.raises(ValueError):
        p.clone(init="bogus")  # 'zeros' etc.: test_mindspore_train
    frozen = Parameter(Tensor([1, 2]), name="steps")
    assert frozen.requires_grad is False
    assert Parameter(1.0, requires_grad=False).requires_grad is False
    assert "Parameter (name=w" in repr(p)
    pt = ParameterTuple([p, q])
    assert isinstance(pt, tuple) and len(pt) == 2
    with pytest.raises(TypeError):
        ParameterTuple([1.0])


def test_bad_values_raise_type_errors():
    with pytest.raises(TypeError, match="None"):
        Tensor(None)
    with pytest.raises(TypeError):
        Tensor("text")
    with pytest.raises(TypeError):
        Tensor([[1.0], [1.0, 2.0]])
    with pytest.raises(TypeError):
        Tensor(np.array([1 + 2j]))
    with pytest.raises(TypeError):
        Tensor()
    with pytest.raises(ValueError):
        Tensor([1.0, 2.0], shape=(3,))
    with pytest.raises(ValueError, match="int64"):
        Tensor(2 ** 70)
