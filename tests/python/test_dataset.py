"""zenith.dataset: the sources (Fashion-MNIST from Debian's package, CIFAR-10 binary files,
image folders, Python sources, numpy slices), map with C++ and Python transforms, shuffle,
batch, iterators, sharding, vision/transforms, and errors raised by Python sources."""

import os

import numpy as np
import pytest

import zenith
import zenith.dataset as ds
from conftest import write_cifar
from zenith import Tensor
from zenith.dataset import transforms, vision


def test_fashion_mnist_reads_debians_files(fashion_mnist):
    train = ds.FashionMnistDataset(fashion_mnist, usage="train", shuffle=False)
    test = ds.FashionMnistDataset(usage="test", shuffle=False)  # the Debian path by default
    assert train.get_dataset_size() == 60000 and test.get_dataset_size() == 10000
    assert train.get_col_names() == ["image", "label"]
    image, label = next(iter(train))
    assert image.shape == (28, 28, 1) and image.dtype == zenith.uint8
    assert label.dtype == zenith.uint32 and label.item() == 9  # the first training item: boot
    assert train.output_shapes() == [[28, 28, 1], []]
    assert train.output_types() == [zenith.uint8, zenith.uint32]
    assert ds.FashionMnistDataset(fashion_mnist).get_dataset_size() == 70000
    assert ds.MnistDataset(fashion_mnist, usage="test", num_samples=5).get_dataset_size() == 5


def test_pipeline_map_batch_shuffle(fashion_mnist):
    data = ds.FashionMnistDataset(fashion_mnist, usage="test", num_samples=100)
    data = data.map([vision.Rescale(1.0 / 255, 0.0), vision.Normalize([0.5], [0.5]),
                     vision.HWC2CHW()], input_columns="image", num_parallel_workers=2)
    data = data.map(transforms.TypeCast(zenith.int32), "label").batch(32)
    assert data.get_dataset_size() == 4
    batches = list(data.create_tuple_iterator())
    assert [b[0].shape for b in batches] == [(32, 1, 28, 28)] * 3 + [(4, 1, 28, 28)]
    assert batches[0][1].dtype == zenith.int32 and batches[0][0].dtype == zenith.float32
    values = batches[0][0].asnumpy()
    assert values.min() >= -1.0 and values.max() <= 1.0
    assert ds.FashionMnistDataset(fashion_mnist, usage="test", num_samples=10).batch(
        4, drop_remainder=True).get_dataset_size() == 2


def labels_of(data, epochs=1):
    it = data.create_tuple_iterator(num_epochs=epochs, output_numpy=True)
    return [[int(l) for _, l in it] for _ in range(epochs)]


def test_shuffle_is_seeded_and_differs_per_epoch(fashion_mnist):
    def make():
        zenith.set_seed(7)
        return ds.FashionMnistDataset(fashion_mnist, usage="test").take(50)

    first = labels_of(make(), 2)
    again = labels_of(make(), 2)
    assert first == again
    assert first[0] != first[1]  # a new permutation every epoch
    ordered = ds.FashionMnistDataset(fashion_mnist, usage="test", shuffle=False).take(50)
    assert labels_of(ordered)[0] != first[0]
    reshuffled = ordered.shuffle(buffer_size=10)
    assert sorted(labels_of(reshuffled)[0]) == sorted(labels_of(ordered)[0])
    with pytest.raises(ValueError):
        ordered.shuffle(0)


def test_iterators(fashion_mnist):
    data = ds.FashionMnistDataset(fashion_mnist, usage="test", num_samples=6, shuffle=False)
    rows = list(data.create_dict_iterator())
    assert len(rows) == 6 and set(rows[0]) == {"image", "label"}
    assert isinstance(rows[0]["image"], Tensor)
    arrays = next(iter(data.create_dict_iterator(output_numpy=True)))
    assert isinstance(arrays["image"], np.ndarray)
    labels_only = next(iter(data.create_tuple_iterator(columns=["label"])))
    assert len(labels_only) == 1 and labels_only[0].shape == ()
    with pytest.raises(ValueError, match="unknown column"):
        data.create_tuple_iterator(columns=["pixels"])
    it = data.create_tuple_iterator(num_epochs=1)
    assert len(list(it)) == 6 and list(it) == []  # one epoch only
    it2 = data.create_tuple_iterator()
    assert it2.get_next() is not None
    it2.close()
    assert len([r for r in data]) == 6
    assert data.repeat(2).get_dataset_size() == 12
    assert data.skip(4).get_dataset_size() == 2
    assert data.take(-1) is data
    with pytest.raises(ValueError):
        data.repeat()


