"""LossMonitor and TimeMonitor print exactly MindSpore 2's lines (mindspore.train's
_loss_monitor.py and _time_monitor.py formats), and nothing else."""

import re

import numpy as np
import pytest

import zenith
from zenith import nn
import zenith.dataset as ds
from zenith.train import LossMonitor, Model, TimeMonitor

LOSS_LINE = re.compile(r"epoch: (\d+) step: (\d+), loss is (\S+)")
TIME_LINE = re.compile(r"Train epoch time: (\d+\.\d{3}) ms, per step time: (\d+\.\d{3}) ms")


def _data(n=24, batch=4):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.integers(0, 3, n).astype(np.int32)
    return ds.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(batch)


def _model():
    zenith.set_seed(0)
    net = nn.Dense(6, 3)
    return Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                 nn.SGD(net.trainable_params(), 0.1), metrics={"accuracy"})


def test_loss_and_time_lines_are_mindspores_and_nothing_else(capfd):
    losses = []

    class Record(zenith.train.Callback):
        def on_train_step_end(self, run_context):
            losses.append(run_context.original_args().net_outputs.asnumpy().item())

    _model().train(2, _data(), callbacks=[LossMonitor(4), TimeMonitor(), Record()])
    lines = capfd.readouterr().out.splitlines()
    # 6 steps an epoch, printed when 4 steps have passed since the last print (MindSpore's
    # rule over the run's step count): steps 4, 8 (epoch 2 step 2) and 12 (epoch 2 step 6).
    loss_lines = [LOSS_LINE.fullmatch(line) for line in lines if line.startswith("epoch")]
    assert all(loss_lines), lines
    assert [(int(m[1]), int(m[2])) for m in loss_lines] == [(1, 4), (2, 2), (2, 6)]
    # the loss as MindSpore prints it: float() of the float32 loss, in full
    for m, step in zip(loss_lines, (4, 8, 12)):
        assert m[3] == str(float(np.float32(losses[step - 1])))
    times = [TIME_LINE.fullmatch(line) for line in lines if "epoch time" in line]
    assert len(times) == 2 and all(times), lines
    for m in times:
        assert float(m[2]) == pytest.approx(float(m[1]) / 6, abs=1e-3)
    assert len(lines) == 5, lines  # three loss lines, two time lines: no zenith extras


def test_per_print_times_zero_prints_nothing_and_negative_is_refused(capfd):
    _model().train(1, _data(), callbacks=[LossMonitor(0)])
    assert capfd.readouterr().out == ""
    with pytest.raises(ValueError, match="per_print_times"):
        LossMonitor(-1)


def test_fit_prints_the_eval_result_line(capfd):
    _model().fit(1, _data(), _data(8), callbacks=[LossMonitor(6)])
    lines = capfd.readouterr().out.splitlines()
    assert LOSS_LINE.fullmatch(lines[0]) and lines[0].startswith("epoch: 1 step: 6, ")
    assert re.fullmatch(r"Eval result: epoch 1, metrics: \{'accuracy': [0-9.]+\}", lines[1])
    assert len(lines) == 2, lines

