"""zenith.uint32 (MindSpore's UInt32): MnistDataset's and Cifar10Dataset's labels come out as
MindSpore gives them, and what MindSpore programs do with them works."""

import gzip
import os

import numpy as np
import pytest
import torch

import zenith
from zenith import Tensor, nn, ops
import zenith.dataset as ds
from zenith.dataset import transforms

from conftest import write_cifar


def _idx_labels(folder, split):
    with gzip.open(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz")) as f:
        return np.frombuffer(f.read(), np.uint8, offset=8)


def test_mnist_labels_are_uint32_as_mindspores(fashion_mnist):
    data = ds.MnistDataset(fashion_mnist, usage="test", shuffle=False)
    assert data.output_types() == [zenith.uint8, zenith.uint32]
    assert repr(zenith.uint32) == "UInt32" and str(data.output_types()[1]) == "UInt32"
    _, label = next(data.create_tuple_iterator())
    assert label.dtype == zenith.uint32 and label.itemsize == 4 and label.shape == ()
    assert repr(label) == "Tensor(shape=[], dtype=UInt32, value= 9)"
    want = _idx_labels(fashion_mnist, "t10k")[:64]
    batches = data.batch(32)
    labels = [row["label"] for row in batches.create_dict_iterator(num_epochs=1)][:2]
    assert all(b.dtype == zenith.uint32 and b.shape == (32,) for b in labels)
    np.testing.assert_array_equal(np.concatenate([b.asnumpy() for b in labels]), want)
    numpy_row = next(batches.create_tuple_iterator(output_numpy=True))
    assert numpy_row[1].dtype == np.uint32 and numpy_row[0].dtype == np.uint8
    np.testing.assert_array_equal(numpy_row[1], want[:32])
    # indexing and iterating keep the dtype, as MindSpore's
    assert labels[0][3].dtype == zenith.uint32 and labels[0][3].item() == int(want[3])
    assert [t.dtype for t in labels[0]][:2] == [zenith.uint32, zenith.uint32]
    assert labels[0][1:4].dtype == zenith.uint32
    assert np.asarray(labels[0]).dtype == np.uint32


def test_typecast_changes_the_column_type(fashion_mnist):
    data = ds.FashionMnistDataset(fashion_mnist, usage="test", shuffle=False).batch(8)
    as_int = data.map(transforms.TypeCast(zenith.int32), "label")
    assert as_int.output_types() == [zenith.uint8, zenith.int32]
    label = next(as_int.create_dict_iterator())["label"]
    assert label.dtype == zenith.int32
    back = as_int.map(transforms.TypeCast(zenith.uint32), "label")
    assert back.output_types()[1] == zenith.uint32
    assert next(back.create_dict_iterator())["label"].dtype == zenith.uint32
    eager = transforms.TypeCast(zenith.uint32)(np.array([1, 2], np.int64))
    assert eager.dtype == np.uint32 and eager.tolist() == [1, 2]


def test_cifar10_labels_are_uint32(tmp_path):
    folder = write_cifar(str(tmp_path / "cifar-10-batches-bin"))
    data = ds.Cifar10Dataset(folder, usage="test", shuffle=False)
    assert data.output_types() == [zenith.uint8, zenith.uint32]
    labels = [row["label"] for row in data.create_dict_iterator(num_epochs=1)]
    assert [t.dtype for t in labels] == [zenith.uint32] * 4
    assert [t.item() for t in labels] == [5, 6, 7, 8]  # test_batch.bin is file 5: (5 + r) % 10


def test_numpy_uint32_columns_stay_uint32(rng):
    y = rng.integers(0, 10, 6).astype(np.uint32)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    sliced = ds.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False)
    generated = ds.GeneratorDataset([(x[i], y[i]) for i in range(6)], ["x", "y"], shuffle=False)
    typed = ds.GeneratorDataset([(x[i], y[i].astype(np.int64)) for i in range(6)], ["x", "y"],
                                column_types=[zenith.float32, zenith.uint32], shuffle=False)
    for data in (sliced, generated, typed):
        assert data.output_types() == [zenith.float32, zenith.uint32]
        out = np.stack([r[1] for r in data.create_tuple_iterator(output_numpy=True)])
        assert out.dtype == np.uint32
        np.testing.assert_array_equal(out, y)


def test_losses_and_one_hot_take_uint32_labels(fashion_mnist, rng):
    data = ds.MnistDataset(fashion_mnist, usage="test", shuffle=False).batch(16)
    label = next(data.create_dict_iterator())["label"]
    logits = rng.standard_normal((16, 10)).astype(np.float32)
    want = torch.nn.functional.cross_entropy(torch.from_numpy(logits),
                                             torch.from_numpy(label.asnumpy().astype(np.int64)))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    got = loss(Tensor(logits), label)
    assert got.asnumpy() == pytest.approx(want.item(), rel=1e-5)
    assert got.asnumpy() == loss(Tensor(logits), label.astype(zenith.int32)).asnumpy()
    hot = ops.one_hot(label, 10, Tensor(1.0), Tensor(0.0))
    np.testing.assert_array_equal(hot.asnumpy(), np.eye(10, dtype=np.float32)[label.asnumpy()])
    # gradients flow to the logits as with int32 labels
    grad_fn = zenith.grad(lambda z, y: loss(z, y))
    np.testing.assert_allclose(grad_fn(Tensor(logits), label).asnumpy(),
                               grad_fn(Tensor(logits), label.astype(zenith.int32)).asnumpy())


def test_casts_to_uint32_convert_as_numpy():
    values = np.array([-1, 0, 7, 2**32 + 3])
    t = Tensor(values).astype(zenith.uint32)
    assert t.dtype == zenith.uint32
    np.testing.assert_array_equal(t.asnumpy(), values.astype(np.uint32))
    assert ops.cast(Tensor(np.array([1.9, 3.0], np.float32)), zenith.uint32).asnumpy().tolist() \
        == [1, 3]
    assert t.astype(zenith.uint32) is t
    back = t.astype(zenith.int64)
    assert back.dtype == zenith.int64 and back.asnumpy().tolist() == [2**32 - 1, 0, 7, 3]
    # ops compute on the values (zenith's results are int64; MindSpore's would stay UInt32)
    assert (t + 1).asnumpy().tolist() == [2**32, 1, 8, 4]


def test_tensor_of_numpy_uint32_and_dtype_uint32():
    t = Tensor(np.array([3, 4000000000], np.uint32))
    assert t.dtype == zenith.uint32 and isinstance(t, Tensor)
    assert t.asnumpy().dtype == np.uint32 and t.asnumpy().tolist() == [3, 4000000000]
    assert repr(Tensor([5, -1], zenith.uint32)) == \
        "Tensor(shape=[2], dtype=UInt32, value= [         5 4294967295])"
    z = Tensor(shape=(2, 3), dtype=zenith.uint32, init="zeros")
    assert z.dtype == zenith.uint32 and z.shape == (2, 3) and z.asnumpy().sum() == 0
    assert Tensor(np.ones(2, np.float32)).dtype == zenith.float32  # others as before
