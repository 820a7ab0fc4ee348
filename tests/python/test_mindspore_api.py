"""The MindSpore APIs added for MindSpore's tutorials (issue 41), each checked against numpy or
PyTorch: losses, activation cells, %, //, Tensor(init=), initializers, from_numpy, sparse
tensors, ops.operations / ops.functional, jit, amp, and the error for a missing API."""

import numpy as np
import pytest
import torch

import zenith
from zenith import Tensor, nn, ops

F32 = np.float32


def t(a):
    return Tensor(np.asarray(a, F32))


def close(z, ref, tol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    np.testing.assert_allclose(z.asnumpy(), ref, rtol=tol, atol=tol)


# ---- losses


@pytest.mark.parametrize("cls", [nn.L1Loss, nn.MAELoss])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_l1_and_mae_loss_match_numpy(cls, reduction):
    x = np.array([[1, 2, 3], [2, 3, 4]], F32)
    y = np.array([[0, 2, 5], [3, 1, 1]], F32)
    diff = np.abs(x - y)
    want = {"mean": diff.mean(), "sum": diff.sum(), "none": diff}[reduction]
    close(cls(reduction=reduction)(t(x), t(y)), want)


def test_l1_loss_gradient_matches_torch(rng):
    x, y = rng.normal(size=(4, 3)).astype(F32), rng.normal(size=(4, 3)).astype(F32)
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.L1Loss()(xt, torch.tensor(y)).backward()
    grad = zenith.grad(lambda a: nn.L1Loss()(a, t(y)))(t(x))
    close(grad, xt.grad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_matches_torch(rng, reduction):
    x = (rng.normal(size=(3, 4)) * 30).astype(F32)  # large |x|: the stable form matters
    y = rng.integers(0, 2, size=(3, 4)).astype(F32)
    w = rng.uniform(0.5, 2, size=(3, 4)).astype(F32)
    pw = rng.uniform(0.5, 2, size=(4,)).astype(F32)
    want = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(x), torch.tensor(y), torch.tensor(w), pos_weight=torch.tensor(pw),
        reduction=reduction)
    close(ops.binary_cross_entropy_with_logits(t(x), t(y), t(w), t(pw), reduction), want, 1e-4)
    close(nn.BCEWithLogitsLoss(reduction, t(w), t(pw))(t(x), t(y)), want, 1e-4)


def test_bce_with_logits_gradients_match_torch(rng):
    # The autograd tutorial's loss: ops.binary_cross_entropy_with_logits(z, y, ones, ones).
    x, y = rng.normal(size=(5,)).astype(F32), np.zeros(3, F32)
    w, b = rng.normal(size=(5, 3)).astype(F32), rng.normal(size=(3,)).astype(F32)

    def fn(w_, b_):
        z = ops.matmul(t(x), w_) + b_
        return ops.binary_cross_entropy_with_logits(z, t(y), ops.ones_like(z), ops.ones_like(z))

    gw, gb = zenith.grad(fn, (0, 1))(t(w), t(b))
    wt, bt = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(x) @ wt + bt, torch.tensor(y)).backward()
    close(gw, wt.grad)
    close(gb, bt.grad)


# ---- activation cells


ACTIVATIONS = [
    (lambda: nn.Softmax(axis=1), lambda x: torch.softmax(x, 1)),
    (lambda: nn.LogSoftmax(axis=-1), lambda x: torch.log_softmax(x, -1)),
    (lambda: nn.Softmin(), lambda x: torch.nn.functional.softmin(x, -1)),
    (lambda: nn.LeakyReLU(0.2), lambda x: torch.nn.functional.leaky_relu(x, 0.2)),
    (nn.ReLU6, torch.nn.functional.relu6),
    (lambda: nn.ELU(1.5), lambda x: torch.nn.functional.elu(x, 1.5)),
    (lambda: nn.CELU(0.5), lambda x: torch.nn.functional.celu(x, 0.5)),
    (nn.SeLU, torch.selu),
    (nn.Softplus, torch.nn.functional.softplus),
    (nn.Softsign, torch.nn.functional.softsign),
    (nn.HSigmoid, torch.nn.functional.hardsigmoid),
    (nn.HSwish, torch.nn.functional.hardswish),
    (lambda: nn.Hardtanh(-2.0, 1.5), lambda x: torch.nn.functional.hardtanh(x, -2.0, 1.5)),
    (nn.Mish, torch.nn.functional.mish),
    (nn.Tanhshrink, torch.nn.functional.tanhshrink),
]


