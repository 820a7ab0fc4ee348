"""zenith.nn: Python Cell subclasses (registration, names, modes), the built-in layers with
MindSpore's arguments, losses, and Python cells' gradients equal to the C++ cells'."""

import gc

import numpy as np
import pytest

import zenith
from zenith import Parameter, Tensor, models, nn, ops


class PySeedCNN(nn.Cell):
    """The seed's CNN written as a Python cell (construct in Python)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, pad_mode="valid")
        self.conv2 = nn.Conv2d(32, 64, 3, pad_mode="valid")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(64 * 5 * 5, 10)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return self.fc(self.flatten(x))


def copy_seed_weights(src, dst):
    """The C++ seed_cnn's parameters ("0.weight", ...) into PySeedCNN's (conv1.weight, ...)."""
    names = {"0": "conv1", "3": "conv2", "7": "fc"}
    params = {}
    for name, p in src.parameters_and_names():
        layer, kind = name.split(".")
        params[f"{names[layer]}.{kind}"] = p
    not_loaded, unused = zenith.load_param_into_net(dst, params)
    assert not_loaded == [] and unused == []


def test_python_cell_gradients_equal_the_cpp_cells(rng):
    zenith.set_seed(0)
    cpp = models.seed_cnn(1, 28, 10)
    py = PySeedCNN()
    copy_seed_weights(cpp, py)
    x = Tensor(rng.normal(size=(8, 1, 28, 28)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, 8))
    loss = nn.CrossEntropyLoss()
    results = []
    for net in (cpp, py):
        fn = lambda data, label, net=net: loss(net(data), label)
        value, grads = zenith.value_and_grad(fn, None, net.trainable_params())(x, y)
        results.append((value.item(), [g.asnumpy() for g in grads]))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    assert len(results[0][1]) == len(results[1][1]) == 4  # convs without bias (MindSpore)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_python_cell_trained_by_model_follows_the_cpp_cell(rng):
    """One Model.train run of each (the C++ loop calling construct()) gives the same weights."""
    import zenith.dataset as ds
    images = rng.normal(size=(64, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, 64)
    weights = []
    for make in (lambda: models.seed_cnn(1, 28, 10), PySeedCNN):
        zenith.set_seed(1)
        ref = models.seed_cnn(1, 28, 10)
        net = make()
        if isinstance(net, PySeedCNN):
            copy_seed_weights(ref, net)
        else:
            zenith.load_param_into_net(net, ref.parameters_dict())
        data = ds.NumpySlicesDataset((images, labels), ["image", "label"], shuffle=False).batch(16)
        model = zenith.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                             nn.Momentum(net.trainable_params(), 0.05, 0.9))
        model.train(2, data)
        weights.append([p.asnumpy().copy() for p in net.trainable_params()])
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


class Scaled(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(3, 2)
        self.scale = Parameter(Tensor(np.array([2.0], np.float32)))
        self.frozen = Parameter(Tensor(np.array([1.0], np.float32)), requires_grad=False)
        self.note = "not registered"

    def construct(self, x):
        return self.dense(x) * self.scale + self.frozen


def test_attributes_register_parameters_and_cells():
    net = Scaled()
    names = [n for n, _ in net.parameters_and_names()]
    assert names == ["scale", "frozen", "dense.weight", "dense.bias"]  # own first, as MindSpore
    assert [p.name for p in net.trainable_params()] == ["scale", "dense.weight", "dense.bias"]
    assert [p.name for p in net.untrainable_params()] == ["frozen"]
    assert net.scale.name == "scale"
    assert list(net.parameters_dict()) == names
    assert [p.name for p in net.get_parameters(expand=False)] == ["scale", "frozen"]
    assert [p.name for p in net.trainable_params(recurse=False)] == ["scale"]
    assert net.num_parameters() == 3 * 2 + 2 + 1 + 1
    assert net.num_parameters(trainable_only=True) == 9
    assert list(net.name_cells()) == ["dense"] and net.cells()[0] is net.dense
    assert [n for n, _ in net.cells_and_names()] == ["", "dense"]
    assert list(net.state_dict()) == sorted(names)
    # reassigning replaces in place; None removes
    net.scale = Parameter(Tensor(np.array([3.0], np.float32)))
    assert [n for n, _ in net.parameters_and_names()][0] == "scale"
    assert net.parameters_dict()["scale"].asnumpy()[0] == 3.0
    net.frozen = None
    assert "frozen" not in net.parameters_dict()
    del net.dense
    assert list(net.name_cells()) == []
    net.insert_child_to_cell("head", nn.Dense(3, 1))
    assert "head.weight" in net.parameters_dict()


def test_parameters_are_shared_not_copied():
    net = Scaled()
    p = net.parameters_dict()["scale"]
    p.set_data(Tensor(np.array([5.0], np.float32)))
    assert net.scale.asnumpy()[0] == 5.0
    w = net.dense.weight
    assert w.name == "weight" and w._same(net.parameters_dict()["dense.weight"])


def test_forward_and_train_mode_propagate():
    net = nn.SequentialCell([nn.Dense(4, 4), nn.Dropout(p=0.9)])
    x = Tensor(np.ones((16, 4), np.float32))
    assert net.training
    net.set_train(False)
    assert not net.training and not net[1].training
    np.testing.assert_allclose(net(x).asnumpy(), net[0](x).asnumpy())
    assert net.set_train() is net and net[1].training


def test_python_cells_inside_a_sequential_cell_are_called_from_cpp():
    class Double(nn.Cell):
        def construct(self, x):
            return x * 2

    seq = nn.SequentialCell(nn.Dense(2, 2, weight_init="ones", bias_init="zeros"), Double())
    out = seq(Tensor(np.array([[1.0, 2.0]], np.float32)))
    np.testing.assert_allclose(out.asnumpy(), [[6.0, 6.0]])
    gc.collect()  # the Python cell stays alive while the sequence holds it
    np.testing.assert_allclose(seq(Tensor(np.array([[1.0, 1.0]], np.float32))).asnumpy(),
                               [[4.0, 4.0]])
    assert len(seq) == 2 and isinstance(seq[1], Double) and [type(c) for c in seq][0] is nn.Dense
    seq.append(nn.ReLU())
    assert len(seq) == 3 and isinstance(seq[1:], nn.SequentialCell) and len(seq[1:]) == 2
    assert "Double" in repr(seq)
    with pytest.raises(TypeError):
        seq.append(3)
    with pytest.raises(TypeError):
        nn.SequentialCell([nn.ReLU(), "relu"])


def test_cell_list():
    layers = nn.CellList([nn.Dense(2, 2), nn.Dense(2, 2)])
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    assert len(layers) == 4 and isinstance(layers[2], nn.ReLU)
    assert [type(c).__name__ for c in layers] == ["Dense", "Dense", "ReLU", "Tanh"]
    assert "0.weight" in layers.parameters_dict()
    with pytest.raises(NotImplementedError):
        layers(Tensor([1.0]))
    with pytest.raises(TypeError):
        layers.append("x")


def test_builtin_layers_against_ops(rng):
    x = Tensor(rng.normal(size=(2, 3, 8, 8)).astype(np.float32))
    conv = nn.Conv2d(3, 4, 3, stride=2, pad_mode="pad", padding=1, has_bias=True)
    assert conv.weight.shape == (4, 3, 3, 3) and conv.bias.shape == (4,)
    assert conv.in_channels == 3 and conv.kernel_size == (3, 3) and conv.pad_mode == "pad"
    np.testing.assert_allclose(
        conv(x).asnumpy(),
        ops.conv2d(x, conv.weight, conv.bias, 2, "pad", 1).asnumpy(), rtol=1e-5, atol=1e-6)
    assert nn.Conv2d(3, 4, (3, 3)).weight.shape == (4, 3, 3, 3)
    assert nn.Conv2d(3, 4, 3)(x).shape == (2, 4, 8, 8)  # MindSpore's default pad_mode 'same'
    assert nn.Conv2d(3, 4, 3, pad_mode="valid")(x).shape == (2, 4, 6, 6)
    assert nn.Conv2d(2, 4, 3, group=2).weight.shape == (4, 1, 3, 3)
    assert "bias" not in nn.Conv2d(3, 4, 1).parameters_dict()
    d = nn.Dense(5, 3)
    v = Tensor(rng.normal(size=(4, 5)).astype(np.float32))
    np.testing.assert_allclose(d(v).asnumpy(), ops.dense(v, d.weight, d.bias).asnumpy(),
                               rtol=1e-6)
    assert nn.Dense(5, 3, has_bias=False).parameters_dict().keys() == {"weight"}
    assert nn.MaxPool2d(2, 2)(x).shape == (2, 3, 4, 4)
    assert nn.MaxPool2d(2)(x).shape == (2, 3, 7, 7)  # MindSpore: stride 1 by default
    assert nn.MaxPool2d(3, 1, pad_mode="pad", padding=1)(x).shape == (2, 3, 8, 8)
    np.testing.assert_allclose(nn.AvgPool2d(2, 2)(x).asnumpy(),
                               ops.avg_pool2d(x, 2, 2).asnumpy(), rtol=1e-6)
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 3, 1, 1)
    for layer, ref in [(nn.ReLU(), ops.relu), (nn.SiLU(), ops.silu), (nn.Sigmoid(), ops.sigmoid),
                       (nn.Tanh(), ops.tanh), (nn.GELU(), lambda t: ops.gelu(t, "tanh")),
                       (nn.GELU(approximate=False), ops.gelu)]:
        np.testing.assert_allclose(layer(x).asnumpy(), ref(x).asnumpy(), rtol=1e-6, atol=1e-7)
    assert nn.Flatten()(x).shape == (2, 192)
    ln = nn.LayerNorm((8,))
    np.testing.assert_allclose(ln(x).asnumpy(), ops.layer_norm(x, (8,), eps=1e-7).asnumpy(),
                               rtol=1e-5, atol=1e-6)
    assert ln.epsilon == 1e-7 and ln.normalized_shape == (8,)
    rms = nn.RMSNorm(8)
    np.testing.assert_allclose(rms(x).asnumpy(), ops.rms_norm(x).asnumpy(), rtol=1e-5)
    emb = nn.Embedding(10, 4)
    idx = Tensor(np.array([[1, 9], [0, 0]]))
    np.testing.assert_allclose(emb(idx).asnumpy(), emb.weight.asnumpy()[idx.asnumpy()])
    assert emb.vocab_size == 10


def test_batch_norm_uses_mindspores_momentum(rng):
    bn = nn.BatchNorm2d(3)
    x = Tensor(rng.normal(size=(4, 3, 5, 5)).astype(np.float32))
    bn(x)
    np.testing.assert_allclose(bn.running_mean.asnumpy(), 0.1 * x.asnumpy().mean((0, 2, 3)),
                               rtol=1e-5, atol=1e-7)
    assert [n for n, _ in bn.parameters_and_names()] == ["weight", "bias"]
    assert set(bn.state_dict()) == {"weight", "bias", "running_mean", "running_var",
                                    "num_batches_tracked"}
    bn.set_train(False)
    y = bn(x).asnumpy()
    mean, var = bn.running_mean.asnumpy(), bn.running_var.asnumpy()
    np.testing.assert_allclose(
        y, (x.asnumpy() - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5),
        rtol=1e-4, atol=1e-5)
    assert nn.BatchNorm2d(3, gamma_init=2.0).weight.asnumpy().tolist() == [2.0, 2.0, 2.0]
    assert nn.BatchNorm2d(3, beta_init="ones").bias.asnumpy().sum() == 3.0


def test_dropout_arguments():
    assert nn.Dropout().p == 0.5 and nn.Dropout(keep_prob=0.8).p == pytest.approx(0.2)
    assert nn.Dropout(p=0.1).p == 0.1
    with pytest.raises(ValueError):
        nn.Dropout(keep_prob=0.5, p=0.5)
    with pytest.raises(ValueError):
        nn.Dropout(p=1.0)


@pytest.mark.parametrize("init,check", [
    ("zeros", lambda w: np.all(w == 0)), ("ones", lambda w: np.all(w == 1)),
    ("normal", lambda w: 0.005 < w.std() < 0.02), ("uniform", lambda w: np.abs(w).max() <= 0.07),
    ("xavier_uniform", lambda w: np.abs(w).max() <= np.sqrt(6 / (64 + 32))),
    ("he_uniform", lambda w: np.abs(w).max() <= np.sqrt(6 / 64)),
    ("he_normal", lambda w: 0.1 < w.std() < 0.25), (0.5, lambda w: np.all(w == 0.5))])
def test_weight_init(init, check):
    w = nn.Dense(64, 32, weight_init=init).weight.asnumpy()
    assert check(w), init


def test_weight_init_from_tensor_and_errors():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(nn.Dense(3, 2, weight_init=Tensor(w)).weight.asnumpy(), w)
    with pytest.raises(ValueError, match="shape"):
        nn.Dense(3, 2, weight_init=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="unknown initializer"):
        nn.Dense(3, 2, weight_init="orthogonal")
    with pytest.raises(ValueError, match="activation"):
        nn.Dense(3, 2, activation="relu")
    with pytest.raises(ValueError):
        nn.Conv2d(3, 4, (3, 5))
    with pytest.raises(ValueError):
        nn.MaxPool2d(2, pad_mode="same")
    with pytest.raises(ValueError):
        nn.Flatten(start_dim=0)
    with pytest.raises(zenith.Error, match=r"\[Conv2d\]"):
        nn.Conv2d(3, 4, 3, pad_mode="reflect")


def test_losses(rng):
    logits = Tensor(rng.normal(size=(4, 5)).astype(np.float32))
    labels = Tensor(np.array([0, 4, 2, 1]))
    per_sample = nn.SoftmaxCrossEntropyWithLogits(sparse=True)(logits, labels)
    assert per_sample.shape == (4,)  # MindSpore's default reduction 'none'
    mean = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")(logits, labels)
    assert mean.item() == pytest.approx(per_sample.asnumpy().mean(), rel=1e-6)
    dense_labels = Tensor(np.eye(5, dtype=np.float32)[[0, 4, 2, 1]])
    assert nn.SoftmaxCrossEntropyWithLogits(reduction="sum")(logits, dense_labels).item() == \
        pytest.approx(per_sample.asnumpy().sum(), rel=1e-5)
    ce = nn.CrossEntropyLoss()
    assert ce(logits, labels).item() == pytest.approx(mean.item(), rel=1e-6)
    assert ce(logits, dense_labels).item() == pytest.approx(mean.item(), rel=1e-5)
    smooth = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=4)(logits, labels)
    assert smooth.item() == pytest.approx(
        ops.cross_entropy(logits, labels, ignore_index=4, label_smoothing=0.1).item())
    a, b = Tensor(np.array([1.0, 2.0], np.float32)), Tensor(np.array([0.0, 0.0], np.float32))
    assert nn.MSELoss()(a, b).item() == 2.5 and nn.MSELoss("sum")(a, b).item() == 5.0
    with pytest.raises(ValueError):
        nn.MSELoss("avg")
    with pytest.raises(ValueError):
        nn.CrossEntropyLoss(weight=Tensor([1.0]))
    with pytest.raises(zenith.Error, match="sparse"):
        nn.SoftmaxCrossEntropyWithLogits()(logits, labels)

    class L1(nn.LossBase):
        def construct(self, x, y):
            return self.get_loss(ops.abs(x - y))

    assert L1()(a, b).item() == 1.5 and L1("sum")(a, b).item() == 3.0
    assert L1("none")(a, b, ).shape == (2,)
    assert nn.LossBase().get_loss(a, weights=Tensor([1.0, 0.0])).item() == 0.5


def test_with_loss_cell():
    net = nn.Dense(2, 1, weight_init="ones", bias_init="zeros")
    wl = nn.WithLossCell(net, nn.MSELoss())
    assert wl.backbone_network is net
    assert wl(Tensor(np.array([[1.0, 1.0]], np.float32)), Tensor([[0.0]])).item() == 4.0
    assert "backbone.weight" in wl.parameters_dict()


def test_to_float_and_repr():
    net = Scaled()
    net.to_float(zenith.float64)
    assert net.dense.weight.dtype == zenith.float64
    assert net(Tensor(np.ones((1, 3)))).dtype == zenith.float64
    text = repr(nn.SequentialCell([nn.Conv2d(1, 2, 3), nn.ReLU()]))
    assert "SequentialCell<" in text and "Conv2d<input_channels=1, output_channels=2" in text
    assert nn.Cell().set_grad() is not None

    class WithRepr(nn.Cell):
        def extend_repr(self):
            return "size=3"

        def construct(self, x):
            return x

    assert repr(WithRepr()) == "WithRepr<size=3>"


def test_model_zoo_cells_get_python_classes():
    net = models.seed_cnn(1, 28, 10)
    assert isinstance(net, nn.SequentialCell) and len(net) == 8
    assert isinstance(net[0], nn.Conv2d) and isinstance(net[7], nn.Dense)
    assert net[0].weight.shape == (32, 1, 3, 3)
    assert "seedcnn" in models.names()
    assert isinstance(models.create("lenet", 1, 28, 10), nn.Cell)
    assert models.lenet5()(Tensor(np.zeros((1, 1, 28, 28), np.float32))).shape == (1, 10)
    resnet = models.resnet18(3, 10)
    blocks = [type(c).__name__ for _, c in resnet.cells_and_names()]
    assert "Conv2d" in blocks and len(resnet.trainable_params()) == 62


def test_help_shows_mindspore_signature():
    import inspect
    assert "pad_mode='same'" in str(inspect.signature(nn.Conv2d))
    assert "in_channels" in nn.Conv2d.__doc__


def test_cell_misuse_raises():
    class NoSuperInit(nn.Cell):  # tolerated: the C++ cell is made before __init__ runs
        def __init__(self):
            self.dense = nn.Dense(2, 2)

        def construct(self, x):
            return self.dense(x)

    assert list(NoSuperInit().parameters_dict()) == ["dense.weight", "dense.bias"]

    class NoConstruct(nn.Cell):
        pass

    with pytest.raises(NotImplementedError):
        NoConstruct()(Tensor([1.0]))
    with pytest.raises(TypeError, match="built-in layer"):
        nn.Dense(2, 2).extra = Parameter(Tensor([1.0]))

    class ReturnsTuple(nn.Cell):
        def construct(self, x):
            return x, x

    seq = nn.SequentialCell([ReturnsTuple()])
    with pytest.raises(TypeError, match="zenith.Tensor"):
        seq(Tensor([1.0]))

    class Raises(nn.Cell):
        def construct(self, x):
            raise KeyError("inside construct")

    with pytest.raises(KeyError, match="inside construct"):
        nn.SequentialCell([Raises()])(Tensor([1.0]))
