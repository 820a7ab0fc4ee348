"""zenith.communication and data parallelism from Python: two processes on this machine join a
group from the platform's environment variables, run collectives, train through Model under
set_auto_parallel_context(parallel_mode="data_parallel") and through a value_and_grad loop with
DistributedGradReducer."""

import textwrap

import pytest

import zenith
from ranks import run_ranks

RANK_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import zenith
    import zenith.dataset as ds
    from zenith import Tensor, nn
    from zenith.communication import (all_gather, all_reduce, barrier, broadcast,
                                      get_group_size, get_local_rank, get_local_rank_size,
                                      get_rank, init, is_initialized, release, GlobalComm)

    init()
    rank, size = get_rank(), get_group_size()
    out = {"rank": rank, "size": size, "local": get_local_rank(),
           "local_size": get_local_rank_size(), "inited": is_initialized() and GlobalComm.INITED}
    t = Tensor(np.array([rank + 1.0, 10.0], np.float32))
    out["sum"] = all_reduce(t).asnumpy().tolist()
    out["mean"] = all_reduce(Tensor(np.array([rank * 2.0], np.float32)), "mean").item()
    out["max"] = all_reduce(Tensor(np.array([float(rank)], np.float32)), "max").item()
    out["bcast"] = broadcast(Tensor(np.array([rank + 5.0], np.float32)), root=1).item()
    out["gather"] = all_gather(Tensor(np.array([rank], np.float32))).asnumpy().tolist()
    barrier()

    # Model with data parallelism: each rank its shard, gradients averaged.
    zenith.set_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    zenith.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = rng.integers(0, 3, 64)
    data = ds.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False, num_shards=size,
                                 shard_id=rank).batch(8)
    net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3)])
    model = zenith.Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1),
                         metrics={"accuracy"})
    out["wrapper"] = type(model.train_network).__name__
    assert isinstance(model.train_network, nn.DistributedDataParallel)
    model.train(2, data)
    out["weights"] = [float(p.asnumpy().sum()) for p in net.trainable_params()]
    out["eval"] = model.eval(data)["accuracy"]

    # A functional loop: grads averaged by DistributedGradReducer.
    zenith.reset_auto_parallel_context()
    w = zenith.Parameter(Tensor(np.array([1.0], np.float32)), name="w")
    fn = lambda v: (w * v).sum()
    _, grads = zenith.value_and_grad(fn, None, [w])(Tensor(np.array([rank + 1.0], np.float32)))
    out["reduced"] = nn.DistributedGradReducer([w])(grads)[0].item()
    out["summed"] = nn.DistributedGradReducer([w], mean=False)(grads)[0].item()

    zenith.set_auto_parallel_context(parallel_mode="data_parallel")  # gradients_mean False
    try:
        zenith.Model(nn.Dense(2, 2))
    except ValueError as e:
        out["mean_false"] = "gradients_mean" in str(e)
    release()
    print("RESULT " + json.dumps(out), flush=True)
""")


def test_two_ranks(python_env, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    results = run_ranks(python_env, script)
    r0, r1 = sorted(results, key=lambda r: r["rank"])
    assert (r0["rank"], r1["rank"], r0["size"]) == (0, 1, 2)
    assert (r0["local"], r1["local"], r0["local_size"]) == (0, 1, 2)
    assert r0["inited"] and r1["inited"]
    assert r0["sum"] == r1["sum"] == [3.0, 20.0]
    assert r0["mean"] == r1["mean"] == 1.0 and r0["max"] == 1.0
    assert r0["bcast"] == r1["bcast"] == 6.0
    assert r0["gather"] == [[0.0], [1.0]]
    assert r0["wrapper"] == "DistributedDataParallel"
    assert r0["weights"] == pytest.approx(r1["weights"], rel=1e-6)  # the ranks stay in step
    assert r0["eval"] == r1["eval"]
    assert r0["reduced"] == r1["reduced"] == 1.5 and r0["summed"] == 3.0
    assert r0["mean_false"] and r1["mean_false"]


def test_single_process_without_init():
    with pytest.raises(RuntimeError, match="not initialized"):
        zenith.communication.get_rank()
    assert not zenith.communication.is_initialized()
    with pytest.raises(ValueError, match="group"):
        zenith.communication.get_rank("other_group")
    with pytest.raises(ValueError):
        zenith.communication.init("mpi")
    assert zenith.communication.HCCL_WORLD_COMM_GROUP == \
        zenith.communication.GlobalComm.WORLD_COMM_GROUP
