"""MindSpore's optimizer parallel (enable_parallel_optimizer=True, ZeRO stage 1) on two ranks:
the parameters after several steps equal those of the unsharded optimizer in the same job
(a value_and_grad loop with DistributedGradReducer and Adam, Model with Momentum under
data_parallel, AdamWeightDecay beside semi_auto_parallel's split Dense), each rank holds about
half the optimizer states, measured, with uneven and empty shards (7, 5 and 1 rows over 2)."""

import textwrap

import pytest

import zenith
from ranks import run_ranks

SCRIPT = textwrap.dedent("""
    import json
    import sys
    import numpy as np
    import zenith
    import zenith.dataset as ds
    from zenith import Tensor, nn
    from zenith.nn.parallel_optimizer import state_bytes

    zenith.communication.init()
    rank = zenith.communication.get_rank()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 16)).astype(np.float32)
    y = rng.normal(size=(32, 1)).astype(np.float32)
    out = {"rank": rank}


    def context(mode, parallel, **config):
        zenith.reset_auto_parallel_context()
        zenith.set_auto_parallel_context(parallel_mode=mode, gradients_mean=True,
                                         enable_parallel_optimizer=parallel,
                                         parallel_optimizer_config=config)


    def mlp():
        zenith.set_seed(1)  # the same initial weights on both ranks and in both runs
        # Rows 32, 7, 1: even, uneven (4 + 3) and empty (1 + 0) shards.
        return nn.SequentialCell([nn.Dense(16, 32), nn.ReLU(), nn.Dense(32, 7), nn.ReLU(),
                                  nn.Dense(7, 1)])


    def params(net):
        return [p.asnumpy() for p in net.trainable_params()]


    def max_diff(a, b):
        return max(float(np.abs(u - v).max()) for u, v in zip(a, b))


    # A value_and_grad loop: each rank its half of the batch, gradients averaged.
    def loop(parallel, **config):
        context("data_parallel", parallel, **config)
        net = mlp()
        opt = nn.Adam(net.trainable_params(), 1e-2)
        reducer = nn.DistributedGradReducer(opt.parameters)
        loss_fn = nn.MSELoss()
        grad_fn = zenith.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)
        for step in range(6):
            lo = rank * 8 + step % 2 * 16
            _, grads = grad_fn(Tensor(x[lo:lo + 8]), Tensor(y[lo:lo + 8]))
            opt(reducer(grads))
        return net, opt

    ref, ref_opt = loop(False)
    net, opt = loop(True, parallel_optimizer_threshold=0)
    out["loop_kind"] = type(opt._opt).__name__
    out["loop_diff"] = max_diff(params(ref), params(net))
    out["loop_moved"] = max_diff(params(ref), params(mlp()))
    out["full_bytes"] = state_bytes(ref_opt)
    out["shard_bytes"] = state_bytes(opt)
    out["rows"] = [list(opt._opt.rows_of(i)) for i in range(6)]
    _, small = loop(True)  # MindSpore's default threshold, 64 KB: these parameters stay whole
    out["threshold_bytes"] = state_bytes(small)

    # Model under data_parallel (DDP averages the gradients) with Momentum.
    def model(parallel):
        context("data_parallel", parallel, parallel_optimizer_threshold=0)
        net = mlp()
        opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
        data = ds.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False, num_shards=2,
                                     shard_id=rank).batch(4)
        zenith.Model(net, nn.MSELoss(), opt).train(2, data)
        return net, opt

    ref, _ = model(False)
    net, opt = model(True)
    out["model_kind"] = opt._opt.type_name
    out["model_diff"] = max_diff(params(ref), params(net))

    # A checkpoint holds this rank's shards of the states; resuming on as many ranks continues
    # the run exactly.
    def resumed(path):
        context("data_parallel", True, parallel_optimizer_threshold=0)
        net = mlp()
        opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
        data = ds.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False, num_shards=2,
                                     shard_id=rank).batch(4)
        m = zenith.Model(net, nn.MSELoss(), opt)
        if path:
            m.load_checkpoint(path)
        return net, m, data

    path = f"{sys.argv[1]}/rank{rank}.ckpt"
    net, m, data = resumed(None)
    m.train(1, data)
    m.save_checkpoint(path)
    out["ckpt_keys"] = len([k for k in opt._opt.state_dict()])
    m.train(2, data, initial_epoch=1)
    again, m2, data2 = resumed(path)
    m2.train(2, data2, initial_epoch=1)
    out["resume_diff"] = max_diff(params(net), params(again))


    # semi_auto_parallel: fc1 split by its strategy (its states stay whole on each rank), fc2's
    # weight split by rows of inputs and its bias replicated (that one sharded).
    class TP(nn.Cell):
        def __init__(self):
            super().__init__()
            zenith.set_seed(2)
            self.fc1, self.fc2, self.relu = nn.Dense(16, 8), nn.Dense(8, 3), nn.ReLU()
            self.fc1.matmul.shard(((1, 1), (2, 1)))
            self.fc2.matmul.shard(((1, 2), (1, 2)))

        def construct(self, a):
            return self.fc2(self.relu(self.fc1(a)))

    def semi(parallel):
        context("semi_auto_parallel", parallel, parallel_optimizer_threshold=0)
        net = TP()
        opt = nn.AdamWeightDecay(net.trainable_params(), 1e-2, weight_decay=0.1)
        loss_fn = nn.MSELoss()
        grad_fn = zenith.value_and_grad(lambda a, b: loss_fn(net(a), b), None, opt.parameters)
        for _ in range(5):
            _, grads = grad_fn(Tensor(x), Tensor(np.repeat(y, 3, axis=1)))
            opt(grads)
        return net, opt

    ref, ref_opt = semi(False)
    net, opt = semi(True)
    out["semi_diff"] = max_diff(params(ref), params(net))
    out["semi_rows"] = [list(opt._opt.rows_of(i)) for i in range(4)]
    out["semi_bytes"] = [state_bytes(ref_opt), state_bytes(opt)]
    zenith.communication.release()
    print("RESULT " + json.dumps(out), flush=True)
""")


