"""set_context, set_seed and the auto-parallel context."""

import numpy as np
import pytest

import zenith
from zenith import ops


def test_set_context_accepts_mindspores_keys():
    zenith.set_context(mode=zenith.PYNATIVE_MODE, device_target="CPU")
    assert zenith.get_context("mode") == zenith.PYNATIVE_MODE
    assert zenith.get_context("device_target") == "CPU"
    zenith.set_context(device_id=0, save_graphs=False, deterministic="ON")
    zenith.set_context(mode=zenith.GRAPH_MODE)
    assert zenith.get_context("mode") == zenith.GRAPH_MODE
    assert (ops.ones((2,)) + 1).asnumpy().tolist() == [2.0, 2.0]  # still computes (eagerly)
    zenith.set_context(mode=zenith.PYNATIVE_MODE)
    threads = zenith.get_context("runtime_num_threads")
    assert threads >= 1
    zenith.set_context(runtime_num_threads=1)
    assert zenith.get_context("runtime_num_threads") == 1
    zenith.set_context(runtime_num_threads=threads)
    with pytest.raises(ValueError, match="unknown key"):
        zenith.set_context(devcie_target="CPU")
    with pytest.raises(ValueError):
        zenith.set_context(mode=3)
    with pytest.raises(zenith.Error, match="device_target"):
        zenith.set_context(device_target="Ascend")
    with pytest.raises(TypeError):
        zenith.set_context(device_target=1)
    with pytest.raises(ValueError):
        zenith.get_context("colour")


def test_set_seed_makes_initialisation_and_data_repeatable():
    zenith.set_seed(5)
    assert zenith.get_seed() == 5
    a = zenith.nn.Dense(4, 4).weight.asnumpy()
    zenith.set_seed(5)
    np.testing.assert_array_equal(zenith.nn.Dense(4, 4).weight.asnumpy(), a)
    assert zenith.dataset.config.get_seed() == 5
    with pytest.raises(ValueError):
        zenith.set_seed(-1)
    with pytest.raises(ValueError):
        zenith.set_seed(1.5)


def test_auto_parallel_context():
    zenith.reset_auto_parallel_context()
    assert zenith.get_auto_parallel_context("parallel_mode") == zenith.ParallelMode.STAND_ALONE
    zenith.set_auto_parallel_context(parallel_mode=zenith.ParallelMode.DATA_PARALLEL,
                                     gradients_mean=True, device_num=2)
    assert zenith.get_auto_parallel_context("gradients_mean") is True
    assert zenith.get_auto_parallel_context("device_num") == 2
    net = zenith.nn.Dense(2, 2)
    with pytest.raises(RuntimeError, match="communication.init"):
        zenith.Model(net)  # data parallelism needs the job's ranks
    zenith.reset_auto_parallel_context()
    assert zenith.get_auto_parallel_context("device_num") == 1
    zenith.Model(net)
    with pytest.raises(ValueError, match="not supported"):
        zenith.set_auto_parallel_context(parallel_mode=zenith.ParallelMode.AUTO_PARALLEL)
    with pytest.raises(zenith.UnsupportedError, match="pipeline_stages=2"):
        zenith.set_auto_parallel_context(pipeline_stages=2)  # stand_alone
    with pytest.raises(zenith.UnsupportedError, match="gradient_accumulation_shard"):
        zenith.set_auto_parallel_context(
            parallel_optimizer_config={"gradient_accumulation_shard": True})
    with pytest.raises(ValueError, match="shard_level"):
        zenith.set_auto_parallel_context(parallel_optimizer_config={"shard_level": 2})
    with pytest.raises(ValueError, match="unknown key"):
        zenith.set_auto_parallel_context(stages=2)
    with pytest.raises(ValueError):
        zenith.get_auto_parallel_context("stages")
    assert zenith.ParallelMode.AUTO_PARALLEL == "auto_parallel"
    assert zenith.ParallelMode.HYBRID_PARALLEL == "hybrid_parallel"