def test_sharding(fashion_mnist):
    shards = [ds.FashionMnistDataset(fashion_mnist, usage="test", num_samples=None, shuffle=False,
                                     num_shards=2, shard_id=i) for i in range(2)]
    assert [s.get_dataset_size() for s in shards] == [5000, 5000]
    a = labels_of(shards[0].take(10))[0]
    full = labels_of(ds.FashionMnistDataset(fashion_mnist, usage="test", shuffle=False).take(20))[0]
    assert a == full[0::2]
    with pytest.raises(ValueError):
        ds.FashionMnistDataset(fashion_mnist, num_shards=2)
    with pytest.raises(ValueError):
        ds.FashionMnistDataset(fashion_mnist, num_shards=2, shard_id=2)
    with pytest.raises(ValueError):
        ds.FashionMnistDataset(fashion_mnist, sampler=object())


def test_cifar10_binary_files(tmp_path):
    path = write_cifar(str(tmp_path / "cifar-10-batches-bin"))
    train = ds.Cifar10Dataset(path, usage="train", shuffle=False)
    assert train.get_dataset_size() == 20
    image, label = next(iter(train))
    assert image.shape == (32, 32, 3) and label.item() == 0
    assert ds.Cifar10Dataset(path).get_dataset_size() == 24
    with pytest.raises(zenith.Error, match="cifar"):
        ds.Cifar10Dataset(str(tmp_path / "missing"))


def test_image_folder(tmp_path):
    import zlib
    import struct

    def png(path, value):
        raw = b"".join(b"\x00" + bytes([value, value, value]) * 4 for _ in range(4))
        chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0,
                                                                        0))
                    + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

    for cls, value in (("cat", 10), ("dog", 200)):
        os.makedirs(tmp_path / cls)
        png(tmp_path / cls / "a.png", value)
    data = ds.ImageFolderDataset(str(tmp_path), shuffle=False).map(vision.Decode(), "image")
    rows = list(data.create_tuple_iterator(output_numpy=True))
    assert [int(l) for _, l in rows] == [0, 1]
    assert rows[1][0].shape == (4, 4, 3) and rows[1][0][0, 0, 0] == 200
    with pytest.raises(ValueError):
        ds.ImageFolderDataset(str(tmp_path), class_indexing={"cat": 1})


