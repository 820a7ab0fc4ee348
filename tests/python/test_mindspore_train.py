"""MindSpore training APIs added for MindSpore's tutorials (issue 41), checked against numpy and
PyTorch: MnistDataset's usage semantics, optimizer parameter groups and a Cell weight_decay,
ParameterTuple.clone, mindspore.experimental.optim and its schedulers, callbacks'
original_args, ModelCheckpoint's end file, Model.fit's 'Eval result' line, Model(amp_level=)."""

import os

import numpy as np
import pytest
import torch

import zenith
from zenith import Parameter, Tensor, nn, ops
from zenith.dataset import MnistDataset
from zenith.experimental import optim
from zenith.train import Callback, LossMonitor, Model, ModelCheckpoint


def _load_download():
    """The tutorials' harness module that lays out MNIST_Data/{train,test} from Fashion-MNIST
    (loaded by path: its folder also holds a stand-in matplotlib, kept off sys.path here)."""
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "mindspore_tutorials", "_harness",
                        "download.py")
    spec = importlib.util.spec_from_file_location("_ms_tutorial_download", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


download = _load_download()

F32 = np.float32


@pytest.fixture(scope="module")
def mnist_data(tmp_path_factory):
    return download.lay_out_mnist(str(tmp_path_factory.mktemp("ms")))


def count(ds):
    return sum(1 for _ in ds.create_tuple_iterator())


def test_mnist_usage_reads_the_splits_the_folder_holds(mnist_data, fashion_mnist):
    train, test = os.path.join(mnist_data, "train"), os.path.join(mnist_data, "test")
    assert count(MnistDataset(train, shuffle=False)) == download.MNIST_TRAIN_IMAGES
    assert count(MnistDataset(test, shuffle=False)) == download.MNIST_TEST_IMAGES
    assert count(MnistDataset(test, usage="test")) == download.MNIST_TEST_IMAGES
    assert count(MnistDataset(train, usage="all")) == download.MNIST_TRAIN_IMAGES
    with pytest.raises(zenith.Error, match="t10k-images-idx3-ubyte"):
        MnistDataset(train, usage="test")
    with pytest.raises(zenith.Error, match="unknown usage 'val'"):
        MnistDataset(train, usage="val")
    # The full Debian folder: all = train + test, in that order.
    both = MnistDataset(fashion_mnist, shuffle=False).get_dataset_size()
    assert both == 70000
    image, label = next(MnistDataset(test, shuffle=False).create_tuple_iterator())
    assert image.shape == (28, 28, 1) and int(label) == 9  # Fashion-MNIST's first test label


def test_empty_folder_names_both_splits(tmp_path):
    with pytest.raises(zenith.Error, match="neither train-images-idx3-ubyte nor t10k"):
        MnistDataset(str(tmp_path))


def _params(rng, shapes):
    return [Parameter(Tensor(rng.normal(size=s).astype(F32)), name=f"p{i}")
            for i, s in enumerate(shapes)]


def test_parameter_groups_match_torch_sgd_groups(rng):
    w, b = _params(rng, [(3, 2), (2,)])
    wt, bt = (torch.tensor(p.asnumpy(), requires_grad=True) for p in (w, b))
    opt = nn.Momentum([{"params": [w], "weight_decay": 0.01, "lr": 0.05}, {"params": [b]}],
                      learning_rate=0.1, momentum=0.9)
    ref = torch.optim.SGD([{"params": [wt], "weight_decay": 0.01, "lr": 0.05},
                           {"params": [bt]}], lr=0.1, momentum=0.9)
    assert opt.is_group and len(opt.parameters) == 2
    for step in range(3):
        gw, gb = rng.normal(size=(3, 2)).astype(F32), rng.normal(size=(2,)).astype(F32)
        opt((Tensor(gw), Tensor(gb)))
        wt.grad, bt.grad = torch.tensor(gw), torch.tensor(gb)
        ref.step()
    np.testing.assert_allclose(w.asnumpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.asnumpy(), bt.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="parameter groups"):
        Model(nn.Dense(2, 2), nn.MSELoss(), opt)


def test_cell_weight_decay_is_called_with_the_step(rng):
    class Decay(nn.Cell):
        def construct(self, global_step):
            return 0.1 * ops.pow(0.5, global_step.astype(zenith.float32))

    (p,) = _params(rng, [(4,)])
    start = p.asnumpy().copy()
    opt = nn.SGD([p], learning_rate=0.1, weight_decay=Decay())
    grads = [rng.normal(size=(4,)).astype(F32) for _ in range(3)]
    for g in grads:
        opt((Tensor(g),))
    want = start
    for step, g in enumerate(grads):
        want = want - 0.1 * (g + 0.1 * 0.5 ** step * want)
    np.testing.assert_allclose(p.asnumpy(), want, rtol=1e-5)


def test_parameter_tuple_clone_and_parameter_value(rng):
    ps = zenith.ParameterTuple(_params(rng, [(2, 2), (3,)]))
    moments = ps.clone(prefix="moments", init="zeros")
    assert [m.name for m in moments] == ["moments.p0", "moments.p1"]
    assert all(not m.asnumpy().any() for m in moments)
    assert [m.shape for m in moments] == [(2, 2), (3,)]
    same = ps.clone("copy")
    np.testing.assert_array_equal(same[0].asnumpy(), ps[0].asnumpy())
    assert not same[0]._same(ps[0])
    assert ps[0].value() is ps[0]


@pytest.mark.parametrize("name,kwargs", [
    ("Adam", dict(lr=0.1)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.88), eps=1e-6, weight_decay=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.05, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.2)),
])
def test_experimental_optimizers_match_torch(rng, name, kwargs):
    w, b = _params(rng, [(3, 2), (2,)])
    ref_params = [torch.tensor(p.asnumpy(), requires_grad=True) for p in (w, b)]
    opt = getattr(optim, name)([{"params": [w]}, {"params": [b], "lr": 0.02}], **kwargs)
    ref = getattr(torch.optim, name)([{"params": ref_params[:1]},
                                      {"params": ref_params[1:], "lr": 0.02}], **kwargs)
    for _ in range(4):
        grads = [rng.normal(size=p.shape).astype(F32) for p in (w, b)]
        opt(tuple(Tensor(g) for g in grads))
        for rp, g in zip(ref_params, grads):
            rp.grad = torch.tensor(g)
        ref.step()
    for p, rp in zip((w, b), ref_params):
        np.testing.assert_allclose(p.asnumpy(), rp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_param_group_lr_is_a_parameter_assign_changes(rng):
    (w,) = _params(rng, [(2,)])
    opt = optim.SGD([w], lr=0.1)
    ops.assign(opt.param_groups[0]["lr"], Tensor(0.5))
    before = w.asnumpy().copy()
    opt((Tensor(np.ones(2, F32)),))
    np.testing.assert_allclose(w.asnumpy(), before - 0.5, rtol=1e-6)
    assert "Parameter Group 0" in repr(opt) and "lr: 0.5" in repr(opt)


@pytest.mark.parametrize("make,ref", [
    (lambda o: optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
     lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)),
    (lambda o: optim.lr_scheduler.MultiStepLR(o, [2, 5], 0.1),
     lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [2, 5], 0.1)),
    (lambda o: optim.lr_scheduler.ExponentialLR(o, 0.9),
     lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.9)),
    (lambda o: optim.lr_scheduler.CosineAnnealingLR(o, 4, 0.01),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 4, 0.01)),
])
def test_lr_schedulers_match_torch(rng, make, ref):
    (w,) = _params(rng, [(2,)])
    ours = make(optim.Adam([w], lr=0.1))
    theirs = ref(torch.optim.Adam([torch.zeros(2, requires_grad=True)], lr=0.1))
    for _ in range(8):
        np.testing.assert_allclose(float(ours.get_last_lr()[0].asnumpy()),
                                   theirs.get_last_lr()[0], rtol=1e-6)
        ours.step()
        theirs.optimizer.step()
        theirs.step()


