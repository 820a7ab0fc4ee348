"""save_checkpoint / load_checkpoint / load_param_into_net: round trips, MindSpore's argument
forms, and the same files as the C++ side (`zenith train` writes, Python reads; Python writes,
`zenith eval` reads)."""

import json
import subprocess

import numpy as np
import pytest

import zenith
import zenith.dataset as ds
from zenith import Parameter, Tensor, nn
from zenith.dataset import vision


def seed_net():
    return nn.SequentialCell([
        nn.Conv2d(1, 32, 3, pad_mode="valid"), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 3, pad_mode="valid"), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Dense(64 * 5 * 5, 10)])


def test_round_trip_of_a_cell(tmp_path):
    net = seed_net()
    zenith.save_checkpoint(net, str(tmp_path / "model"), append_dict={"epoch": 3})
    assert (tmp_path / "model.ckpt").exists()  # MindSpore's extension when none is given
    params = zenith.load_checkpoint(str(tmp_path / "model.ckpt"))
    assert list(params) == sorted(n for n, _ in net.parameters_and_names())
    assert all(isinstance(p, Parameter) and p.name == n for n, p in params.items())
    other = seed_net()
    not_loaded, unused = zenith.load_param_into_net(other, params)
    assert not_loaded == [] and unused == []
    for a, b in zip(net.trainable_params(), other.trainable_params()):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    third = seed_net()
    zenith.load_checkpoint(str(tmp_path / "model.ckpt"), net=third)
    np.testing.assert_array_equal(third[7].weight.asnumpy(), net[7].weight.asnumpy())


def test_partial_loads_and_filters(tmp_path):
    net = seed_net()
    path = str(tmp_path / "m.safetensors")
    zenith.save_checkpoint(net, path)
    params = zenith.load_checkpoint(path, filter_prefix="7.")
    assert not any(n.startswith("7.") for n in params)
    assert list(zenith.load_checkpoint(path, specify_prefix="0.")) == ["0.weight"]
    assert list(zenith.load_checkpoint(path, choice_func=lambda n: n.endswith("bias"))) == [
        "7.bias"]
    other = seed_net()
    not_loaded, unused = zenith.load_param_into_net(other, dict(params, extra=Tensor([1.0])))
    assert not_loaded == ["7.weight", "7.bias"] and unused == ["extra"]
    with pytest.raises(ValueError, match="not loaded"):
        zenith.load_param_into_net(other, params, strict_load=True)
    wrong = {"0.weight": Tensor(np.zeros((1, 1, 1, 1), np.float32))}
    with pytest.raises(zenith.Error, match="0.weight"):
        zenith.load_param_into_net(other, wrong)
    zenith.save_checkpoint(net, path, choice_func=lambda n: n.startswith("3."))
    assert list(zenith.load_checkpoint(path)) == ["3.weight"]


def test_dicts_and_lists(tmp_path):
    path = str(tmp_path / "d.ckpt")
    zenith.save_checkpoint({"a": Tensor([1.0, 2.0]), "b": np.arange(3)}, path)
    loaded = zenith.load_checkpoint(path)
    assert loaded["a"].asnumpy().tolist() == [1.0, 2.0] and loaded["b"].dtype == zenith.int64
    assert loaded["b"].requires_grad is False
    zenith.save_checkpoint([{"name": "w", "data": Tensor([[3.0]])}], path)
    assert zenith.load_checkpoint(path)["w"].shape == (1, 1)
    with pytest.raises(TypeError):
        zenith.save_checkpoint([{"data": 1}], path)
    with pytest.raises(TypeError):
        zenith.save_checkpoint(42, path)
    with pytest.raises(ValueError, match="does not exist"):
        zenith.load_checkpoint(str(tmp_path / "missing.ckpt"))
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(zenith.Error, match="junk.ckpt"):
        zenith.load_checkpoint(str(tmp_path / "junk.ckpt"))
    with pytest.raises(ValueError):
        zenith.save_checkpoint({"a": Tensor([1.0])}, path, enc_key=b"k")
    with pytest.raises(TypeError):
        zenith.load_param_into_net({"a": 1}, {})
    with pytest.raises(TypeError):
        zenith.load_param_into_net(seed_net(), [1])


def eval_pipeline(fashion_mnist, n):
    data = ds.FashionMnistDataset(fashion_mnist, usage="test", shuffle=False, num_samples=n)
    data = data.map([vision.Rescale(1.0 / 255, 0.0), vision.Normalize([0.2860], [0.3530]),
                     vision.HWC2CHW()], "image")
    return data.batch(256)


def test_same_files_as_zenith_train_and_eval(fashion_mnist, zenith_binary, tmp_path):
    out = tmp_path / "cli"
    subprocess.run([zenith_binary, "train", "--model", "seedcnn", "--dataset", "fashion-mnist",
                    "--epochs", "1", "--limit-train", "1280", "--limit-test", "100",
                    "--progress", "plain", "--out", str(out)], check=True,
                   capture_output=True, timeout=600)
    checkpoint = str(out / "checkpoint_epoch_1.safetensors")
    cli = subprocess.run([zenith_binary, "eval", "--checkpoint", checkpoint, "--limit", "500"],
                         check=True, capture_output=True, text=True, timeout=300)
    cli_accuracy = json.loads(cli.stdout)["Accuracy"]
    # zenith train's checkpoint in a network written in Python
    net = seed_net()
    zenith.load_checkpoint(checkpoint, net=net)
    model = zenith.Model(net, metrics={"Accuracy": zenith.train.Accuracy()})
    assert model.eval(eval_pipeline(fashion_mnist, 500))["Accuracy"] == pytest.approx(
        cli_accuracy, abs=1e-9)
    # and a checkpoint written from Python, evaluated by zenith eval
    net2 = seed_net()
    for p in net2.trainable_params():
        p.set_data(Tensor(np.zeros(p.shape, np.float32)))
    py_checkpoint = str(tmp_path / "python.safetensors")
    zenith.save_checkpoint(net2, py_checkpoint)
    cli2 = subprocess.run([zenith_binary, "eval", "--checkpoint", py_checkpoint, "--model",
                           "seedcnn", "--dataset", "fashion-mnist", "--limit", "300"],
                          check=True, capture_output=True, text=True, timeout=300)
    # all-zero weights predict class 0 everywhere: the share of class 0 in the first 300 labels
    labels = [int(l) for _, l in ds.FashionMnistDataset(
        fashion_mnist, usage="test", shuffle=False, num_samples=300).create_tuple_iterator(
            output_numpy=True)]
    assert json.loads(cli2.stdout)["Accuracy"] == pytest.approx(labels.count(0) / 300)
