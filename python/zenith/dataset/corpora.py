"""mindspore.dataset readers for named corpora, from files already on disk in the corpus's own
layout (zenith downloads nothing): text classification CSVs (AG News, Amazon Review, DBpedia,
Sogou News, Yahoo Answers, Yelp Review), IMDB, SST-2, Penn Treebank, WikiText, EnWik9,
CoNLL-2000, UD POS, Multi30k, and the image sets EMNIST, QMNIST, Semeion and USPS.

String columns come out as numpy str arrays (zenith's pipeline carries no String tensors); the
image sets' labels are int64 (MindSpore: uint32, as zenith's MnistDataset gives them)."""

import bz2
import csv
import glob
import os

import numpy as np

__all__ = ["AGNewsDataset", "AmazonReviewDataset", "DBpediaDataset", "SogouNewsDataset",
           "YahooAnswersDataset", "YelpReviewDataset", "IMDBDataset", "SST2Dataset",
           "PennTreebankDataset", "WikiTextDataset", "EnWik9Dataset", "CoNLL2000Dataset",
           "UDPOSDataset", "Multi30kDataset", "EMnistDataset", "QMnistDataset",
           "SemeionDataset", "USPSDataset"]


def _splits(what, usage, files, allowed=("train", "test")):
    """The files of usage (None/'all': every split the folder holds), else an error naming
    what was looked for."""
    usage = "all" if usage is None else usage
    if usage != "all" and usage not in allowed:
        raise ValueError(f"{what}: usage must be one of {list(allowed) + ['all']}, "
                         f"got {usage!r}")
    wanted = allowed if usage == "all" else (usage,)
    found = [f for u in wanted for f in files(u) if os.path.exists(f)]
    if not found:
        raise RuntimeError(f"{what}: no {usage} files found (looked for "
                           f"{[f for u in wanted for f in files(u)]})")
    return found


def _rows(rows, names, num_samples=None, shuffle=None, num_shards=None, shard_id=None,
          default_shuffle=True, **_):
    """A dataset over Python rows with MindSpore's reading options."""
    from zenith.dataset import GeneratorDataset
    rows = list(rows)
    if shuffle if shuffle is not None else default_shuffle:
        from zenith.dataset import config
        np.random.default_rng(config.get_seed()).shuffle(rows)
    if num_shards is not None:
        rows = rows[shard_id::num_shards]
    if num_samples:
        rows = rows[:num_samples]
    return GeneratorDataset(rows, names, shuffle=False)


def _csv_corpus(names, what):
    def reader(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
               shuffle=None, num_shards=None, shard_id=None, cache=None):
        rows = []
        for path in _splits(what, usage, lambda u: [os.path.join(dataset_dir, f"{u}.csv")]):
            with open(path, newline="", encoding="utf-8") as f:
                rows += [tuple(np.array(v) for v in r) for r in csv.reader(f) if r]
        return _rows(rows, names, num_samples, shuffle, num_shards, shard_id)
    reader.__name__ = what
    reader.__doc__ = f"{what}: train.csv/test.csv in dataset_dir; columns {names} (str)."
    return reader


AGNewsDataset = _csv_corpus(["index", "title", "description"], "AGNewsDataset")
AmazonReviewDataset = _csv_corpus(["label", "title", "content"], "AmazonReviewDataset")
DBpediaDataset = _csv_corpus(["class", "title", "content"], "DBpediaDataset")
SogouNewsDataset = _csv_corpus(["index", "title", "content"], "SogouNewsDataset")
YahooAnswersDataset = _csv_corpus(["class", "title", "content", "answer"],
                                  "YahooAnswersDataset")
YelpReviewDataset = _csv_corpus(["label", "text"], "YelpReviewDataset")


def IMDBDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """aclImdb's {train,test}/{pos,neg}/*.txt: columns text (str) and label (uint32: 1 pos,
    0 neg)."""
    rows = []
    for split in _splits("IMDBDataset", usage, lambda u: [os.path.join(dataset_dir, u)]):
        for label, sub in ((1, "pos"), (0, "neg")):
            for path in sorted(glob.glob(os.path.join(split, sub, "*.txt"))):
                with open(path, encoding="utf-8") as f:
                    rows.append((np.array(f.read()), np.array(label, np.uint32)))
    return _rows(rows, ["text", "label"], num_samples, shuffle, num_shards, shard_id)


