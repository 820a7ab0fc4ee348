"""zenith.train: Model.train/fit/eval/predict with built-in and Python networks, losses,
metrics and callbacks; checkpoints; the ZENITH_METRICS_FILE convention."""

import glob
import json
import os

import numpy as np
import pytest

import zenith
import zenith.dataset as ds
from zenith import Tensor, nn
from zenith.dataset import vision
from zenith.train import (Accuracy, Callback, CheckpointConfig, EarlyStopping, Loss, LossMonitor,
                          Metric, Model, ModelCheckpoint, RunContext, SummaryCollector,
                          TimeMonitor, Top1CategoricalAccuracy, Top5CategoricalAccuracy,
                          TopKCategoricalAccuracy)


def fmnist(path, usage, n, batch=32, shuffle=True):
    data = ds.FashionMnistDataset(path, usage=usage, num_samples=n, shuffle=shuffle)
    data = data.map([vision.Rescale(1.0 / 255, 0.0), vision.HWC2CHW()], "image")
    return data.batch(batch)


def small_net():
    return nn.SequentialCell([nn.Flatten(), nn.Dense(784, 64), nn.ReLU(), nn.Dense(64, 10)])


def test_train_eval_predict_learn(fashion_mnist, capfd):
    zenith.set_seed(0)
    net = small_net()
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  nn.Momentum(net.trainable_params(), 0.05, 0.9),
                  metrics={"accuracy", "loss", "top_5_accuracy"})
    test = fmnist(fashion_mnist, "test", 1000, shuffle=False)
    before = model.eval(test)
    model.train(2, fmnist(fashion_mnist, "train", 4000), callbacks=[LossMonitor(50),
                                                                   TimeMonitor()])
    after = model.eval(test)
    assert set(after) == {"accuracy", "loss", "top_5_accuracy"}
    assert after["accuracy"] > 0.65 and after["accuracy"] > before["accuracy"] + 0.3
    assert after["loss"] < before["loss"] and after["top_5_accuracy"] >= after["accuracy"]
    out = capfd.readouterr().out
    assert "epoch: 1 step: 50, loss is" in out and "per step time" in out
    x, _ = next(iter(test))
    pred = model.predict(x)
    assert pred.shape == (32, 10)
    history = model.history
    assert [h["epoch"] for h in history] == [1, 2] and history[1]["loss"] < history[0]["loss"]
    assert model.train_network is net and model.optimizer is not None
    assert model.predict_network is net and model.eval_network is net


def test_metric_objects_and_python_metrics(fashion_mnist):
    class Count(Metric):
        def clear(self):
            self.n = 0

        def update(self, y_pred, y):
            self.n += y.shape[0]

        def eval(self):
            return float(self.n)

    net = small_net()
    model = Model(net, nn.CrossEntropyLoss(), metrics={
        "Accuracy": Accuracy(), "Loss": Loss(), "top1": Top1CategoricalAccuracy(),
        "top5": Top5CategoricalAccuracy(), "top3": TopKCategoricalAccuracy(3), "count": Count()})
    result = model.eval(fmnist(fashion_mnist, "test", 100))
    assert result["count"] == 100.0 and result["top1"] == pytest.approx(result["Accuracy"])
    assert result["top5"] >= result["top3"] >= result["top1"]
    acc = Accuracy()
    acc.clear()
    acc.update(Tensor(np.array([[0.1, 0.9], [0.8, 0.2]], np.float32)), Tensor([1, 1]))
    assert acc.eval() == 0.5
    with pytest.raises(ValueError, match="unknown metric"):
        Model(net, metrics={"f1"})
    with pytest.raises(TypeError):
        Model(net, metrics={"a": 3})
    with pytest.raises(ValueError):
        Accuracy("multilabel")
    assert zenith.train.metrics.names() == ["accuracy", "loss", "top_1_accuracy",
                                            "top_5_accuracy"]
    assert isinstance(zenith.train.metrics.get_metric_by_name("loss"), Loss)


class Recorder(Callback):
    def __init__(self, stop_at=None):
        self.events = []
        self.stop_at = stop_at

    def on_train_begin(self, run_context):
        self.events.append("begin")

    def on_train_epoch_end(self, run_context):
        args = run_context.original_args()
        self.events.append(("epoch", args.cur_epoch_num, args.epoch_num))

    def step_end(self, run_context):  # the MindSpore 1 name, called by on_train_step_end
        args = run_context.original_args()
        self.events.append(("step", args.cur_step_num, round(float(args.net_outputs.asnumpy()), 3)))
        assert 1 <= args.cur_step_in_epoch <= args.batch_num
        assert args.train_network is not None and args.optimizer is not None
        if args.cur_step_num == self.stop_at:
            run_context.request_stop()
            assert run_context.get_stop_requested()


