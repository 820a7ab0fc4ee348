"""Shared fixtures of the Python front end's tests (run by CTest's python.pytest with this
build's package on PYTHONPATH; `python3 -m pytest tests/python` works too once
scripts/build.sh has installed the package)."""

import os
import shutil
import sys

import numpy as np
import pytest

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
SOURCE_DIR = os.environ.get("ZENITH_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long runs (the 10-epoch accuracy check)")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def fashion_mnist():
    if not os.path.isdir(FASHION_MNIST):
        pytest.fail(f"{FASHION_MNIST} is missing: apt-get install dataset-fashion-mnist")
    return FASHION_MNIST


@pytest.fixture(scope="session")
def zenith_binary():
    path = os.environ.get("ZENITH_BINARY") or shutil.which("zenith")
    if not path:
        candidate = os.path.join(SOURCE_DIR, "build", "release", "zenith")
        path = candidate if os.path.exists(candidate) else None
    if not path:
        pytest.fail("the zenith binary was not found (set ZENITH_BINARY)")
    return os.path.abspath(path)


@pytest.fixture(scope="session")
def python_env():
    """An environment in which a child `python` imports this build's zenith."""
    import zenith
    env = dict(os.environ)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(zenith.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_parent, env.get("PYTHONPATH")] if p)
    return env


def write_cifar(directory, records_per_file=4):
    """Files in CIFAR-10's binary format: records of 1 label byte + 3072 image bytes (CHW)."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    for n, name in enumerate(names):
        with open(os.path.join(directory, name), "wb") as f:
            for r in range(records_per_file):
                f.write(bytes([(n + r) % 10]))
                f.write(rng.integers(0, 256, 3072, dtype=np.uint8).tobytes())
    return directory


def example(name):
    return os.path.join(SOURCE_DIR, "examples", "python", name)


@pytest.fixture(scope="session")
def python_exe():
    return sys.executable
