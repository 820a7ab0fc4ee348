"""GRAPH_MODE from Python: Model.train and value_and_grad's functions run through src/graph
(capture once per input signature, then replay), equal to PYNATIVE_MODE; a construct with
data-dependent control flow runs eagerly with its reason logged."""

import numpy as np
import pytest

import zenith
import zenith.dataset as ds
from zenith import nn, ops

STEPS = 20


@pytest.fixture
def graph_mode():
    yield lambda mode: zenith.set_context(mode=mode)
    zenith.set_context(mode=zenith.PYNATIVE_MODE)


def batches(n=STEPS, batch=16):
    rng = np.random.default_rng(3)
    return [(rng.standard_normal((batch, 1, 28, 28)).astype(np.float32),
             rng.integers(0, 10, batch).astype(np.int32)) for _ in range(n)]


def functional_run(mode, graph_mode, net_fn=None):
    """MindSpore 2's functional loop (value_and_grad + optimizer(grads)) for STEPS steps."""
    graph_mode(mode)
    zenith.set_seed(0)
    net = net_fn() if net_fn else zenith.models.seed_cnn(1, 28, 10)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.Momentum(net.trainable_params(), 0.01, 0.9)

    def forward_fn(data, label):
        logits = net(data)
        return loss_fn(logits, label), logits

    grad_fn = zenith.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)
    losses = []
    for data, label in batches():
        (loss, logits), grads = grad_fn(zenith.Tensor(data), zenith.Tensor(label))
        optimizer(grads)
        assert logits.shape == (16, 10)
        losses.append(loss)  # kept across steps: a replay's outputs are not reused
    compiler = grad_fn._graph._compiler
    if mode == zenith.GRAPH_MODE:
        stats = (compiler.captures, compiler.replays, compiler.eager_steps)
        # a failed capture is the first step; the others run eagerly
        expected = (1, 0, STEPS - 1) if compiler.fallback_reason else (1, STEPS - 1, 0)
        assert stats == expected, stats
    else:
        assert compiler is None
    return [float(l.asnumpy()) for l in losses], {n: p.asnumpy().copy()
                                                  for n, p in net.parameters_and_names()}


def test_value_and_grad_loop_in_graph_mode_equals_pynative(graph_mode, capsys):
    eager_losses, eager_params = functional_run(zenith.PYNATIVE_MODE, graph_mode)
    assert "graph:" not in capsys.readouterr().out
    graph_losses, graph_params = functional_run(zenith.GRAPH_MODE, graph_mode)
    log = capsys.readouterr().out
    assert log.count("after fusion") == 1, log  # one capture, then 19 replays
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5, atol=1e-5)
    assert eager_losses[-1] < eager_losses[0]
    for name, value in eager_params.items():
        np.testing.assert_allclose(graph_params[name], value, rtol=1e-5, atol=1e-5,
                                   err_msg=name)


def test_model_train_in_graph_mode_equals_pynative(graph_mode, capfd):
    def train(mode):
        graph_mode(mode)
        zenith.set_seed(0)
        net = zenith.models.seed_cnn(1, 28, 10)
        data = batches()
        images = np.concatenate([d for d, _ in data])
        labels = np.concatenate([l for _, l in data])
        dataset = ds.NumpySlicesDataset((images, labels), column_names=["image", "label"],
                                        shuffle=False).batch(16)
        model = zenith.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True,
                                                                   reduction="mean"),
                             nn.Momentum(net.trainable_params(), 0.01, 0.9))
        model.train(1, dataset)
        return {n: p.asnumpy().copy() for n, p in net.parameters_and_names()}

    eager = train(zenith.PYNATIVE_MODE)
    graph = train(zenith.GRAPH_MODE)
    out = capfd.readouterr().out
    assert "after fusion" in out, out
    for name, value in eager.items():
        np.testing.assert_allclose(graph[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


class DataDependent(nn.Cell):
    """A construct whose control flow depends on a value: graph capture cannot express it."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(784, 10)

    def construct(self, x):
        y = self.dense(ops.reshape(x, (x.shape[0], -1)))
        if float(ops.sum(y).asnumpy()) > 0:
            return y * 2.0
        return y


def test_data_dependent_control_flow_falls_back_with_its_reason(graph_mode, capsys):
    eager_losses, eager_params = functional_run(zenith.PYNATIVE_MODE, graph_mode, DataDependent)
    graph_losses, graph_params = functional_run(zenith.GRAPH_MODE, graph_mode, DataDependent)
    log = capsys.readouterr().out
    assert "runs eagerly" in log and "read on the host" in log, log
    assert log.count("\n") <= 3, log  # the reason is logged once, not every step
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-6)
    for name, value in eager_params.items():
        np.testing.assert_allclose(graph_params[name], value, rtol=1e-6, err_msg=name)


def test_train_and_eval_modes_are_separate_graphs(graph_mode):
    graph_mode(zenith.GRAPH_MODE)
    zenith.set_seed(0)
    net = nn.SequentialCell([nn.Dense(4, 4), nn.Dropout(p=0.5)])
    x = zenith.Tensor(np.ones((2, 4), np.float32))
    grad_fn = zenith.value_and_grad(lambda v: ops.sum(net(v)), None, net.trainable_params())
    net.set_train(True)
    grad_fn(x)
    grad_fn(x)
    net.set_train(False)  # no dropout: a graph of its own, not the training one replayed
    evaluated = [float(grad_fn(x)[0].asnumpy()) for _ in range(2)]
    compiler = grad_fn._graph._compiler
    assert (compiler.captures, compiler.replays) == (2, 2)
    graph_mode(zenith.PYNATIVE_MODE)
    expected = float(ops.sum(net(x)).asnumpy())
    assert evaluated == pytest.approx([expected, expected], rel=1e-6)