class Squares:
    """A random-access source: item i is (i as a 2x2 image, i^2)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full((2, 2), i, np.float32), np.int64(i * i)


def test_generator_dataset_random_access():
    data = ds.GeneratorDataset(Squares(10), ["x", "y"], shuffle=False)
    assert data.get_dataset_size() == 10 and data.get_col_names() == ["x", "y"]
    rows = list(data.create_tuple_iterator(output_numpy=True))
    assert [int(y) for _, y in rows] == [i * i for i in range(10)]
    assert rows[3][0].tolist() == [[3.0, 3.0], [3.0, 3.0]]
    shuffled = ds.GeneratorDataset(Squares(10), ["x", "y"], num_parallel_workers=2)
    ys = [int(y) for _, y in shuffled.create_tuple_iterator(output_numpy=True)]
    assert sorted(ys) == [i * i for i in range(10)] and ys != [i * i for i in range(10)]
    batched = ds.GeneratorDataset(Squares(10), ["x", "y"], shuffle=False).batch(4)
    x, y = next(iter(batched))
    assert x.shape == (4, 2, 2) and y.asnumpy().tolist() == [0, 1, 4, 9]
    typed = ds.GeneratorDataset(Squares(3), ["x", "y"], column_types=[zenith.float64,
                                                                      zenith.int32])
    x, y = next(iter(typed))
    assert x.dtype == zenith.float64 and y.dtype == zenith.int32
    assert ds.GeneratorDataset(Squares(10), ["x", "y"], num_samples=3).get_dataset_size() == 3


def test_generator_dataset_from_lists_iterables_and_functions():
    pairs = [(np.array([i], np.float32), i % 3) for i in range(6)]
    data = ds.GeneratorDataset(pairs, ["data", "label"], shuffle=False)
    assert [int(l) for _, l in data.create_tuple_iterator(output_numpy=True)] == [0, 1, 2, 0, 1, 2]

    def gen():
        for i in range(5):
            yield (np.array([i, i], np.int32),)

    from_fn = ds.GeneratorDataset(gen, ["data"])
    assert from_fn.get_dataset_size() == 5
    assert [r[0].tolist() for r in from_fn.create_tuple_iterator(output_numpy=True)][4] == [4, 4]
    from_iter = ds.GeneratorDataset(iter([1.0, 2.0]), "value")
    assert [float(v[0]) for v in from_iter.create_tuple_iterator(output_numpy=True)] == [1.0, 2.0]
    single = ds.GeneratorDataset(np.arange(12).reshape(4, 3), ["row"], shuffle=False)
    assert next(iter(single))[0].asnumpy().tolist() == [0, 1, 2]


def test_numpy_slices_dataset():
    images = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    labels = np.arange(6)
    data = ds.NumpySlicesDataset((images, labels), ["image", "label"], shuffle=False)
    assert data.get_col_names() == ["image", "label"] and data.get_dataset_size() == 6
    x, y = next(iter(data))
    assert x.asnumpy().tolist() == [[0.0, 1.0], [2.0, 3.0]] and y.item() == 0
    by_dict = ds.NumpySlicesDataset({"a": labels, "b": labels * 2}, shuffle=False)
    assert by_dict.get_col_names() == ["a", "b"]
    assert ds.NumpySlicesDataset(labels).get_col_names() == ["column_0"]
    with pytest.raises(ValueError):
        ds.NumpySlicesDataset((images, labels[:3]))
    with pytest.raises(ValueError):
        ds.NumpySlicesDataset((images, labels), ["only_one"])


def test_python_transforms_in_map():
    data = ds.GeneratorDataset(Squares(4), ["x", "y"], shuffle=False)
    data = data.map(lambda a: a * 10 + 1, "x").map([lambda y: y + 1, transforms.TypeCast(
        zenith.float32)], input_columns=["y"], output_columns=["y"])
    rows = list(data.create_tuple_iterator(output_numpy=True))
    assert rows[2][0].tolist() == [[21.0, 21.0], [21.0, 21.0]] and rows[2][1] == 5.0
    composed = transforms.Compose([vision.Rescale(2.0, 0.0), lambda a: a - 1])
    out = ds.GeneratorDataset(Squares(2), ["x", "y"], shuffle=False).map(composed, "x")
    assert next(iter(out))[0].asnumpy().tolist() == [[-1.0, -1.0], [-1.0, -1.0]]
    with pytest.raises(ValueError, match="one column"):
        data.map(lambda a: a, ["x", "y"])
    with pytest.raises(ValueError):
        data.map(lambda a: a, "x", output_columns="z")
    with pytest.raises(TypeError):
        data.map([3], "x")
    with pytest.raises(zenith.Error, match="unknown input column"):
        data.map(lambda a: a, "z")
    with pytest.raises(ValueError):
        data.batch(2, per_batch_map=lambda *a: a)
    with pytest.raises(TypeError):
        data.batch(2.5)


def test_vision_transforms_eagerly():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    np.testing.assert_allclose(vision.Rescale(0.5, 1.0)(img), img * 0.5 + 1.0)
    np.testing.assert_allclose(vision.Normalize([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])(img),
                               (img - np.array([1.0, 2.0, 3.0])) / 2.0)
    assert vision.HWC2CHW()(img).shape == (3, 2, 3)
    chw = vision.ToTensor()(img)
    assert chw.shape == (3, 2, 3) and chw.dtype == np.float32 and chw.max() <= 1.0
    assert vision.Resize((4, 6))(img).shape == (4, 6, 3)
    assert vision.Resize(4)(img).shape == (4, 6, 3)
    assert vision.RandomCrop(2)(img).shape == (2, 2, 3)
    assert vision.RandomCrop((2, 2), padding=1, fill_value=0)(img).shape == (2, 2, 3)
    flipped = [vision.RandomHorizontalFlip(1.0)(img), vision.RandomHorizontalFlip(0.0)(img)]
    np.testing.assert_array_equal(flipped[0], img[:, ::-1])
    np.testing.assert_array_equal(flipped[1], img)
    assert vision.Decode()(img) is img
    assert repr(vision.HWC2CHW()) == "HWC2CHW()"
    assert vision.Inter.BILINEAR == vision.Inter.LINEAR and vision.Border.CONSTANT
    with pytest.raises(ValueError):
        vision.RandomCrop(2, padding=(1, 2, 1, 1))
    with pytest.raises(ValueError):
        vision.RandomCrop(2, pad_if_needed=True)
    with pytest.raises(zenith.Error, match="Normalize"):
        vision.Normalize([1.0], [0.0])
    assert transforms.TypeCast(zenith.int32)(np.array([1.7]))[0] == 1


def test_config():
    ds.config.set_num_parallel_workers(3)
    assert ds.config.get_num_parallel_workers() == 3
    ds.config.set_num_parallel_workers(1)
    ds.config.set_prefetch_size(4)
    assert ds.config.get_prefetch_size() == 4
    ds.config.set_prefetch_size(2)
    ds.config.set_seed(11)
    assert ds.config.get_seed() == 11
    with pytest.raises(zenith.Error):
        ds.config.set_num_parallel_workers(0)


class Failing:
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise RuntimeError("broken sample 5")
        return np.zeros(2, np.float32)


def test_a_failing_source_raises_its_exception_with_the_item():
    data = ds.GeneratorDataset(Failing(), ["x"], shuffle=False, num_parallel_workers=2)
    got = []
    with pytest.raises(RuntimeError, match="broken sample 5") as info:
        for (x,) in data.create_tuple_iterator():
            got.append(x)
    assert len(got) == 5
    assert any("item 5" in note for note in getattr(info.value, "__notes__", []))

    def gen():
        yield (np.zeros(1),)
        raise ValueError("generator stopped")

    with pytest.raises(ValueError, match="generator stopped"):
        ds.GeneratorDataset(gen, ["x"])
    bad_rows = ds.GeneratorDataset([(1, 2, 3)], ["a", "b"])
    with pytest.raises(ValueError, match="3 column"):
        list(bad_rows)
    bad_values = ds.GeneratorDataset([(object(),)], ["a"])  # strings: test_mindspore_train
    with pytest.raises(TypeError, match="cannot make a tensor"):
        list(bad_values)
    failing_map = ds.GeneratorDataset(Squares(3), ["x", "y"]).map(lambda a: 1 / 0, "x")
    with pytest.raises(ZeroDivisionError):
        list(failing_map)
    with pytest.raises(ValueError, match="column_names"):
        ds.GeneratorDataset(Squares(3))
    with pytest.raises(TypeError):
        ds.GeneratorDataset(42, ["x"])


def _threads():
    return len(os.listdir("/proc/self/task"))


def test_abandoned_iterators_stop_their_workers():
    # Each iterator starts 2 C++ worker threads; one dropped after its first item must take them
    # with it, or 5 of them leave 10 threads running.
    import gc
    import time
    warm_up = ds.GeneratorDataset(Squares(10), ["x", "y"], num_parallel_workers=2)
    assert isinstance(warm_up, ds.Dataset)
    list(warm_up)
    gc.collect()
    baseline = _threads()
    started = 0
    for _ in range(5):
        it = iter(ds.GeneratorDataset(Squares(1000), ["x", "y"], num_parallel_workers=2))
        next(it)
        started = max(started, _threads() - baseline)
        del it
        gc.collect()
    assert started >= 2, "the iterators started no worker threads to check"
    deadline = time.monotonic() + 10
    while _threads() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _threads() <= baseline, f"{_threads() - baseline} worker threads outlived their iterators"