def SST2Dataset(dataset_dir, usage="train", num_samples=None, num_parallel_workers=None,
                shuffle=None, num_shards=None, shard_id=None, cache=None):
    """GLUE SST-2's {train,dev,test}.tsv: train/dev give sentence and label (uint32), test
    gives sentence."""
    if usage not in ("train", "dev", "test"):
        raise ValueError(f"SST2Dataset: usage must be 'train', 'dev' or 'test', got {usage!r}")
    path = os.path.join(dataset_dir, f"{usage}.tsv")
    with open(path, newline="", encoding="utf-8") as f:
        body = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    if usage == "test":
        return _rows([(np.array(r[1]),) for r in body], ["sentence"], num_samples, shuffle,
                     num_shards, shard_id)
    return _rows([(np.array(r[0]), np.array(int(r[1]), np.uint32)) for r in body],
                 ["sentence", "label"], num_samples, shuffle, num_shards, shard_id)


def _line_corpus(what, name_of, splits=("train", "test", "valid")):
    def reader(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
               shuffle=None, num_shards=None, shard_id=None, cache=None):
        rows = []
        for path in _splits(what, usage, lambda u: [os.path.join(dataset_dir, name_of(u))],
                            splits):
            with open(path, encoding="utf-8") as f:
                rows += [(np.array(line.rstrip("\n")),) for line in f]
        return _rows(rows, ["text"], num_samples, shuffle, num_shards, shard_id,
                     default_shuffle=what != "EnWik9Dataset")
    reader.__name__ = what
    reader.__doc__ = f"{what}: one row per line, column text (str)."
    return reader


PennTreebankDataset = _line_corpus("PennTreebankDataset", lambda u: f"ptb.{u}.txt")
WikiTextDataset = _line_corpus("WikiTextDataset", lambda u: f"wiki.{u}.tokens")
_enwik9 = _line_corpus("EnWik9Dataset", lambda u: "enwik9", ("all",))


def EnWik9Dataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=True,
                  num_shards=None, shard_id=None, cache=None):
    """The enwik9 file: one row per line, column text (str)."""
    return _enwik9(dataset_dir, "all", num_samples, None, shuffle, num_shards, shard_id)


def _tagged(what, names, delim, splits):
    def reader(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
               shuffle=None, num_shards=None, shard_id=None, cache=None):
        rows = []
        for path in _splits(what, usage, lambda u: [os.path.join(dataset_dir, f"{u}.txt")],
                            splits):
            sentence = []
            with open(path, encoding="utf-8") as f:
                for line in list(f) + [""]:
                    fields = line.split(delim) if line.strip() else []
                    if fields:
                        sentence.append([x.strip() for x in fields[:len(names)]])
                    elif sentence:
                        rows.append(tuple(np.array(col) for col in zip(*sentence)))
                        sentence = []
        return _rows(rows, names, num_samples, shuffle, num_shards, shard_id)
    reader.__name__ = what
    reader.__doc__ = f"{what}: one row per sentence (blank-line separated); columns {names}."
    return reader


CoNLL2000Dataset = _tagged("CoNLL2000Dataset", ["word", "pos_tag", "chunk_tag"], " ",
                           ("train", "test"))
UDPOSDataset = _tagged("UDPOSDataset", ["word", "universal", "stanford"], "\t",
                       ("train", "valid", "test"))


def Multi30kDataset(dataset_dir, usage=None, language_pair=None, num_samples=None,
                    num_parallel_workers=None, shuffle=None, num_shards=None, shard_id=None,
                    cache=None):
    """{train,valid,test}.{en,de} line-aligned: columns text and translation (str);
    language_pair ('en', 'de') by default."""
    src, dst = language_pair or ("en", "de")
    rows = []
    for path in _splits("Multi30kDataset", usage,
                        lambda u: [os.path.join(dataset_dir, f"{u}.{src}")],
                        ("train", "valid", "test")):
        with open(path, encoding="utf-8") as a, open(path[:-len(src)] + dst,
                                                    encoding="utf-8") as b:
            rows += [(np.array(x.rstrip("\n")), np.array(y.rstrip("\n"))) for x, y in zip(a, b)]
    return _rows(rows, ["text", "translation"], num_samples, shuffle, num_shards, shard_id)