@pytest.mark.parametrize("make,ref", ACTIVATIONS)
def test_activation_cells_match_torch_values_and_gradients(rng, make, ref):
    x = (rng.normal(size=(3, 5)) * 4).astype(F32)
    cell = make()
    close(cell(t(x)), ref(torch.tensor(x)), 1e-5)
    xt = torch.tensor(x, requires_grad=True)
    (ref(xt) * torch.arange(15.0).reshape(3, 5)).sum().backward()
    weights = t(np.arange(15.0).reshape(3, 5))
    close(zenith.grad(lambda a: (cell(a) * weights).sum())(t(x)), xt.grad, 1e-4)


def test_softmax_in_sequential_cell_and_repr():
    seq = nn.SequentialCell(nn.Dense(4, 3), nn.Softmax(axis=1))
    out = seq(t(np.ones((2, 4))))
    close(out.sum(axis=1), np.ones(2))
    assert "Softmax" in repr(seq)


# ---- Tensor: %, //, init=, from_numpy, sparse tensors


def test_mod_and_floordiv_match_numpy():
    a = np.array([7.0, -7.0, 5.5, -0.5], F32)
    b = np.array([3.0, 3.0, -2.0, 4.0], F32)
    close(t(a) % t(b), np.mod(a, b))
    close(t(a) // t(b), np.floor_divide(a, b))
    close(t(a) % 2.0, np.mod(a, 2.0))
    close(10.0 // t(b), np.floor_divide(10.0, b))
    ia, ib = np.array([7, -7, 9], np.int32), np.array([2, 2, -4], np.int32)
    assert (Tensor(ia) // Tensor(ib)).asnumpy().tolist() == np.floor_divide(ia, ib).tolist()
    assert (Tensor(ia) % Tensor(ib)).asnumpy().tolist() == np.mod(ia, ib).tolist()
    # Python's %: the gradient with respect to the dividend is 1.
    close(zenith.grad(lambda x: (x % 3.0).sum())(t(a)), np.ones(4))


def test_tensor_from_numpy_shares_memory():
    n = np.ones(5)
    tensor = Tensor.from_numpy(n)
    np.add(n, 1, out=n)
    assert tensor.asnumpy().tolist() == [2.0] * 5
    assert tensor.dtype == zenith.float64


def test_tensor_with_init_and_initializers():
    from zenith.common.initializer import (Constant, HeUniform, Normal, One, TruncatedNormal,
                                           Uniform, XavierUniform, Zero, initializer)
    assert Tensor(shape=(2, 2), dtype=zenith.float32, init=One()).asnumpy().tolist() == \
        [[1.0, 1.0], [1.0, 1.0]]
    assert Tensor(shape=(3,), dtype=zenith.float64, init=Zero()).dtype == zenith.float64
    assert Tensor(shape=(2,), dtype=zenith.float32, init=Constant(2.5)).asnumpy().tolist() == \
        [2.5, 2.5]
    zenith.set_seed(1)
    normal = Tensor(shape=(200, 100), dtype=zenith.float32, init=Normal(sigma=0.5, mean=1.0))
    a = normal.asnumpy()
    assert abs(a.mean() - 1.0) < 0.01 and abs(a.std() - 0.5) < 0.01
    u = initializer(Uniform(0.3), (100, 100)).asnumpy()
    assert u.min() >= -0.3 and u.max() <= 0.3 and u.max() > 0.29
    x = initializer(XavierUniform(), (40, 60)).asnumpy()
    bound = np.sqrt(6 / 100)
    assert np.abs(x).max() <= bound and np.abs(x).max() > 0.95 * bound
    h = initializer(HeUniform(), (40, 60)).asnumpy()
    assert np.abs(h).max() <= np.sqrt(6 / 60)
    tn = initializer(TruncatedNormal(0.1), (100, 100)).asnumpy()
    assert np.abs(tn).max() <= 0.2
    assert initializer("ones", 3).asnumpy().tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="init needs shape"):
        Tensor([1.0], init=One())


def test_sparse_tensors_to_dense_match_numpy():
    csr = zenith.CSRTensor(Tensor([0, 1, 2]), Tensor([0, 1]),
                           Tensor([1, 2], dtype=zenith.float32), (2, 4))
    assert csr.astype(zenith.float64).dtype == zenith.float64
    assert csr.to_dense().asnumpy().tolist() == [[1, 0, 0, 0], [0, 2, 0, 0]]
    coo = zenith.COOTensor(Tensor([[0, 1], [1, 2]], dtype=zenith.int32),
                           Tensor([1, 2], dtype=zenith.float32), (3, 4))
    want = np.zeros((3, 4), F32)
    want[0, 1], want[1, 2] = 1, 2
    assert coo.shape == (3, 4) and coo.values.asnumpy().tolist() == [1.0, 2.0]
    close(coo.to_dense(), want)


# ---- ops.operations, ops.functional, ops.assign


def test_primitives_and_functional():
    from zenith.ops import functional as F
    from zenith.ops import operations as P
    x, y = t([1.0, 2.0, 3.0]), t([4.0, 5.0, 6.0])
    assert P.Mul()(x, y).asnumpy().tolist() == [4.0, 10.0, 18.0]
    assert F.tensor_add(x, y).asnumpy().tolist() == [5.0, 7.0, 9.0]
    assert P.ReduceSum(keep_dims=True)(t([[1.0, 2.0], [3.0, 4.0]]), 1).asnumpy().tolist() == \
        [[3.0], [7.0]]
    a, b = np.arange(6, dtype=F32).reshape(2, 3), np.arange(6, dtype=F32).reshape(2, 3)
    close(P.MatMul(transpose_b=True)(t(a), t(b)), a @ b.T)
    import zenith.ops.operations as P2
    assert P2 is P and repr(P.Mul()) == "Prim[Mul]"


def test_assign_and_apply_momentum_match_the_formula():
    p = zenith.Parameter(t([1.0, 2.0]), name="p")
    ops.assign(p, t([3.0, 4.0]))
    assert p.asnumpy().tolist() == [3.0, 4.0]
    acc = zenith.Parameter(t([0.5, 0.5]), name="acc")
    g = t([1.0, -1.0])
    ops.ApplyMomentum()(p, acc, 0.1, g, 0.9)
    acc_want = np.array([0.5, 0.5]) * 0.9 + np.array([1.0, -1.0])
    close(acc, acc_want)
    close(p, np.array([3.0, 4.0]) - 0.1 * acc_want)


# ---- jit


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(4, 3)

    def construct(self, x):
        return ops.relu(self.dense(x)) * 2.0


def test_jit_decorator_call_form_and_construct_give_eager_results(rng):
    x = t(rng.normal(size=(2, 4)))
    net = _Net()
    want = net(x).asnumpy()

    @zenith.jit
    def run(v):
        return net(v)

    np.testing.assert_array_equal(run(x).asnumpy(), want)
    np.testing.assert_array_equal(zenith.jit(net.construct)(x).asnumpy(), want)
    np.testing.assert_array_equal(zenith.jit(mode="PSJit")(lambda v: net(v))(x).asnumpy(), want)

    class JitNet(_Net):
        @zenith.jit
        def construct(self, x):
            return ops.relu(self.dense(x)) * 2.0

    jn = JitNet()
    jn.dense.weight.set_data(net.dense.weight)
    jn.dense.bias.set_data(net.dense.bias)
    np.testing.assert_array_equal(jn(x).asnumpy(), want)
    with pytest.raises(TypeError, match="unknown option"):
        zenith.jit(run, colour="red")
    zenith.set_context(jit_syntax_level=zenith.STRICT)
    assert zenith.get_context("jit_syntax_level") == zenith.STRICT


# ---- amp


def test_auto_mixed_precision_casts_inputs_and_outputs():
    from zenith.amp import auto_mixed_precision
    net = _Net()
    seen = []
    inner = net.construct
    object.__setattr__(net, "construct", lambda x: (seen.append(x.dtype), inner(x))[1])
    amp_net = auto_mixed_precision(net, "O2")
    assert amp_net is net and type(net).__name__ == "_Net"
    out = amp_net(t(np.ones((2, 4))))
    assert seen == [zenith.float16] and out.dtype == zenith.float32
    assert auto_mixed_precision(_Net(), "O0").__class__ is _Net
    with pytest.raises(ValueError, match="amp_level"):
        auto_mixed_precision(_Net(), "O5")


def test_loss_scalers_and_all_finite():
    from zenith.amp import DynamicLossScaler, StaticLossScaler, all_finite
    s = StaticLossScaler(8.0)
    assert s.scale(t([1.0, 2.0])).asnumpy().tolist() == [8.0, 16.0]
    a, b = s.unscale((t([8.0]), t([16.0])))
    assert a.asnumpy().tolist() == [1.0] and b.asnumpy().tolist() == [2.0]
    assert bool(all_finite([t([1.0]), t([2.0])]).asnumpy())
    assert not bool(all_finite((t([1.0]), t([np.inf]))).asnumpy())
    assert not bool(all_finite([t([np.nan])]).asnumpy())
    d = DynamicLossScaler(scale_value=2 ** 4, scale_factor=2, scale_window=2)
    scales = []
    for finite in [True, True, True, False, False, True]:
        d.adjust(Tensor(np.array(finite)))
        scales.append(float(d.scale_value.asnumpy()))
    assert scales == [16.0, 32.0, 32.0, 16.0, 8.0, 8.0]
    d = DynamicLossScaler(2.0, 2, 10)
    for _ in range(3):
        d.adjust(False)
    assert float(d.scale_value.asnumpy()) == 1.0  # not below 1


def test_build_train_network_steps_like_plain_sgd(rng):
    from zenith.amp import FixedLossScaleManager, build_train_network
    x, y = t(rng.normal(size=(8, 4))), Tensor(rng.integers(0, 3, 8).astype(np.int32))
    a, b = _Net(), _Net()
    for name in ("weight", "bias"):
        getattr(b.dense, name).set_data(getattr(a.dense, name))
    loss_fn = nn.CrossEntropyLoss()
    step = build_train_network(a, nn.SGD(a.trainable_params(), 0.1), loss_fn, level="O2",
                               loss_scale_manager=FixedLossScaleManager(128.0))
    opt_b = nn.SGD(b.trainable_params(), 0.1)
    grad_b = zenith.value_and_grad(lambda u, v: loss_fn(b(u.astype(zenith.float16)), v), None,
                                   opt_b.parameters)
    for _ in range(3):
        la = step(x, y)
        lb, g = grad_b(x, y)
        opt_b(g)
        np.testing.assert_allclose(la.asnumpy(), lb.asnumpy(), rtol=1e-5)
    close(a.dense.weight, b.dense.weight.asnumpy())
    from zenith.amp import DynamicLossScaleManager
    m = DynamicLossScaleManager(2 ** 10, 2, 100)
    m.update_loss_scale(True)
    assert m.get_loss_scale() == 2 ** 9 and m.get_drop_overflow_update()


# ---- the error for an API zenith lacks


def test_missing_api_names_itself_and_says_not_supported():
    with pytest.raises(zenith.UnsupportedError,
                       match=r"mindspore\.nn\.Conv3dTranspose is not supported by zenith yet"):
        nn.Conv3dTranspose(1, 1, 3)
    with pytest.raises(NotImplementedError, match=r"mindspore\.ops\.fft is not supported"):
        ops.fft(t([1.0]))
    with pytest.raises(zenith.UnsupportedError, match=r"mindspore\.hal is not supported"):
        from zenith import hal  # noqa: F401
    with pytest.raises(zenith.UnsupportedError, match=r"mindspore\.dataset\.LSUNDataset"):
        zenith.dataset.LSUNDataset("x")
    with pytest.raises(zenith.UnsupportedError, match=r"mindspore\.train\.BackupAndRestore"):
        zenith.train.BackupAndRestore
    assert not hasattr(zenith, "_private_thing")  # private names: AttributeError as usual


def test_jit_options_and_syntax_levels():
    assert (zenith.STRICT, zenith.COMPATIBLE, zenith.LAX) == (0, 1, 2)
    config = zenith.JitConfig(jit_level="O1")
    assert config.jit_config_dict["jit_level"] == "O1"

    @zenith.jit_class
    class Box:
        pass

    assert Box().__class__.__name__ == "Box"


def test_l1_loss_floor_mod_and_isfinite_functions_match_numpy():
    a, b = np.array([1.0, -2.0, 3.5], F32), np.array([0.5, 2.0, -1.0], F32)
    close(ops.l1_loss(t(a), t(b)), np.abs(a - b).mean())
    close(ops.l1_loss(t(a), t(b), reduction="sum"), np.abs(a - b).sum())
    close(ops.floor_mod(t(a), t(b)), np.mod(a, b))
    close(ops.floor_divide(t(a), t(b)), np.floor_divide(a, b))
    assert ops.isfinite(t([1.0, np.inf, np.nan])).asnumpy().tolist() == [True, False, False]


def test_loss_scale_manager_base():
    from zenith import LossScaleManager
    m = zenith.FixedLossScaleManager(64.0, drop_overflow_update=False)
    assert isinstance(m, LossScaleManager)
    assert m.get_loss_scale() == 64.0 and not m.get_drop_overflow_update()
    with pytest.raises(ValueError, match="loss_scale"):
        zenith.FixedLossScaleManager(0.5)


# ---- export / load / GraphCell


def test_export_onnx_and_graph_cell_match_the_network(tmp_path, rng):
    import onnx
    net = nn.SequentialCell(nn.Flatten(), nn.Dense(784, 16), nn.ReLU(), nn.Dense(16, 10),
                            nn.Softmax(axis=1))
    x = t(rng.normal(size=(1, 1, 28, 28)))
    path = zenith.export(net, x, file_name=str(tmp_path / "net"), file_format="ONNX")
    assert path.endswith("net.onnx")
    onnx.checker.check_model(onnx.load(path))
    graph_cell = nn.GraphCell(zenith.load(path))
    batch = t(rng.normal(size=(3, 1, 28, 28)))  # any batch size
    np.testing.assert_allclose(graph_cell(batch).asnumpy(), net(batch).asnumpy(), rtol=1e-5,
                               atol=1e-6)
    # MINDIR: the same graph as MindSpore's protobuf, read back by zenith.load (more in
    # test_mindspore_mindir.py).
    mindir = zenith.export(net, x, file_name=str(tmp_path / "net"), file_format="MINDIR")
    assert mindir.endswith("net.mindir")
    graph = zenith.load(mindir)
    assert graph.metadata["zenith.export_format"] == "MINDIR"
    np.testing.assert_allclose(nn.GraphCell(graph)(batch).asnumpy(), net(batch).asnumpy(),
                               rtol=1e-5, atol=1e-6)


def test_export_and_load_refusals(tmp_path):
    net = nn.Dense(4, 2)
    with pytest.raises(zenith.UnsupportedError, match="file_format 'AIR'"):
        zenith.export(net, t(np.ones((1, 4))), file_name=str(tmp_path / "n"), file_format="AIR")
    foreign = tmp_path / "mindspore.mindir"
    foreign.write_bytes(b"\x0a\x05hello not a zenith graph")
    with pytest.raises(zenith.UnsupportedError, match="is not a MindIR file"):
        zenith.load(str(foreign))
    with pytest.raises(FileNotFoundError):
        zenith.load(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError, match="GraphCell takes"):
        nn.GraphCell("model.onnx")


def test_print_cell_in_mindspores_form():
    class Network(nn.Cell):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.dense_relu_sequential = nn.SequentialCell(nn.Dense(784, 512), nn.ReLU())

        def construct(self, x):
            return self.dense_relu_sequential(self.flatten(x))

    assert repr(Network()) == (
        "Network<\n"
        "  (flatten): Flatten<>\n"
        "  (dense_relu_sequential): SequentialCell<\n"
        "    (0): Dense<input_channels=784, output_channels=512, has_bias=True>\n"
        "    (1): ReLU<>\n"
        "    >\n"
        "  >")
    assert repr(nn.Softmax(axis=1)) == "Softmax<>"


def test_to_float_casts_inputs_so_the_output_is_float16():
    dense = nn.Dense(4, 3).to_float(zenith.float16)
    out = dense(t(np.ones((2, 4))))  # a float32 input
    assert out.dtype == zenith.float16
    ref = nn.Dense(4, 3)
    ref.weight.set_data(dense.weight.astype(zenith.float32))
    ref.bias.set_data(dense.bias.astype(zenith.float32))
    np.testing.assert_allclose(out.asnumpy().astype(F32), ref(t(np.ones((2, 4)))).asnumpy(),
                               rtol=2e-3, atol=2e-3)
    assert type(dense).__name__ == "Dense" and isinstance(dense, nn.Dense)


# ---- top-level names, dtype converters, composed ops functions, wrapper cells


def test_top_level_callbacks_jit_aliases_and_dtype_converters(capsys):
    assert zenith.LossMonitor is zenith.train.LossMonitor
    assert zenith.ModelCheckpoint is zenith.train.ModelCheckpoint
    for name in ("Callback", "CheckpointConfig", "EarlyStopping", "RunContext", "TimeMonitor",
                 "SummaryCollector"):
        assert getattr(zenith, name) is getattr(zenith.train, name)
    assert zenith.ms_function is zenith.jit and zenith.ms_class is zenith.jit_class
    x = t([1.0])
    assert zenith.mutable(x) is x
    assert zenith.dtype_to_nptype(zenith.float32) is np.float32
    assert zenith.dtype_to_pytype(zenith.int32) is int
    assert zenith.dtype_to_pytype(zenith.bool_) is bool
    assert zenith.pytype_to_dtype(float) == zenith.float32
    assert zenith.pytype_to_dtype(np.int32) == zenith.int32
    zenith.run_check()
    assert "installed on platform [CPU] successfully" in capsys.readouterr().out


FUNCTIONS = [
    (lambda x: ops.relu6(x), torch.nn.functional.relu6),
    (lambda x: ops.hardswish(x), torch.nn.functional.hardswish),
    (lambda x: ops.softsign(x), torch.nn.functional.softsign),
    (lambda x: ops.selu(x), torch.selu),
    (lambda x: ops.celu(x, 0.7), lambda x: torch.celu(x, 0.7)),
    (lambda x: ops.mish(x), torch.nn.functional.mish),
    (lambda x: ops.logsumexp(x, 1), lambda x: torch.logsumexp(x, 1)),
    (lambda x: ops.logsumexp(x, 0, True), lambda x: torch.logsumexp(x, 0, True)),
    (lambda x: ops.norm(x), lambda x: torch.linalg.norm(x)),
    (lambda x: ops.norm(x, dim=1), lambda x: torch.linalg.norm(x, dim=1)),
    (lambda x: ops.clip_by_value(x, -1.0, 2.0), lambda x: torch.clamp(x, -1.0, 2.0)),
    (lambda x: ops.bmm(x.reshape(1, 3, 5), x.reshape(1, 5, 3)),
     lambda x: torch.bmm(x.reshape(1, 3, 5), x.reshape(1, 5, 3))),
]


@pytest.mark.parametrize("fn,ref", FUNCTIONS)
def test_composed_ops_functions_match_torch(rng, fn, ref):
    x = (rng.normal(size=(3, 5)) * 3).astype(F32)
    close(fn(t(x)), ref(torch.tensor(x)), 1e-5)
    xt = torch.tensor(x, requires_grad=True)
    ref(xt).sum().backward()
    close(zenith.grad(lambda a: fn(a).sum())(t(x)), xt.grad, 1e-4)


def test_comparison_aliases_isnan_and_logical_not():
    a, b = t([1.0, 2.0, np.nan]), t([1.0, 3.0, 0.0])
    assert ops.ge(a, b).asnumpy().tolist() == [True, False, False]
    assert ops.gt(b, a).asnumpy().tolist() == [False, True, False]
    assert ops.le(a, b).asnumpy().tolist() == [True, True, False]
    assert ops.ne(a, b).asnumpy().tolist() == [False, True, True]
    assert ops.isnan(a).asnumpy().tolist() == [False, False, True]
    assert ops.logical_not(t([0.0, 2.0])).asnumpy().tolist() == [True, False]
    assert ops.expand(t([1.0, 2.0]), (2, 2)).asnumpy().tolist() == [[1, 2], [1, 2]]


def test_train_one_step_cell_matches_a_value_and_grad_step(rng):
    x, y = t(rng.normal(size=(6, 4))), Tensor(rng.integers(0, 3, 6).astype(np.int32))
    a, b = nn.Dense(4, 3), nn.Dense(4, 3)
    b.weight.set_data(a.weight)
    b.bias.set_data(a.bias)
    step = nn.TrainOneStepCell(nn.WithLossCell(a, nn.CrossEntropyLoss()),
                               nn.SGD(a.trainable_params(), 0.1))
    opt_b = nn.SGD(b.trainable_params(), 0.1)
    grad_b = zenith.value_and_grad(lambda u, v: nn.CrossEntropyLoss()(b(u), v), None,
                                   opt_b.parameters)
    for _ in range(2):
        loss_a = step(x, y)
        loss_b, g = grad_b(x, y)
        opt_b(g)
        close(loss_a, loss_b.asnumpy())
    close(a.weight, b.weight.asnumpy())
    loss, out, label = nn.WithEvalCell(a, nn.CrossEntropyLoss())(x, y)
    close(out, a(x).asnumpy())
    close(loss, nn.CrossEntropyLoss()(a(x), y).asnumpy())
    grads = nn.WithGradCell(a, nn.CrossEntropyLoss())(x, y)
    xt = torch.tensor(x.asnumpy())
    wt = torch.tensor(a.weight.asnumpy(), requires_grad=True)
    bt = torch.tensor(a.bias.asnumpy(), requires_grad=True)
    torch.nn.functional.cross_entropy(xt @ wt.T + bt, torch.tensor(y.asnumpy()).long()).backward()
    close(grads[0], wt.grad, 1e-5)
    value, (gx,) = nn.ForwardValueAndGrad(lambda v: (v * v).sum(), get_all=True)(t([1.0, 2.0]))
    assert float(value.asnumpy()) == 5.0 and gx.asnumpy().tolist() == [2.0, 4.0]


# ---- more ops.operations primitives, against PyTorch / numpy

_X = np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 4.0]], F32)
_Y = np.array([[0.5, 1.0, 0.0], [2.0, -1.5, 3.0]], F32)
TX, TY = torch.tensor(_X), torch.tensor(_Y)
F = torch.nn.functional

