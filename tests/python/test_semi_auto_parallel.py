"""MindSpore's semi-auto parallel from Python: a Dense stack whose MatMuls carry shard strategies
(column-parallel, row-parallel, column-parallel again) trains on two ranks with the losses and
outputs of one process, by value_and_grad and through Model; other strategies and layouts are refused naming them."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zenith
from ranks import result, run_ranks
from zenith import nn

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import zenith
    from zenith import Tensor, nn

    shard = sys.argv[1] == "shard"
    if shard:
        zenith.communication.init()
        zenith.set_auto_parallel_context(
            parallel_mode=zenith.ParallelMode.SEMI_AUTO_PARALLEL, device_num=2)


    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Dense(8, 16), nn.Dense(16, 12), nn.Dense(12, 6)
            self.relu = nn.ReLU()
            if shard:
                self.fc1.matmul.shard(((1, 1), (2, 1)))  # outputs split
                self.fc2.matmul.shard(((1, 2), (1, 2)))  # inputs split, partial sums reduced
                self.fc3.matmul.shard(((1, 1), (2, 1)))

        def construct(self, x):
            return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


    zenith.set_seed(3)  # the same initial weights on every rank and in the reference
    net = Net()
    rng = np.random.default_rng(0)
    x = Tensor(rng.normal(size=(10, 8)).astype(np.float32))
    y = Tensor(rng.normal(size=(10, 6)).astype(np.float32))
    loss_fn = nn.MSELoss()
    opt = nn.SGD(net.trainable_params(), 0.2)
    grad_fn = zenith.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)
    losses = []
    for _ in range(6):
        loss, grads = grad_fn(x, y)
        opt(grads)
        losses.append(loss.item())
    out = {"losses": losses, "output": net(x).asnumpy().tolist(),
           "fc1_rows": list(net.fc1.weight.shape), "fc2_cols": list(net.fc2.weight.shape)}

    # Through Model, as MindSpore's semi-auto examples train: every rank the whole batch.
    import zenith.dataset as ds
    net = Net()
    data = ds.NumpySlicesDataset((x.asnumpy(), y.asnumpy()), ["x", "y"], shuffle=False).batch(5)
    model = zenith.Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.1, 0.9),
                         metrics={"loss"})
    model.train(2, data)
    out["model_loss"] = model.eval(data)["loss"]
    if shard:
        out["rank"] = zenith.communication.get_rank()
        zenith.communication.release()
    print("RESULT " + json.dumps(out), flush=True)
""")


def test_dense_stack_on_two_ranks_equals_one_process(python_env, tmp_path):
    script = tmp_path / "net.py"
    script.write_text(SCRIPT)
    env = dict(python_env, ZENITH_NUM_THREADS="1")
    one = subprocess.run([sys.executable, str(script), "one"], env=env, text=True,
                         capture_output=True, timeout=300)
    assert one.returncode == 0, one.stderr + one.stdout
    ref = result(one.stdout)
    ranks = run_ranks(env, script, ["shard"])
    assert ref["losses"][-1] < ref["losses"][0]  # it trains
    for r in ranks:
        assert r["fc1_rows"] == [8, 8] and r["fc2_cols"] == [12, 8]  # each rank holds half
        np.testing.assert_allclose(r["losses"], ref["losses"], rtol=1e-5)
        np.testing.assert_allclose(r["output"], ref["output"], rtol=1e-4, atol=1e-6)
        assert r["model_loss"] == pytest.approx(ref["model_loss"], rel=1e-5)


def test_other_strategies_and_layouts_are_refused():
    net = nn.Dense(4, 4)
    net.matmul.shard(((2, 1), (1, 1)))  # outside semi-auto parallel: kept, not applied
    assert net.weight.shape == (4, 4)
    assert zenith.ops.MatMul().shard(((2, 1), (1, 1))).in_strategy == ((2, 1), (1, 1))
    zenith.set_auto_parallel_context(parallel_mode=zenith.ParallelMode.SEMI_AUTO_PARALLEL)
    try:
        with pytest.raises(ValueError, match="communication.init"):
            nn.Dense(4, 4).matmul.shard(((1, 1), (2, 1)))
        dense = nn.Dense(4, 4)
        nn.SequentialCell(dense, nn.ReLU())
        with pytest.raises(zenith.UnsupportedError, match="SequentialCell"):
            dense.matmul.shard(((1, 1), (2, 1)))
        with pytest.raises(ValueError, match="two tuples"):
            nn.Dense(4, 4).matmul.shard("data")
        with pytest.raises(zenith.UnsupportedError, match="out_strategy"):
            nn.Dense(4, 4).matmul.shard(((1, 1), (1, 1)), ((1, 1),))
        with pytest.raises(zenith.UnsupportedError, match=r"MatMul\(\)\.shard\(\(\(2, 1\)"):
            zenith.ops.MatMul().shard(((2, 1), (1, 1)))
    finally:
        zenith.reset_auto_parallel_context()


def test_unsupported_strategy_names_itself(python_env, tmp_path):
    """A split batch (data parallel inside one MatMul) on the job's two ranks."""
    script = tmp_path / "refuse.py"
    script.write_text(textwrap.dedent("""
        import zenith
        from zenith import nn
        zenith.communication.init()
        zenith.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=2)
        for s in (((2, 1), (1, 1)), ((1, 2), (2, 2)), ((1, 1), (4, 1))):
            try:
                nn.Dense(4, 4).matmul.shard(s)
            except zenith.UnsupportedError as e:
                assert str(s) in str(e), e
                print("REFUSED", s, flush=True)
        zenith.set_auto_parallel_context(device_num=4)
        try:
            nn.Dense(4, 4).matmul.shard(((1, 1), (2, 1)))
        except ValueError as e:
            assert "device_num=4" in str(e) and "2 ranks" in str(e), e
            print("REFUSED device_num", flush=True)
        zenith.communication.release()
    """))
    for stdout in run_ranks(python_env, script, timeout=120, raw=True):
        assert stdout.count("REFUSED") == 4, stdout
