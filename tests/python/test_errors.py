"""Bad input raises Python exceptions carrying the C++ message (TypeError, ValueError,
RuntimeError: zenith.Error is both of the last two) and never kills the interpreter."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zenith
from zenith import Tensor, nn, ops


def test_error_type_is_value_and_runtime_error():
    assert issubclass(zenith.Error, ValueError) and issubclass(zenith.Error, RuntimeError)
    with pytest.raises(ValueError):
        ops.matmul(Tensor(np.ones((2, 3))), Tensor(np.ones((2, 3))))
    with pytest.raises(RuntimeError):
        ops.matmul(Tensor(np.ones((2, 3))), Tensor(np.ones((2, 3))))


@pytest.mark.parametrize("call,message", [
    (lambda: ops.conv2d(Tensor(np.ones((1, 3, 5, 5), np.float32)),
                        Tensor(np.ones((4, 1, 3, 3), np.float32))), r"\[conv2d\].*3 channels"),
    (lambda: ops.matmul(Tensor(np.ones((2, 3))), Tensor(np.ones((4, 5)))), r"\[matmul\]"),
    (lambda: ops.add(Tensor(np.ones(3)), Tensor(np.ones(4))), r"\[add\].*\[3\].*\[4\]"),
    (lambda: ops.cross_entropy(Tensor(np.ones((2, 3), np.float32)), Tensor([0, 7])),
     r"\[cross_entropy\]"),
    (lambda: ops.cross_entropy(Tensor(np.ones((2, 3), np.float32)),
                               Tensor(np.ones(2, np.float32))), r"\[cross_entropy\]"),
    (lambda: ops.embedding(Tensor([5]), Tensor(np.ones((3, 2), np.float32))), r"\[embedding\]"),
    (lambda: ops.where(Tensor([1.0]), Tensor([1.0]), Tensor([2.0])), r"\[where\].*bool"),
    (lambda: ops.conv2d(Tensor(np.ones((1, 1, 5, 5), np.int32)),
                        Tensor(np.ones((1, 1, 3, 3), np.int32))), r"\[conv2d\].*float"),
    (lambda: ops.reshape(Tensor(np.ones(6)), (4, 2)), r"\[reshape\]"),
    (lambda: nn.Dense(3, 2)(Tensor(np.ones((1, 4), np.float32))), r"\[Dense\].*\[1, 4\]"),
    (lambda: Tensor([1.0, 2.0]).item(), r"\[item\]"),
])
def test_cpp_messages_reach_python(call, message):
    with pytest.raises(zenith.Error, match=message):
        call()


@pytest.mark.parametrize("call", [
    lambda: ops.add(Tensor([1.0]), None),
    lambda: ops.relu(None),
    lambda: ops.relu("x"),
    lambda: nn.Dense(3, 2)(None),
    lambda: nn.Dense("3", 2),
    lambda: ops.cat(None),
    lambda: Tensor([1.0]).reshape("a"),
    lambda: ops.zeros((2,), dtype="complex"),
    lambda: zenith.Model(None),
])
def test_wrong_python_types_raise_type_error(call):
    with pytest.raises(TypeError):
        call()


def test_errors_leave_objects_usable():
    net = nn.Dense(2, 2)
    with pytest.raises(zenith.Error):
        net(Tensor(np.ones((1, 3), np.float32)))
    assert net(Tensor(np.ones((1, 2), np.float32))).shape == (1, 2)


def test_a_battery_of_bad_calls_does_not_kill_the_interpreter(python_env):
    """In a fresh interpreter: every bad call raises, and the process ends normally."""
    script = textwrap.dedent("""
        import numpy as np, zenith
        from zenith import Tensor, nn, ops
        import zenith.dataset as ds
        calls = [
            lambda: Tensor(np.ones(3))[10],
            lambda: ops.index_select(Tensor(np.ones((3, 2))), 0, Tensor([7])),
            lambda: ops.gather_elements(Tensor(np.ones((2, 2))), 0, Tensor([[5, 0], [0, 0]])),
            lambda: ops.max_pool2d(Tensor(np.ones((1, 1, 2, 2), np.float32)), 5),
            lambda: ops.conv2d(Tensor(np.ones((1, 1, 2, 2), np.float32)),
                               Tensor(np.ones((1, 1, 5, 5), np.float32))),
            lambda: nn.BatchNorm2d(3)(Tensor(np.ones((2, 4, 2, 2), np.float32))),
            lambda: ops.layer_norm(Tensor(np.ones((2, 3))), (4,)),
            lambda: zenith.load_checkpoint("/nonexistent/file.ckpt"),
            lambda: ds.FashionMnistDataset("/nonexistent"),
            lambda: list(ds.GeneratorDataset([1, 2], ["x"]).batch(1).map(lambda a: a["k"], "x")),
            lambda: zenith.communication.all_reduce(Tensor([1.0])),
            lambda: zenith.Tensor(np.ones((2, 2))).view(3),
            lambda: zenith.nn.Dense(2, 2).to_float("int8"),
            lambda: zenith.grad(lambda x: x)(Tensor([1, 2])),
            lambda: zenith.set_context(mode=5),
        ]
        for i, call in enumerate(calls):
            try:
                call()
            except (TypeError, ValueError, RuntimeError, IndexError, KeyError) as e:
                print(i, type(e).__name__, str(e).splitlines()[0][:80])
            else:
                raise SystemExit(f"call {i} did not raise")
        print("survived")
    """)
    result = subprocess.run([sys.executable, "-c", script], env=python_env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.strip().endswith("survived")
    assert result.stdout.count("\n") == 16