def _idx(path):
    """An IDX array (the MNIST file format: magic, dims, big-endian data)."""
    with open(path, "rb") as f:
        data = f.read()
    kind, ndim = data[2], data[3]
    dims = np.frombuffer(data, ">u4", ndim, 4).astype(int)
    dtype = {0x08: np.uint8, 0x0C: ">i4"}[kind]
    return np.frombuffer(data, dtype, int(np.prod(dims)), 4 + 4 * ndim).reshape(dims)


def _images(what, images, labels, num_samples, shuffle, num_shards, shard_id):
    from zenith.dataset import NumpySlicesDataset
    return NumpySlicesDataset({"image": images, "label": labels}, num_samples=num_samples,
                              shuffle=shuffle, num_shards=num_shards, shard_id=shard_id)


def EMnistDataset(dataset_dir, name, usage=None, num_samples=None, num_parallel_workers=None,
                  shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """emnist-<name>-{train,test}-{images-idx3,labels-idx1}-ubyte: image (uint8 28x28x1, as
    stored) and label (int64)."""
    paths = _splits("EMnistDataset", usage, lambda u: [os.path.join(
        dataset_dir, f"emnist-{name}-{u}-images-idx3-ubyte")])
    images = np.concatenate([_idx(p) for p in paths])[..., None]
    labels = np.concatenate([_idx(p.replace("images-idx3", "labels-idx1")) for p in paths])
    return _images("EMnistDataset", images, labels.astype(np.int64), num_samples, shuffle,
                   num_shards, shard_id)


def QMnistDataset(dataset_dir, usage=None, compat=True, num_samples=None,
                  num_parallel_workers=None, shuffle=None, sampler=None, num_shards=None,
                  shard_id=None, cache=None):
    """qmnist-{train,test}-images-idx3-ubyte and -labels-idx2-int: image (uint8 28x28x1),
    label (int64 class; compat=False: the 8 int64 fields of each row)."""
    paths = _splits("QMnistDataset", usage, lambda u: [os.path.join(
        dataset_dir, f"qmnist-{u}-images-idx3-ubyte")])
    images = np.concatenate([_idx(p) for p in paths])[..., None]
    labels = np.concatenate([_idx(p.replace("images-idx3-ubyte", "labels-idx2-int"))
                             for p in paths])
    labels = labels[:, 0].astype(np.int64) if compat else labels.astype(np.int64)
    return _images("QMnistDataset", images, labels, num_samples, shuffle, num_shards,
                   shard_id)


def SemeionDataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
                   sampler=None, num_shards=None, shard_id=None, cache=None):
    """semeion.data: 256 binary pixels and a one-hot digit per line -> image (uint8 16x16,
    0/255) and label (int64)."""
    table = np.loadtxt(os.path.join(dataset_dir, "semeion.data"), ndmin=2)
    images = (table[:, :256] * 255).astype(np.uint8).reshape(-1, 16, 16)
    labels = np.argmax(table[:, 256:266], 1).astype(np.int64)
    return _images("SemeionDataset", images, labels, num_samples, shuffle, num_shards,
                   shard_id)


def USPSDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                shuffle=None, num_shards=None, shard_id=None, cache=None):
    """usps.bz2 (train) and usps.t.bz2 (test), libsvm lines of values in [-1, 1] -> image
    (uint8 16x16x1) and label (int64, 0-9)."""
    images, labels = [], []
    for path in _splits("USPSDataset", usage, lambda u: [os.path.join(
            dataset_dir, "usps.bz2" if u == "train" else "usps.t.bz2")]):
        with bz2.open(path, "rt") as f:
            for line in f:
                fields = line.split()
                values = np.array([float(x.split(":")[1]) for x in fields[1:]])
                images.append(((values + 1) / 2 * 255).astype(np.uint8).reshape(16, 16, 1))
                labels.append(int(float(fields[0])) - 1)
    return _images("USPSDataset", np.stack(images), np.array(labels, np.int64), num_samples,
                   shuffle, num_shards, shard_id)
