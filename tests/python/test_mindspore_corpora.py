"""mindspore.dataset readers of named corpora (zenith/dataset/corpora.py) on small files
written in each corpus's layout: rows, columns, usage and dtypes as MindSpore documents."""

import bz2
import os
import struct

import numpy as np
import pytest

from zenith import dataset as ds


def rows(dataset):
    return [tuple(np.asarray(v).tolist() for v in row)
            for row in dataset.create_tuple_iterator(output_numpy=True)]


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.mark.parametrize("reader,names", [
    (ds.AGNewsDataset, ["index", "title", "description"]),
    (ds.AmazonReviewDataset, ["label", "title", "content"]),
    (ds.DBpediaDataset, ["class", "title", "content"]),
    (ds.SogouNewsDataset, ["index", "title", "content"]),
    (ds.YahooAnswersDataset, ["class", "title", "content", "answer"]),
    (ds.YelpReviewDataset, ["label", "text"]),
])
def test_csv_corpora(tmp_path, reader, names):
    line = ",".join(f'"{n}, {i}"' for i, n in enumerate(names))
    write(str(tmp_path / "train.csv"), line + "\n" + line.replace(", 0", ", 9") + "\n")
    write(str(tmp_path / "test.csv"), line + "\n")
    train = reader(str(tmp_path), usage="train", shuffle=False)
    assert train.get_col_names() == names
    got = rows(train)
    assert got[0] == tuple(f"{n}, {i}" for i, n in enumerate(names)) and len(got) == 2
    assert len(rows(reader(str(tmp_path)))) == 3
    with pytest.raises(ValueError, match="usage"):
        reader(str(tmp_path), usage="valid")


def test_imdb_sst2_and_line_corpora(tmp_path):
    write(str(tmp_path / "imdb/train/pos/0_9.txt"), "great film")
    write(str(tmp_path / "imdb/train/neg/1_2.txt"), "dull")
    got = rows(ds.IMDBDataset(str(tmp_path / "imdb"), "train", shuffle=False))
    assert got == [("great film", 1), ("dull", 0)]
    write(str(tmp_path / "sst/train.tsv"), "sentence\tlabel\nit 's fine\t1\nbad\t0\n")
    write(str(tmp_path / "sst/test.tsv"), "index\tsentence\n0\twhat\n")
    assert rows(ds.SST2Dataset(str(tmp_path / "sst"), shuffle=False)) == [("it 's fine", 1),
                                                                           ("bad", 0)]
    assert rows(ds.SST2Dataset(str(tmp_path / "sst"), "test")) == [("what",)]
    write(str(tmp_path / "ptb/ptb.train.txt"), " a b\n c\n")
    write(str(tmp_path / "ptb/ptb.valid.txt"), " d\n")
    assert rows(ds.PennTreebankDataset(str(tmp_path / "ptb"), "train", shuffle=False)) == [
        (" a b",), (" c",)]
    assert len(rows(ds.PennTreebankDataset(str(tmp_path / "ptb")))) == 3
    write(str(tmp_path / "wiki/wiki.test.tokens"), "= T =\n")
    assert rows(ds.WikiTextDataset(str(tmp_path / "wiki"), "test")) == [("= T =",)]
    write(str(tmp_path / "enwik9"), "<mediawiki>\n<page>\n")
    assert rows(ds.EnWik9Dataset(str(tmp_path), shuffle=False)) == [("<mediawiki>",),
                                                                     ("<page>",)]


def test_tagged_and_parallel_corpora(tmp_path):
    write(str(tmp_path / "train.txt"), "He PRP B-NP\nran VBD B-VP\n\nGo VB B-VP\n")
    got = rows(ds.CoNLL2000Dataset(str(tmp_path), "train", shuffle=False))
    assert got == [(["He", "ran"], ["PRP", "VBD"], ["B-NP", "B-VP"]), (["Go"], ["VB"],
                                                                       ["B-VP"])]
    write(str(tmp_path / "ud/valid.txt"), "The\tDET\tDT\ncat\tNOUN\tNN\n\n")
    assert rows(ds.UDPOSDataset(str(tmp_path / "ud"), "valid")) == [
        (["The", "cat"], ["DET", "NOUN"], ["DT", "NN"])]
    write(str(tmp_path / "m/test.en"), "a dog\ntwo cats\n")
    write(str(tmp_path / "m/test.de"), "ein Hund\nzwei Katzen\n")
    assert rows(ds.Multi30kDataset(str(tmp_path / "m"), "test", shuffle=False)) == [
        ("a dog", "ein Hund"), ("two cats", "zwei Katzen")]
    assert rows(ds.Multi30kDataset(str(tmp_path / "m"), "test", ("de", "en"),
                                   shuffle=False))[0] == ("ein Hund", "a dog")


def idx(path, array, kind):
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, kind, array.ndim))
        f.write(struct.pack(f">{array.ndim}I", *array.shape))
        f.write(array.astype(">i4" if kind == 0x0C else np.uint8).tobytes())


def test_image_corpora(tmp_path):
    images = np.arange(3 * 28 * 28).reshape(3, 28, 28) % 256
    idx(str(tmp_path / "emnist-letters-train-images-idx3-ubyte"), images, 0x08)
    idx(str(tmp_path / "emnist-letters-train-labels-idx1-ubyte"), np.array([5, 1, 26]), 0x08)
    got = list(ds.EMnistDataset(str(tmp_path), "letters", shuffle=False)
               .create_tuple_iterator(output_numpy=True))
    assert got[2][0].shape == (28, 28, 1) and (got[2][0][..., 0] == images[2]).all()
    assert [int(r[1]) for r in got] == [5, 1, 26] and got[0][1].dtype == np.int64
    idx(str(tmp_path / "qmnist-test-images-idx3-ubyte"), images[:2], 0x08)
    idx(str(tmp_path / "qmnist-test-labels-idx2-int"), np.array([[7] + [1] * 7, [3] * 8]),
        0x0C)
    got = rows(ds.QMnistDataset(str(tmp_path), "test", shuffle=False))
    assert [r[1] for r in got] == [7, 3]
    full = rows(ds.QMnistDataset(str(tmp_path), "test", compat=False, shuffle=False))
    assert full[0][1] == [7] + [1] * 7
    pixels = np.zeros(256)
    pixels[:3] = 1
    write(str(tmp_path / "semeion.data"), " ".join(f"{v:.4f}" for v in pixels) +
          " 0 0 1 0 0 0 0 0 0 0\n")
    image, label = rows(ds.SemeionDataset(str(tmp_path), shuffle=False))[0]
    assert label == 2 and np.asarray(image)[0, :4].tolist() == [255, 255, 255, 0]
    with bz2.open(str(tmp_path / "usps.bz2"), "wt") as f:
        f.write("3 " + " ".join(f"{i + 1}:{-1 if i else 1}" for i in range(256)) + "\n")
    image, label = rows(ds.USPSDataset(str(tmp_path), "train"))[0]
    assert label == 2 and np.asarray(image)[0, 0, 0] == 255 and np.asarray(image)[0, 1, 0] == 0
