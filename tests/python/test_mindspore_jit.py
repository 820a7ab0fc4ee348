"""zenith.jit maps onto graph mode (src/graph) in PYNATIVE_MODE and GRAPH_MODE: a jit function or
jit construct is captured once per input signature and replayed without entering Python, equal
to eager; what a replay would get wrong (host reads of tensor values, optimizer calls, autograd
through it) runs eagerly with one log line."""

import numpy as np
import pytest

import zenith
from zenith import nn, ops

STEPS = 6


@pytest.fixture(params=["pynative", "graph"])
def mode(request):
    zenith.set_context(mode=zenith.GRAPH_MODE if request.param == "graph"
                       else zenith.PYNATIVE_MODE)
    yield request.param
    zenith.set_context(mode=zenith.PYNATIVE_MODE)


def data(n=STEPS, batch=5, features=4, seed=0):
    rng = np.random.default_rng(seed)
    return [(zenith.Tensor(rng.standard_normal((batch, features)).astype(np.float32)),
             zenith.Tensor(rng.integers(0, 3, batch).astype(np.int32))) for _ in range(n)]


def make_net():
    zenith.set_seed(0)
    return nn.SequentialCell(nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3))


def test_jit_function_replays_without_entering_python_and_equals_eager(mode, capsys):
    net = make_net()
    calls = []

    def forward(x, scale):
        calls.append(1)
        return ops.relu(net(x)) * scale, net(x).sum()

    jitted = zenith.jit(forward)
    for x, _ in data():
        got = jitted(x, 2.0)
        want = forward(x, 2.0)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-6, atol=1e-6)
    # one capture, five replays: the Python function ran once under jit, six times eagerly
    assert len(calls) == 1 + STEPS
    assert jitted._jit.calls == 1
    step = jitted._jit._compiler
    assert (step.captures, step.replays, step.eager_steps) == (1, STEPS - 1, 0)
    assert capsys.readouterr().out.count("after fusion") == 1
    # a new input shape, and a new plain argument, capture again
    x7 = zenith.Tensor(np.ones((7, 4), np.float32))
    np.testing.assert_allclose(jitted(x7, 2.0)[0].asnumpy(), forward(x7, 2.0)[0].asnumpy(),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(jitted(x7, 3.0)[0].asnumpy(), forward(x7, 3.0)[0].asnumpy(),
                               rtol=1e-6, atol=1e-6)
    assert step.captures == 3 and jitted._jit.calls == 3
    # the replay reads the weights as they are now
    net[0].weight.set_data(net[0].weight * 0.5)
    np.testing.assert_allclose(jitted(x7, 3.0)[0].asnumpy(), forward(x7, 3.0)[0].asnumpy(),
                               rtol=1e-6, atol=1e-6)
    assert step.replays == STEPS and jitted._jit.calls == 3
    # a parameter that takes a new shape: captured anew over it
    net[2].weight.set_data(zenith.Tensor(np.ones((2, 8), np.float32)))
    net[2].bias.set_data(zenith.Tensor(np.ones((2,), np.float32)))
    got = jitted(x7, 3.0)[0].asnumpy()
    assert got.shape == (7, 2)
    np.testing.assert_allclose(got, forward(x7, 3.0)[0].asnumpy(), rtol=1e-6, atol=1e-6)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(4, 3)

    @zenith.jit
    def construct(self, x):
        return ops.relu(self.dense(x)) * 2.0


def test_jit_construct_is_one_graph_per_cell(mode):
    zenith.set_seed(0)
    a, b = Net(), Net()
    b.dense.weight.set_data(a.dense.weight * -1.0)
    for x, _ in data():
        for net in (a, b):
            want = ops.relu(net.dense(x)) * 2.0
            np.testing.assert_allclose(net(x).asnumpy(), want.asnumpy(), rtol=1e-6, atol=1e-6)
    for net in (a, b):
        step = Net.construct._jit[net]
        assert step.calls == 1 and step._compiler.replays == STEPS - 1


def test_data_dependent_function_runs_eagerly_with_a_log_line(mode, capsys):
    net = make_net()

    def branch(x):
        if x.sum() > 0:
            return net(x) * 2.0
        return net(x) * -1.0

    jitted = zenith.jit(branch)
    for i, (x, _) in enumerate(data()):
        x = x.abs() * (1.0 if i % 2 else -1.0)
        np.testing.assert_allclose(jitted(x).asnumpy(), branch(x).asnumpy(), rtol=1e-6,
                                   atol=1e-6)
    assert jitted._jit.calls == STEPS  # every call entered Python
    log = capsys.readouterr().out
    assert log.count("runs eagerly") == 1 and "read on the host" in log, log


def train(jit, mode):
    net = make_net()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.Momentum(net.trainable_params(), 0.05, 0.9)

    def forward_fn(x, y):
        return loss_fn(net(x), y)

    grad_fn = zenith.value_and_grad(forward_fn, None, optimizer.parameters)

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        return loss

    step = zenith.jit(train_step) if jit else train_step
    x, y = data(1, seed=1)[0]
    losses = [float(step(x, y).asnumpy()) for _ in range(STEPS)]
    return losses, [p.asnumpy().copy() for p in net.trainable_params()], step


def test_train_step_with_optimizer_runs_eagerly_and_trains_as_eager(mode, capsys):
    eager_losses, eager_params, _ = train(False, mode)
    capsys.readouterr()
    losses, params, step = train(True, mode)
    log = capsys.readouterr().out
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6, atol=1e-6)
    for p, w in zip(params, eager_params):
        np.testing.assert_allclose(p, w, rtol=1e-6, atol=1e-6)
    assert eager_losses[-1] < eager_losses[0]
    assert step._jit.calls == STEPS
    assert log.count("runs eagerly") == 1, log