def test_sharded_optimizer_equals_unsharded_with_half_the_states(python_env, tmp_path):
    script = tmp_path / "zero.py"
    script.write_text(SCRIPT)
    results = run_ranks(python_env, script, [tmp_path])
    r0, r1 = sorted(results, key=lambda r: r["rank"])
    for r in (r0, r1):
        assert r["loop_kind"] == "ParallelOptimizer"
        assert r["loop_moved"] > 1e-3  # it trained
        assert r["loop_diff"] <= 1e-6, r
        assert r["model_kind"] == "ParallelMomentum"
        assert r["model_diff"] <= 1e-6, r
        assert r["semi_diff"] <= 1e-6, r
        assert r["threshold_bytes"] == r["full_bytes"]
        assert r["resume_diff"] <= 1e-6, r
    # The velocities of the rows each rank holds (rank 1 has none of dense3's) and the step.
    assert (r0["ckpt_keys"], r1["ckpt_keys"]) == (7, 5)
    # Rows of each rank: dense1 weight/bias 32 -> 16 + 16, dense2 7 -> 4 + 3, dense3 1 -> 1 + 0.
    assert r0["rows"] == [[0, 16], [0, 16], [0, 4], [0, 4], [0, 1], [0, 1]]
    assert r1["rows"] == [[16, 16], [16, 16], [4, 3], [4, 3], [1, 0], [1, 0]]
    # Adam: two float32 moments per element, 783 elements; each rank about half.
    full = r0["full_bytes"]
    assert full == r1["full_bytes"] == 783 * 8
    assert r0["shard_bytes"] + r1["shard_bytes"] == full
    assert r0["shard_bytes"] <= 0.55 * full and r1["shard_bytes"] <= 0.55 * full
    # semi_auto_parallel: the split parameters whole on each rank (their rows are the rank's
    # own), fc2's replicated bias (3 rows) sharded 2 + 1.
    assert r0["semi_rows"] == [[0, 4], [0, 4], [0, 3], [0, 2]]
    assert r1["semi_rows"] == [[0, 4], [0, 4], [0, 3], [2, 1]]
    assert r0["semi_bytes"][1] == r0["semi_bytes"][0] - 1 * 8
    assert r1["semi_bytes"][1] == r1["semi_bytes"][0] - 2 * 8


def test_parallel_optimizer_config_is_checked():
    try:
        zenith.set_auto_parallel_context(parallel_mode="data_parallel",
                                         enable_parallel_optimizer=True,
                                         parallel_optimizer_config={
                                             "parallel_optimizer_threshold": 0})
        assert zenith.get_auto_parallel_context("parallel_optimizer_config") == {
            "parallel_optimizer_threshold": 0, "optimizer_weight_shard_size": -1,
            "gradient_accumulation_shard": False}
        with pytest.raises(ValueError, match="communication.init"):
            zenith.nn.Adam(zenith.nn.Dense(2, 2).trainable_params())
        with pytest.raises(zenith.UnsupportedError, match="optimizer_weight_shard_size"):
            zenith.set_auto_parallel_context(
                parallel_optimizer_config={"optimizer_weight_shard_size": 4})
        with pytest.raises(ValueError, match="parallel_optimizer_threshold"):
            zenith.set_auto_parallel_context(
                parallel_optimizer_config={"parallel_optimizer_threshold": -1})
        with pytest.raises(TypeError, match="enable_parallel_optimizer"):
            zenith.set_auto_parallel_context(enable_parallel_optimizer="yes")
        zenith.set_auto_parallel_context(parallel_mode="stand_alone")
        zenith.nn.Adam(zenith.nn.Dense(2, 2).trainable_params())  # no effect on one process
    finally:
        zenith.reset_auto_parallel_context()