def test_python_callbacks_see_the_run_and_can_stop_it(fashion_mnist):
    net = small_net()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.01))
    data = fmnist(fashion_mnist, "train", 320)  # 10 steps per epoch
    rec = Recorder()
    model.train(2, data, callbacks=rec)
    steps = [e for e in rec.events if e[0] == "step"]
    assert rec.events[0] == "begin" and len(steps) == 20
    assert [s[1] for s in steps] == list(range(1, 21))
    assert ("epoch", 2, 2) in rec.events
    stopper = Recorder(stop_at=23)  # global steps continue from 20
    model.train(4, data, callbacks=[stopper])
    assert [e[1] for e in stopper.events if e[0] == "step"] == [21, 22, 23]

    class Raises(Callback):
        def on_train_step_end(self, run_context):
            raise KeyError("from a callback")

    with pytest.raises(KeyError, match="from a callback"):
        model.train(1, data, callbacks=[Raises()])
    with pytest.raises(TypeError):
        model.train(1, data, callbacks=[object()])


def test_python_network_and_loss_trained_by_model(fashion_mnist):
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.fc = nn.Dense(784, 10)

        def construct(self, x):
            return self.fc(self.flatten(x))

    class MyLoss(nn.LossBase):
        def construct(self, logits, labels):
            return zenith.ops.cross_entropy(logits, labels)

    net = Net()
    model = Model(net, MyLoss(), nn.Adam(net.trainable_params(), 0.01), metrics={"accuracy"})
    model.train(1, fmnist(fashion_mnist, "train", 2000))
    assert model.eval(fmnist(fashion_mnist, "test", 500))["accuracy"] > 0.6
    plain = Model(net, lambda logits, labels: zenith.ops.cross_entropy(logits, labels),
                  nn.SGD(net.trainable_params(), 0.01))
    plain.train(1, fmnist(fashion_mnist, "train", 64))

    class WrongLoss(nn.LossBase):
        def construct(self, logits, labels):
            return 1.0

    with pytest.raises(TypeError, match="loss function"):
        Model(net, WrongLoss(), nn.SGD(net.trainable_params(), 0.01)).train(
            1, fmnist(fashion_mnist, "train", 32))


def test_checkpoints_and_resume(fashion_mnist, tmp_path):
    zenith.set_seed(0)
    net = small_net()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    model = Model(net, nn.CrossEntropyLoss(), opt, metrics={"accuracy"})
    data = fmnist(fashion_mnist, "train", 320)
    config = CheckpointConfig(save_checkpoint_steps=4, keep_checkpoint_max=2,
                              save_checkpoint_epochs=1)
    model.train(2, data, callbacks=[ModelCheckpoint("fm", str(tmp_path), config)])
    files = sorted(os.path.basename(f) for f in glob.glob(str(tmp_path / "*.safetensors")))
    assert files == ["fm_epoch_2.safetensors", "fm_step_20.safetensors"]
    # the file holds the network's parameters (and the optimizer's state under optimizer.)
    params = zenith.load_checkpoint(str(tmp_path / "fm_epoch_2.safetensors"))
    assert "1.weight" in params and any(n.startswith("optimizer.") for n in params)
    np.testing.assert_allclose(params["1.weight"].asnumpy(), net[1].weight.asnumpy())
    # Model's own checkpoints resume where they stopped
    model.save_checkpoint(str(tmp_path / "run.safetensors"))
    other = small_net()
    resumed = Model(other, nn.CrossEntropyLoss(), nn.Momentum(other.trainable_params(), 0.05,
                                                              0.9))
    meta = resumed.load_checkpoint(str(tmp_path / "run.safetensors"))
    assert meta["epoch"] == "2"
    np.testing.assert_allclose(other[3].bias.asnumpy(), net[3].bias.asnumpy())
    with pytest.raises(ValueError):
        CheckpointConfig(save_checkpoint_seconds=60)
    with pytest.raises(ValueError):
        CheckpointConfig(save_checkpoint_steps=-1)
    with pytest.raises(TypeError):
        ModelCheckpoint(config={"steps": 1})