PRIMITIVES = [
    ("ReLU6", (), (_X,), F.relu6(TX)),
    ("Elu", (0.5,), (_X,), F.elu(TX, 0.5)),
    ("GeLU", (), (_X,), F.gelu(TX)),
    ("HSigmoid", (), (_X,), F.hardsigmoid(TX)),
    ("HSwish", (), (_X,), F.hardswish(TX)),
    ("Softplus", (), (_X,), F.softplus(TX)),
    ("Softsign", (), (_X,), F.softsign(TX)),
    ("LogSoftmax", (1,), (_X,), F.log_softmax(TX, 1)),
    ("Identity", (), (_X,), TX),
    ("Reciprocal", (), (_Y + 3,), 1 / (TY + 3)),
    ("SquaredDifference", (), (_X, _Y), (TX - TY) ** 2),
    ("DivNoNan", (), (_X, _Y), torch.where(TY == 0, 0.0, TX / torch.where(TY == 0, 1.0, TY))),
    ("Floor", (), (_X,), torch.floor(TX)),
    ("Ceil", (), (_X,), torch.ceil(TX)),
    ("Round", (), (_X,), torch.round(TX)),
    ("Sign", (), (_X,), torch.sign(TX)),
    ("Flatten", (), (_X.reshape(2, 3, 1),), TX.reshape(2, 3)),
    ("Squeeze", (2,), (_X.reshape(2, 3, 1),), TX),
    ("BroadcastTo", ((2, 2, 3),), (_X,), TX.expand(2, 2, 3)),
    ("BiasAdd", (), (_X, np.array([1.0, 2.0, 3.0], F32)), TX + torch.tensor([1.0, 2.0, 3.0])),
    ("L2Loss", (), (_X,), (TX ** 2).sum() / 2),
    ("SmoothL1Loss", (1.0,), (_X, _Y), F.smooth_l1_loss(TX, TY, reduction="none")),
    ("SparseSoftmaxCrossEntropyWithLogits", (), (_X, np.array([2, 0], np.int32)),
     F.cross_entropy(TX, torch.tensor([2, 0]))),
]