def _mnist_pipeline(path):
    from zenith.dataset import transforms, vision
    ds = MnistDataset(path, shuffle=False)
    ds = ds.map([vision.Rescale(1 / 255, 0), vision.HWC2CHW()], "image")
    ds = ds.map(transforms.TypeCast(zenith.int32), "label")
    return ds.take(256).batch(64)


def _mlp():
    return nn.SequentialCell(nn.Flatten(), nn.Dense(784, 32), nn.ReLU(), nn.Dense(32, 10))


def test_callbacks_keep_one_original_args_and_checkpoint_at_the_end(mnist_data, tmp_path,
                                                                    capfd):
    seen = []

    class Mark(Callback):
        def on_train_begin(self, run_context):
            run_context.original_args().marker = "set in on_train_begin"

        def on_train_step_end(self, run_context):
            p = run_context.original_args()
            seen.append((p.marker, p.cur_epoch_num, p.cur_step_num))

    net = _mlp()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.01),
                  metrics={"accuracy"})
    data = _mnist_pipeline(os.path.join(mnist_data, "train"))
    ckpt = ModelCheckpoint(prefix="mnist", directory=str(tmp_path),
                           config=zenith.train.CheckpointConfig(save_checkpoint_steps=1875))
    model.train(2, data, callbacks=[Mark(), ckpt])
    assert seen == [("set in on_train_begin", e, s) for e, s in
                    [(1, 1), (1, 2), (1, 3), (1, 4), (2, 5), (2, 6), (2, 7), (2, 8)]]
    assert sorted(os.listdir(tmp_path)) == ["mnist-2_4.ckpt"]
    restored = _mlp()
    zenith.load_param_into_net(restored, zenith.load_checkpoint(str(tmp_path / "mnist-2_4.ckpt")))
    np.testing.assert_array_equal(restored[1].weight.asnumpy(), net[1].weight.asnumpy())
    capfd.readouterr()
    model.fit(1, data, _mnist_pipeline(os.path.join(mnist_data, "test")),
              callbacks=[LossMonitor(2)])
    out = capfd.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("Eval result: epoch 1, ")]
    assert len(lines) == 1 and lines[0].startswith("Eval result: epoch 1, metrics: {'accuracy': ")
    assert "epoch: 1 step: 2, loss is" in out


