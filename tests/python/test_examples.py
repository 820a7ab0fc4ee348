"""The programs of examples/python run as a user runs them: the seed's CIFAR-10 program (on
files in CIFAR-10's binary format here; its Fashion-MNIST variant must reach 90% in 10 epochs,
the slow test), and MindSpore 2's quickstart."""

import ast
import re
import subprocess
import sys

import pytest

from conftest import example, write_cifar


def run(args, env, cwd, timeout=900):
    result = subprocess.run([sys.executable] + args, env=env, cwd=cwd, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    return result.stdout


def accuracy(out):
    line = [l for l in out.splitlines() if l.startswith("{'Accuracy': ")][-1]
    return ast.literal_eval(line)["Accuracy"]


def test_cifar10_seed_program(python_env, tmp_path):
    data = write_cifar(str(tmp_path / "cifar-10-batches-bin"), records_per_file=40)
    out = run([example("cifar10_seed.py"), "--epochs", "2"], python_env, cwd=tmp_path)
    # MindSpore's LossMonitor and TimeMonitor lines, and no others of theirs
    assert re.search(r"^epoch: 1 step: \d+, loss is \d+\.\d+(e-?\d+)?$", out, re.M)
    assert re.search(r"^Train epoch time: \d+\.\d{3} ms, per step time: \d+\.\d{3} ms$", out,
                     re.M)
    assert "mean loss" not in out and "images/s" not in out
    assert 0.0 <= accuracy(out) <= 1.0
    assert (tmp_path / "ckpt" / "cifar10_epoch_2.safetensors").exists()
    assert not (tmp_path / "ckpt" / "cifar10_epoch_1.safetensors").exists()  # keep 1
    assert data


def test_quickstart(python_env, tmp_path, fashion_mnist):
    out = run([example("quickstart.py"), "--epochs", "1", "--limit", "6400", "--checkpoint",
               str(tmp_path / "model.ckpt")], python_env, cwd=tmp_path)
    assert "Shape of image [N, C, H, W]: (64, 1, 28, 28) Float32" in out
    assert "Shape of label: (64,) Int32" in out
    assert "Network<" in out and "loss: " in out and "[  0/100]" in out
    acc = float(re.search(r"Accuracy: ([0-9.]+)%", out).group(1))
    assert acc > 55.0  # one epoch on 6400 images with SGD 0.01 (the full run: see README)
    assert "Done!" in out and "\n[]\n" in out and 'Predicted: "[' in out
    assert (tmp_path / "model.ckpt").exists()


@pytest.mark.slow
def test_seed_program_on_fashion_mnist_reaches_90_percent(python_env, tmp_path, fashion_mnist):
    out = run([example("cifar10_seed.py"), "--dataset", "fashion-mnist", "--epochs", "10"],
              python_env, cwd=tmp_path, timeout=1100)
    print(out)
    assert accuracy(out) >= 0.90