@pytest.mark.parametrize("name,attrs,inputs,want", PRIMITIVES, ids=[p[0] for p in PRIMITIVES])
def test_primitives_match_torch(name, attrs, inputs, want):
    from zenith.ops import operations as P
    out = getattr(P, name)(*attrs)(*[Tensor(a) for a in inputs])
    close(out, want, 1e-5)


def test_index_shape_and_construction_primitives():
    from zenith.ops import operations as P
    x = Tensor(_X)
    assert P.Argmax(axis=1)(x).asnumpy().tolist() == np.argmax(_X, 1).tolist()
    assert P.Argmin()(x).asnumpy().tolist() == np.argmin(_X, -1).tolist()
    assert P.Argmax(1, zenith.int32)(x).dtype == zenith.int32
    close(P.Stack(1)([x, x]), np.stack([_X, _X], 1))
    rows = P.Unstack(0)(x)
    assert len(rows) == 2 and rows[1].asnumpy().tolist() == _X[1].tolist()
    close(P.AddN()([x, x, x]), 3 * _X)
    idx = Tensor(np.array([2, 0], np.int32))
    close(P.Gather()(x, idx, 1), _X[:, [2, 0]])
    index = Tensor(np.array([[0, 0, 1], [1, 0, 0]], np.int64))
    close(P.GatherD()(x, 1, index), np.take_along_axis(_X, index.asnumpy(), 1))
    mask = Tensor(_X > 1)
    close(P.MaskedFill()(x, mask, 0.0), np.where(_X > 1, 0.0, _X))
    nan = Tensor(np.array([1.0, np.nan, np.inf], F32))
    assert P.IsNan()(nan).asnumpy().tolist() == [False, True, False]
    assert P.IsFinite()(nan).asnumpy().tolist() == [True, False, False]
    assert P.LogicalNot()(Tensor(np.array([True, False]))).asnumpy().tolist() == [False, True]
    assert P.Shape()(x) == (2, 3) and P.Size()(x) == 6 and P.Rank()(x) == 2
    assert P.Fill()(zenith.float32, (2,), 3.0).asnumpy().tolist() == [3.0, 3.0]
    assert P.Ones()((2, 1), zenith.float32).asnumpy().tolist() == [[1.0], [1.0]]
    assert P.Zeros()((1,), zenith.float32).asnumpy().tolist() == [0.0]
    close(P.Eye()(2, 3, zenith.float32), np.eye(2, 3))
    close(P.OneHot()(Tensor(np.array([0, 2])), 3, Tensor(1.0), Tensor(0.0)), np.eye(3)[[0, 2]])
    loss, dlogits = P.SoftmaxCrossEntropyWithLogits()(x, Tensor(np.eye(3, dtype=F32)[[2, 0]]))
    close(loss, F.cross_entropy(TX, torch.tensor([2, 0]), reduction="none"))
    close(dlogits, torch.softmax(TX, 1) - torch.eye(3)[[2, 0]])
    P.Print()("printed by P.Print")