def test_model_amp_level_and_loss_scale_manager_train(mnist_data):
    from zenith.amp import FixedLossScaleManager
    net = _mlp()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.05),
                  metrics={"accuracy"}, amp_level="O2",
                  loss_scale_manager=FixedLossScaleManager())
    data = _mnist_pipeline(os.path.join(mnist_data, "train"))
    model.train(3, data)
    losses = [h["loss"] for h in model.history]
    assert losses[-1] < losses[0]
    assert net(Tensor(np.zeros((1, 1, 28, 28), F32))).dtype == zenith.float32
    with pytest.raises(ValueError, match="unknown argument"):
        Model(_mlp(), nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.05), colour=1)


# ---- dataset.text and datasets of strings


def test_text_tokenizer_vocab_and_lookup_as_mindspore():
    from zenith.dataset import GeneratorDataset, text
    ds = GeneratorDataset(["Welcome to Beijing", "to to Beijing"], "text")
    ds = ds.map(text.PythonTokenizer(lambda s: s.split()))
    first = next(ds.create_tuple_iterator())
    assert first[0].tolist() == ["Welcome", "to", "Beijing"]
    vocab = text.Vocab.from_dataset(ds)
    # most frequent first; equal counts in lexicographic order (as MindSpore's)
    assert vocab.vocab() == {"to": 0, "Beijing": 1, "Welcome": 2}
    assert text.Vocab.from_dataset(ds, top_k=2, special_tokens=["<unk>"]).vocab() == \
        {"<unk>": 0, "to": 1, "Beijing": 2}
    ids = [row[0] for row in ds.map(text.Lookup(vocab)).create_tuple_iterator()]
    assert ids[0].dtype == zenith.int32 and ids[0].asnumpy().tolist() == [2, 0, 1]
    assert ids[1].asnumpy().tolist() == [0, 0, 1]
    small = text.Vocab.from_list(["a", "b"], special_tokens=["<unk>"], special_first=False)
    assert small.vocab() == {"a": 0, "b": 1, "<unk>": 2}
    assert small.tokens_to_ids(["b", "zz"]) == [1, -1] and small.ids_to_tokens([2]) == ["<unk>"]
    lookup = text.Lookup(small, unknown_token="<unk>")
    assert lookup(np.array(["a", "zz"])).asnumpy().tolist() == [0, 2]
    with pytest.raises(ValueError, match="not in the vocab"):
        text.Lookup(small)(np.array(["zz"]))


