"""MindSpore's pipeline parallel from Python: an MLP whose cells carry pipeline_stage 0 and 1,
wrapped in nn.PipelineCell with 4 micro-batches, trains on two ranks (GPipe and 1F1B schedules)
with the losses and parameters of one process on the whole batch, 1F1B with fewer micro-batches
alive at once; layouts zenith does not run are refused naming them."""

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

    pipe = sys.argv[1] == "pipe"
    if pipe:
        zenith.communication.init()
    rng = np.random.default_rng(0)
    x = Tensor(rng.normal(size=(16, 8)).astype(np.float32))
    y = Tensor(rng.normal(size=(16, 4)).astype(np.float32))
    loss_fn = nn.MSELoss()


    def mlp():
        zenith.set_seed(5)  # the same initial weights on both ranks and in the reference
        return nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 12), nn.Tanh(),
                                  nn.Dense(12, 4)])


    out = {}
    for schedule in (("gpipe", "1f1b") if pipe else ("one",)):
        net, losses = mlp(), []
        if pipe:
            zenith.set_auto_parallel_context(
                parallel_mode=zenith.ParallelMode.SEMI_AUTO_PARALLEL, pipeline_stages=2,
                pipeline_config={"pipeline_scheduler": schedule})
            for i, stage in enumerate([0, 0, 1]):
                net[i].pipeline_stage = stage  # net[3], net[4]: stage 1 after net[2]
            cell = nn.PipelineCell(nn.WithLossCell(net, loss_fn), micro_size=4)
            opt = nn.Momentum(cell.trainable_params(), 0.1, 0.9)
            for _ in range(5):
                losses.append(cell(x, y).item())
                opt.step()
                opt.zero_grad()
            out["stage"] = cell.stage
            out[schedule + "_n_params"] = len(cell.trainable_params())
            out[schedule + "_in_flight"] = cell.max_in_flight
            out[schedule + "_sizes"] = [p.size for p in net.trainable_params()]
        else:
            opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
            grad_fn = zenith.value_and_grad(lambda a, b: loss_fn(net(a), b), None,
                                            opt.parameters)
            for _ in range(5):
                loss, grads = grad_fn(x, y)
                opt(grads)
                losses.append(loss.item())
        out[schedule + "_losses"] = losses
        out[schedule + "_params"] = [p.asnumpy().tolist() for p in net.trainable_params()]
    if pipe:
        zenith.communication.release()
    print("RESULT " + json.dumps(out), flush=True)
""")


def test_mlp_in_two_stages_equals_one_process(python_env, tmp_path):
    script = tmp_path / "pipe.py"
    script.write_text(SCRIPT)
    env = dict(python_env, ZENITH_NUM_THREADS="1")
    one = subprocess.run([sys.executable, str(script), "one"], env=env, text=True,
                         capture_output=True, timeout=300)
    assert one.returncode == 0, one.stderr + one.stdout
    ref = result(one.stdout)
    ranks = run_ranks(env, script, ["pipe"])
    s0, s1 = sorted(ranks, key=lambda r: r["stage"])
    assert (s0["stage"], s1["stage"]) == (0, 1)
    assert ref["one_losses"][-1] < ref["one_losses"][0]  # it trains
    for schedule in ("gpipe", "1f1b"):
        # Dense 0 | Dense 2, Dense 4: each stage's optimizer gets its own parameters.
        assert (s0[schedule + "_n_params"], s1[schedule + "_n_params"]) == (2, 4)
        for s in (s0, s1):
            np.testing.assert_allclose(s[schedule + "_losses"], ref["one_losses"], rtol=1e-5)
        # Each stage's parameters as one process's.
        for i in (0, 1):
            np.testing.assert_allclose(s0[schedule + "_params"][i], ref["one_params"][i],
                                       rtol=1e-5, atol=1e-6)
        for i in (2, 3, 4, 5):
            np.testing.assert_allclose(s1[schedule + "_params"][i], ref["one_params"][i],
                                       rtol=1e-5, atol=1e-6)
    # Each rank keeps its stage's weights only: Dense(8, 16) | Dense(16, 12), Dense(12, 4).
    assert s0["gpipe_sizes"] == [128, 16, 0, 0, 0, 0]
    assert s1["1f1b_sizes"] == [0, 0, 192, 12, 48, 4]
    # Micro-batches alive at once: GPipe all 4 on both stages; 1F1B p - s (2 on the first
    # stage, 1 on the last).
    assert (s0["gpipe_in_flight"], s1["gpipe_in_flight"]) == (4, 4)
    assert (s0["1f1b_in_flight"], s1["1f1b_in_flight"]) == (2, 1)


def test_pipeline_layouts_are_checked():
    with pytest.raises(zenith.UnsupportedError, match="semi_auto_parallel"):
        zenith.set_auto_parallel_context(parallel_mode="data_parallel", pipeline_stages=2)
    with pytest.raises(ValueError, match="pipeline_stages must be an int"):
        zenith.set_auto_parallel_context(pipeline_stages=0)
    with pytest.raises(zenith.UnsupportedError, match="seqpipe"):
        zenith.set_auto_parallel_context(pipeline_config={"pipeline_scheduler": "seqpipe"})
    with pytest.raises(zenith.UnsupportedError, match="pipeline_interleave"):
        zenith.set_auto_parallel_context(pipeline_config={"pipeline_interleave": True})
    assert zenith.get_auto_parallel_context("pipeline_config")["pipeline_scheduler"] == "1f1b"
    net = nn.SequentialCell([nn.Dense(2, 2), nn.Dense(2, 2)])
    with pytest.raises(ValueError, match="semi_auto_parallel"):
        nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), 2)
    zenith.set_auto_parallel_context(parallel_mode="semi_auto_parallel", pipeline_stages=2)
    try:
        with pytest.raises(zenith.UnsupportedError, match="SequentialCell"):
            nn.PipelineCell(nn.WithLossCell(nn.Dense(2, 2), nn.MSELoss()), 2)
        with pytest.raises(zenith.UnsupportedError, match="stage_config"):
            nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), 2, stage_config={})
        with pytest.raises(ValueError, match="communication.init"):
            nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), 2)
        net[0].pipeline_stage, net[1].pipeline_stage = 1, 0
        with pytest.raises(ValueError, match="must not go back"):
            nn.pipeline.stage_of_cells(list(net), 2)
        net[0].pipeline_stage, net[1].pipeline_stage = 0, 0
        with pytest.raises(ValueError, match=r"no cell on stage\(s\) \[1\]"):
            nn.pipeline.stage_of_cells(list(net), 2)
        net[1].pipeline_stage = 2
        with pytest.raises(ValueError, match="pipeline_stage 2"):
            nn.pipeline.stage_of_cells(list(net), 2)
    finally:
        zenith.reset_auto_parallel_context()
