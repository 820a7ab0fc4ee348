"""zenith.Profiler: MindSpore's Profiler over the C++ profiler, writing the Chrome trace of
`zenith train --profile` (ops and phases as "X" events, a memory counter)."""

import json
import os

import numpy as np
import pytest

import zenith
import zenith.dataset as ds
from zenith import nn


def seed_model():
    zenith.set_seed(0)
    net = zenith.models.seed_cnn(1, 28, 10)
    rng = np.random.default_rng(0)
    data = ds.NumpySlicesDataset((rng.standard_normal((96, 1, 28, 28)).astype(np.float32),
                                  rng.integers(0, 10, 96).astype(np.int32)),
                                 column_names=["image", "label"], shuffle=False).batch(16)
    model = zenith.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                         nn.Momentum(net.trainable_params(), 0.01, 0.9))
    return net, model, data


def trace_events(path):
    trace = json.load(open(os.path.join(path, "trace.json")))
    assert trace["displayTimeUnit"] == "ms"
    return trace["traceEvents"]


def test_profiler_around_model_train(tmp_path):
    net, model, data = seed_model()
    profiler = zenith.Profiler(output_path=tmp_path / "prof")
    model.train(1, data)
    profiler.analyse()
    events = trace_events(tmp_path / "prof")
    ops = [e for e in events if e["ph"] == "X" and e.get("cat") == "op"]
    names = {e["name"] for e in ops}
    assert {"conv2d", "relu"} <= names, names
    assert all(e["dur"] >= 0 and "ts" in e for e in ops)
    phases = {e["name"] for e in events if e["ph"] == "X" and e.get("cat") == "phase"}
    assert {"forward", "backward", "optimizer"} <= phases, phases
    assert any(e["ph"] == "C" for e in events)  # the memory counter
    summary = json.load(open(tmp_path / "prof" / "summary.json"))
    assert summary["steps"] == 6  # 96 samples in batches of 16
    assert "conv2d" in open(tmp_path / "prof" / "summary.txt").read()
    assert "conv2d" in profiler.summary()
    profiler.stop()  # idempotent


def test_profiler_step_window_as_a_callback(tmp_path):
    net, model, data = seed_model()
    profiler = zenith.Profiler(output_path=tmp_path / "window", start_step=2, profile_steps=3)
    model.train(1, data, callbacks=[profiler])
    profiler.analyse()  # written by the callback when the window closed
    summary = json.load(open(tmp_path / "window" / "summary.json"))
    assert summary["steps"] == 3
    steps = [e for e in trace_events(tmp_path / "window") if e.get("cat") == "step"]
    assert len(steps) == 3
    assert "conv2d" in profiler.summary()


def test_profiler_graph_mode_model_train_has_the_step_phases(tmp_path):
    """In GRAPH_MODE the profiled steps (4-6) are replays; each replayed phase is marked as its
    capture's, so the split has forward and backward time, not all "other"."""
    zenith.set_context(mode=zenith.GRAPH_MODE)
    try:
        net, model, data = seed_model()
        profiler = zenith.Profiler(output_path=tmp_path / "graph", start_step=3, profile_steps=3)
        model.train(1, data, callbacks=[profiler])
    finally:
        zenith.set_context(mode=zenith.PYNATIVE_MODE)
    profiler.analyse()
    events = trace_events(tmp_path / "graph")
    phases = [e["name"] for e in events if e["ph"] == "X" and e.get("cat") == "phase"]
    assert phases.count("forward") == 3 and phases.count("backward") == 3, phases
    summary = json.load(open(tmp_path / "graph" / "summary.json"))
    ms = {p["name"]: p["ms"] for p in summary["phases"]}
    assert ms["forward"] > 0 and ms["backward"] > 0, ms
    assert ms["other"] < ms["forward"] + ms["backward"], ms


def test_profiler_step_window_in_a_functional_loop(tmp_path):
    net = zenith.models.seed_cnn(1, 28, 10)
    optimizer = nn.SGD(net.trainable_params(), 0.01)
    loss_fn = nn.CrossEntropyLoss()
    grad_fn = zenith.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)
    x = zenith.Tensor(np.zeros((4, 1, 28, 28), np.float32))
    y = zenith.Tensor(np.zeros(4, np.int32))
    profiler = zenith.Profiler(output_path=str(tmp_path / "loop"), start_step=1, profile_steps=2)
    for _ in range(4):
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        profiler.step()
    convs = [e for e in trace_events(tmp_path / "loop") if e["name"] == "conv2d"]
    # conv2d's forward per step over 2 steps (its backward is recorded under its own names)
    assert len(convs) == 2 * 2, len(convs)


def test_profiler_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown option"):
        zenith.Profiler(output_path=tmp_path, profile_memroy=True)
    with pytest.raises(ValueError, match="profile_steps"):
        zenith.Profiler(output_path=tmp_path, profile_steps=0)
    first = zenith.Profiler(output_path=tmp_path / "a", profile_communication=True)
    with pytest.raises(RuntimeError, match="another Profiler"):
        zenith.Profiler(output_path=tmp_path / "b")
    first.stop()
    with pytest.raises(ValueError, match="step window"):
        net, model, data = seed_model()
        model.train(1, data, callbacks=[first])
    late = zenith.Profiler(output_path=tmp_path / "c", start_profile=False)
    with pytest.raises(RuntimeError, match="nothing was recorded"):
        late.analyse()
    late.start()
    late.analyse()
    assert os.path.exists(tmp_path / "c" / "trace.json")