def test_string_rows_pipeline():
    from zenith.dataset import GeneratorDataset
    ds = GeneratorDataset([("a", 1), ("bb", 2), ("ccc", 3)], ["word", "n"])
    assert ds.get_col_names() == ["word", "n"] and ds.get_dataset_size() == 3
    lengths = ds.map(lambda w: np.array(len(str(w)), np.int64), "word")
    assert [int(r[0]) for r in lengths.create_tuple_iterator()] == [1, 2, 3]
    batched = list(lengths.batch(2).create_tuple_iterator(output_numpy=True))
    assert [b[1].tolist() for b in batched] == [[1, 2], [3]]
    assert [r["word"].item() for r in ds.skip(1).take(1).create_dict_iterator()] == ["bb"]
    assert ds.repeat(2).get_dataset_size() == 6
    assert sorted(str(r[0]) for r in ds.shuffle(4)) == ["a", "bb", "ccc"]


# ---- metrics, History, LambdaCallback


def test_regression_metrics_match_numpy(rng):
    from zenith.train import MAE, MSE
    p, y = rng.normal(size=(6, 3)).astype(F32), rng.normal(size=(6, 3)).astype(F32)
    mae, mse = MAE(), MSE()
    for a, b in ((p[:4], y[:4]), (p[4:], y[4:])):
        mae.update(Tensor(a), Tensor(b))
        mse.update(Tensor(a), Tensor(b))
    np.testing.assert_allclose(mae.eval(), np.abs(p - y).sum(1).mean(), rtol=1e-5)
    np.testing.assert_allclose(mse.eval(), ((p - y) ** 2).sum(1).mean(), rtol=1e-5)
    mae.clear()
    with pytest.raises(RuntimeError, match="no samples"):
        mae.eval()


def test_classification_metrics_match_their_definitions(rng):
    from zenith.train import F1, ConfusionMatrix, Fbeta, Precision, Recall, get_metric_fn
    logits = rng.normal(size=(40, 3)).astype(F32)
    labels = rng.integers(0, 3, 40)
    pred = logits.argmax(1)
    cm = np.zeros((3, 3))
    np.add.at(cm, (labels, pred), 1)
    tp, fp, fn = np.diag(cm), cm.sum(0) - np.diag(cm), cm.sum(1) - np.diag(cm)
    metrics = {m: m_cls() for m, m_cls in (("p", Precision), ("r", Recall), ("f1", F1))}
    matrix = ConfusionMatrix(3)
    f2 = Fbeta(2.0)
    for m in list(metrics.values()) + [matrix, f2]:
        m.update(Tensor(logits), Tensor(labels))
    prec, rec = tp / (tp + fp), tp / (tp + fn)
    np.testing.assert_allclose(metrics["p"].eval(), prec)
    np.testing.assert_allclose(metrics["r"].eval(), rec)
    np.testing.assert_allclose(metrics["f1"].eval(), 2 * prec * rec / (prec + rec))
    np.testing.assert_allclose(metrics["f1"].eval(average=True), (2 * prec * rec /
                                                                 (prec + rec)).mean())
    np.testing.assert_allclose(f2.eval(), 5 * prec * rec / (4 * prec + rec))
    np.testing.assert_array_equal(matrix.eval(), cm)
    normalized = ConfusionMatrix(3, "target")
    normalized.update(Tensor(logits), Tensor(labels))
    np.testing.assert_allclose(normalized.eval(), cm / cm.sum(1, keepdims=True))
    assert isinstance(get_metric_fn("precision"), Precision)
    assert "accuracy" in zenith.train.names()


def test_similarity_perplexity_dice_and_rearranged_inputs():
    from zenith.train import CosineSimilarity, Dice, Perplexity, rearrange_inputs
    cs = CosineSimilarity()
    x = np.array([[1.0, 0.0], [1.0, 1.0]], F32)
    cs.update(Tensor(x))
    np.testing.assert_allclose(cs.eval(), [[0, 1 / np.sqrt(2)], [1 / np.sqrt(2), 0]], rtol=1e-6)
    pp = Perplexity()
    probs = np.array([[0.2, 0.8], [0.6, 0.4]], F32)
    pp.update(Tensor(probs), Tensor(np.array([1, 0])))
    np.testing.assert_allclose(pp.eval(), np.exp(-(np.log(0.8) + np.log(0.6)) / 2), rtol=1e-5)
    dice = Dice(smooth=0.0)
    dice.update(Tensor(np.array([1.0, 1.0, 0.0], F32)), Tensor(np.array([1.0, 0.0, 0.0], F32)))
    assert dice.eval() == pytest.approx(2 * 1 / 3)

    class Swapped(zenith.train.MAE):
        @rearrange_inputs
        def update(self, *inputs):
            super().update(*inputs)

    m = Swapped().set_indexes([1, 0])
    m.update(Tensor(np.zeros((1, 2), F32)), Tensor(np.ones((1, 2), F32)))
    assert m.eval() == 2.0