def test_default_checkpoint_config_is_mindspores(tmp_path, fashion_mnist):
    net = small_net()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.01))
    model.train(1, fmnist(fashion_mnist, "train", 256),
                callbacks=[ModelCheckpoint(directory=str(tmp_path))])
    files = sorted(os.listdir(tmp_path))
    # zenith's step files, and MindSpore's <prefix>-<epoch>_<step>.ckpt at the end of training
    assert files == ["CKP-1_8.ckpt"] + [f"CKP_step_{s}.safetensors" for s in (4, 5, 6, 7, 8)]


def test_summary_collector_early_stopping_fit(fashion_mnist, tmp_path):
    net = small_net()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.0),
                  metrics={"accuracy"})
    train, valid = fmnist(fashion_mnist, "train", 128), fmnist(fashion_mnist, "test", 64)
    stopper = EarlyStopping(monitor="accuracy", patience=1)
    model.fit(10, train, valid, callbacks=[SummaryCollector(str(tmp_path / "summary"), 1),
                                          stopper])
    assert 2 <= len(model.history) < 10  # lr 0: no improvement, stopped early
    assert "accuracy" in model.history[0]["eval"]
    events = glob.glob(str(tmp_path / "summary" / "events.out.tfevents.*"))
    assert len(events) == 1 and os.path.getsize(events[0]) > 0
    model.fit(1, train)  # without validation: train()
    with pytest.raises(ValueError):
        EarlyStopping(baseline=0.5)


def test_metrics_file_for_the_dashboard(fashion_mnist, tmp_path, monkeypatch):
    path = tmp_path / "logs" / "rank_0.metrics.jsonl"
    monkeypatch.setenv("ZENITH_METRICS_FILE", str(path))
    net = small_net()
    Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.01)).train(
        1, fmnist(fashion_mnist, "train", 640))
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    losses = [l for l in lines if l["name"] == "loss"]
    assert [l["step"] for l in losses] == [10, 20]
    assert {"step", "epoch", "name", "value", "time"} <= set(losses[0])


def test_model_argument_errors(fashion_mnist):
    net = small_net()
    with pytest.raises(TypeError):
        Model(lambda x: x)
    with pytest.raises(ValueError, match="reduction='none'"):
        Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True), nn.SGD(net.trainable_params(),
                                                                          0.1))
    with pytest.raises(TypeError):
        Model(net, nn.CrossEntropyLoss(), optimizer="sgd")
    with pytest.raises(ValueError):
        Model(net, amp_level="O7")  # O1-O3: test_mindspore_train
    with pytest.raises(ValueError):
        Model(net, eval_network=net)
    with pytest.raises(ValueError, match="loss_fn and optimizer"):
        Model(net).train(1, fmnist(fashion_mnist, "train", 32))
    with pytest.raises(ValueError, match="metrics"):
        Model(net).eval(fmnist(fashion_mnist, "test", 32))
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1))
    with pytest.raises(TypeError, match="Dataset"):
        model.train(1, [1, 2, 3])
    with pytest.raises(ValueError):
        model.predict()
    bad = ds.NumpySlicesDataset((np.zeros((4, 3), np.float32), np.zeros(4, np.int64)),
                                ["x", "y"]).batch(2)
    with pytest.raises(zenith.Error, match=r"\[Dense\]|\[linear\]|\[matmul\]"):
        model.train(1, bad)
    nan = ds.NumpySlicesDataset((np.full((4, 1, 28, 28), np.nan, np.float32),
                                 np.zeros(4, np.int64)), ["x", "y"]).batch(2)
    with pytest.raises(zenith.Error, match="loss is nan"):
        model.train(1, nan)


def test_run_context_is_a_plain_object():
    class Fake:
        epoch = 1
        stop_requested = False

        def request_stop(self, reason):
            self.stop_requested = True

    ctx = RunContext(Fake())
    assert ctx.original_args().cur_epoch_num == 1
    ctx.request_stop()
    assert ctx.get_stop_requested()
    cb = Callback()
    for name in ("begin", "epoch_begin", "step_begin", "step_end", "epoch_end", "end",
                 "on_train_begin", "on_train_epoch_begin", "on_train_step_begin",
                 "on_train_step_end", "on_train_epoch_end", "on_train_end", "on_eval_end"):
        getattr(cb, name)(ctx)
    with cb as entered:
        assert entered is cb