def test_jit_forward_inside_value_and_grad_keeps_the_tape(mode):
    net = make_net()
    jitted = zenith.jit(lambda x: net(x))
    x, y = data()[0]
    jitted(x)  # captured
    loss_fn = nn.CrossEntropyLoss()
    grads = zenith.grad(lambda a, b: loss_fn(jitted(a), b), None, net.trainable_params())(x, y)
    want = zenith.grad(lambda a, b: loss_fn(net(a), b), None, net.trainable_params())(x, y)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-6, atol=1e-6)
    assert float(np.abs(grads[0].asnumpy()).sum()) > 0


def test_jit_construct_trains_under_model_as_eager_then_replays(mode, capsys):
    import zenith.dataset as ds
    rng = np.random.default_rng(0)
    images = rng.standard_normal((32, 4)).astype(np.float32)
    labels = rng.integers(0, 3, 32).astype(np.int32)

    def fit(net):
        dataset = ds.NumpySlicesDataset((images, labels), column_names=["x", "y"],
                                        shuffle=False).batch(8)
        model = zenith.Model(net, nn.CrossEntropyLoss(),
                             nn.Momentum(net.trainable_params(), 0.1, 0.9))
        model.train(2, dataset)
        return net.dense.weight.asnumpy().copy()

    class Plain(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(4, 3)

        def construct(self, x):
            return ops.relu(self.dense(x)) * 2.0

    zenith.set_seed(0)
    plain = Plain()
    zenith.set_seed(0)
    jitted = Net()
    np.testing.assert_allclose(fit(jitted), fit(plain), rtol=1e-6, atol=1e-6)
    step = Net.construct._jit[jitted]
    entered = step.calls  # Model's steps ran it as written, on the tape
    x = zenith.Tensor(images[:8])
    for _ in range(3):
        np.testing.assert_allclose(jitted(x).asnumpy(), plain(x).asnumpy(), rtol=1e-6,
                                   atol=1e-6)
    assert step.calls - entered == 1 and step._compiler.replays == 2  # captured, replayed


def test_jit_inside_jit_and_keyword_tensors(mode):
    net = make_net()
    inner = zenith.jit(lambda x: net(x) * 3.0)

    @zenith.jit
    def outer(x, *, bias):
        return inner(x) + bias

    for x, _ in data():
        bias = zenith.Tensor(np.full((5, 3), 0.5, np.float32))
        np.testing.assert_allclose(outer(x, bias=bias).asnumpy(),
                                   (net(x) * 3.0 + bias).asnumpy(), rtol=1e-6, atol=1e-6)
    assert outer._jit.calls == 1 and outer._jit._compiler.replays == STEPS - 1
    assert inner._jit.calls == 1 and inner._jit._compiler is None  # recorded into outer's graph