def test_history_and_lambda_callback(mnist_data):
    from zenith.train import History, LambdaCallback
    net = _mlp()
    model = Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.05))
    steps = []
    history = History()
    model.train(2, _mnist_pipeline(os.path.join(mnist_data, "train")),
                callbacks=[history, LambdaCallback(
                    on_train_step_end=lambda rc: steps.append(rc.original_args().cur_step_num))])
    assert history.epoch == [1, 2] and len(history.history["net_output"]) == 2
    assert steps == list(range(1, 9))


# ---- samplers and more dataset sources


def _labels(ds):
    return [int(row[-1].asnumpy()) for row in ds.create_tuple_iterator()]


def test_samplers_pick_the_items_mindspore_picks(fashion_mnist):
    from zenith.dataset import (DistributedSampler, FashionMnistDataset, RandomSampler,
                                SequentialSampler, SubsetRandomSampler, SubsetSampler)
    first = _labels(FashionMnistDataset(fashion_mnist, "test", shuffle=False).take(12))
    assert _labels(FashionMnistDataset(fashion_mnist, "test",
                                       sampler=SequentialSampler(2, 5))) == first[2:7]
    assert _labels(FashionMnistDataset(fashion_mnist, "test",
                                       sampler=SubsetSampler([5, 0, 3]))) == \
        [first[5], first[0], first[3]]
    picked = _labels(FashionMnistDataset(fashion_mnist, "test",
                                         sampler=SubsetRandomSampler(range(10))))
    assert sorted(picked) == sorted(first[:10])
    shuffled = FashionMnistDataset(fashion_mnist, "test", sampler=RandomSampler(num_samples=20))
    assert shuffled.get_dataset_size() == 20
    shard = FashionMnistDataset(fashion_mnist, "test",
                                sampler=DistributedSampler(4, 1, shuffle=False))
    assert shard.get_dataset_size() == 2500
    with pytest.raises(ValueError, match="replacement"):
        RandomSampler(replacement=True)
    with pytest.raises(ValueError, match="without shuffle"):
        FashionMnistDataset(fashion_mnist, "test", shuffle=True, sampler=SequentialSampler())


def test_kmnist_reads_the_mnist_layout(mnist_data):
    from zenith.dataset import KMnistDataset
    test = os.path.join(mnist_data, "test")
    assert _labels(KMnistDataset(test, shuffle=False).take(5)) == \
        _labels(MnistDataset(test, shuffle=False).take(5))


def test_cifar100_fake_random_padded_sources(tmp_path):
    from zenith.dataset import Cifar100Dataset, FakeImageDataset, PaddedDataset, RandomDataset
    rng = np.random.default_rng(0)
    records = rng.integers(0, 256, (5, 3074), dtype=np.uint8)
    records[:, 0], records[:, 1] = np.arange(5) % 20, np.arange(5) * 7 % 100
    records.tofile(tmp_path / "train.bin")
    ds = Cifar100Dataset(str(tmp_path), "train", shuffle=False)
    assert ds.get_col_names() == ["image", "coarse_label", "fine_label"]
    rows = list(ds.create_tuple_iterator(output_numpy=True))
    assert len(rows) == 5 and rows[3][2] == 21 and rows[3][1] == 3
    np.testing.assert_array_equal(rows[1][0], records[1, 2:].reshape(3, 32, 32).transpose(1, 2, 0))
    with pytest.raises(FileNotFoundError, match="test.bin"):
        Cifar100Dataset(str(tmp_path), "test")
    fake = FakeImageDataset(6, (4, 4, 3), 3, shuffle=False)
    images = [r[0] for r in fake.create_tuple_iterator(output_numpy=True)]
    assert len(images) == 6 and images[0].shape == (4, 4, 3) and images[0].dtype == np.uint8
    assert RandomDataset(7, columns_list=["a", "b"]).get_col_names() == ["a", "b"]
    assert RandomDataset(7, shuffle=False).get_dataset_size() == 7
    padded = PaddedDataset([{"image": np.zeros(2, F32), "label": 1},
                            {"image": np.ones(2, F32), "label": 2}])
    assert [int(r[1]) for r in padded.create_tuple_iterator()] == [1, 2]


def test_text_file_and_csv_datasets(tmp_path):
    from zenith.dataset import CSVDataset, TextFileDataset
    (tmp_path / "a.txt").write_text("Welcome to Beijing\n\nhello world\n")
    lines = TextFileDataset(str(tmp_path / "a.txt"))
    assert [str(r[0]) for r in lines.create_tuple_iterator(output_numpy=True)] == \
        ["Welcome to Beijing", "hello world"]
    (tmp_path / "t.csv").write_text("x,y,name\n1,0.5,a\n2,1.5,b\n3,2.0,c\n")
    table = CSVDataset(str(tmp_path / "t.csv"))
    assert table.get_col_names() == ["x", "y", "name"]
    rows = list(table.create_tuple_iterator(output_numpy=True))
    assert [int(r[0]) for r in rows] == [1, 2, 3] and rows[0][0].dtype == np.int64
    assert [float(r[1]) for r in rows] == [0.5, 1.5, 2.0] and rows[0][1].dtype == np.float32
    assert [str(r[2]) for r in rows] == ["a", "b", "c"]
    assert CSVDataset(str(tmp_path / "t.csv"), num_shards=2, shard_id=1).get_dataset_size() == 1


# ---- learning-rate callbacks, ROC, auc, log settings


def test_learning_rate_scheduler_and_reduce_on_plateau(mnist_data):
    from zenith.train import LearningRateScheduler, ReduceLROnPlateau
    net = _mlp()
    opt = nn.SGD(net.trainable_params(), 0.1)
    model = Model(net, nn.CrossEntropyLoss(), opt)
    seen = []

    def halve_every_4(lr, step):
        seen.append((round(lr, 6), step))
        return lr * 0.5 if step % 4 == 0 else lr

    model.train(1, _mnist_pipeline(os.path.join(mnist_data, "train")),
                callbacks=[LearningRateScheduler(halve_every_4)])
    assert seen == [(0.1, 1), (0.1, 2), (0.1, 3), (0.1, 4)]
    assert float(opt.get_lr().asnumpy()) == pytest.approx(0.05)
    plateau = ReduceLROnPlateau("loss", factor=0.5, patience=1, min_delta=100.0)
    model.train(3, _mnist_pipeline(os.path.join(mnist_data, "train")), callbacks=[plateau])
    # no epoch improves the loss by 100: the rate halves after epochs 2 and 3
    assert float(opt.get_lr().asnumpy()) == pytest.approx(0.05 * 0.25)
    assert zenith.LearningRateScheduler is LearningRateScheduler
    assert zenith.History is zenith.train.History and zenith.LambdaCallback is \
        zenith.train.LambdaCallback and zenith.ReduceLROnPlateau is ReduceLROnPlateau


def test_roc_auc_and_log_settings(monkeypatch):
    from zenith.train import ROC, auc
    roc = ROC(pos_label=1)
    scores = np.array([0.1, 0.4, 0.35, 0.8], F32)
    roc.update(Tensor(scores), Tensor(np.array([0, 0, 1, 1])))
    fpr, tpr, thresholds = roc.eval()
    # the classic example: thresholds 0.8, 0.4, 0.35, 0.1
    np.testing.assert_allclose(fpr, [0, 0, 0.5, 0.5, 1])
    np.testing.assert_allclose(tpr, [0, 0.5, 0.5, 1, 1])
    np.testing.assert_allclose(thresholds[1:], [0.8, 0.4, 0.35, 0.1], rtol=1e-6)
    assert auc(fpr, tpr) == pytest.approx(0.75)
    assert auc([1, 0], [1, 0], reorder=True) == pytest.approx(0.5)
    monkeypatch.setenv("GLOG_v", "1")
    assert zenith.get_level() == "1" and zenith.get_log_config()["GLOG_v"] == "1"
