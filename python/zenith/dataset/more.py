"""More of mindspore.dataset: the samplers that map onto zenith's pipeline
(SequentialSampler, RandomSampler, DistributedSampler, SubsetSampler, SubsetRandomSampler),
and sources read with numpy or Python: KMnistDataset, Cifar100Dataset, FakeImageDataset,
RandomDataset, PaddedDataset, TextFileDataset, CSVDataset."""

import csv
import glob
import os

import numpy as np

from zenith import _zenith as _C

__all__ = ["SequentialSampler", "RandomSampler", "DistributedSampler", "SubsetSampler",
           "SubsetRandomSampler", "KMnistDataset", "Cifar100Dataset", "FakeImageDataset",
           "RandomDataset", "PaddedDataset", "TextFileDataset", "CSVDataset"]


class _Sampler:
    def _apply(self, cpp, default_shuffle):
        raise NotImplementedError


class SequentialSampler(_Sampler):
    """Items start_index, start_index + 1, ... in order (num_samples of them)."""

    def __init__(self, start_index=None, num_samples=None):
        self.start_index, self.num_samples = start_index or 0, num_samples

    def _apply(self, cpp, default_shuffle):
        if self.start_index:
            size = cpp.get_dataset_size()
            start = min(self.start_index, size)
            cpp = cpp.slice(start, size - start)
        return cpp.take(self.num_samples) if self.num_samples is not None else cpp


class RandomSampler(_Sampler):
    """Every item once, in a seeded random order (replacement is not supported)."""

    def __init__(self, replacement=False, num_samples=None):
        if replacement:
            raise ValueError("RandomSampler: replacement=True is not supported by zenith yet")
        self.num_samples = num_samples

    def _apply(self, cpp, default_shuffle):
        cpp = cpp.shuffle()
        return cpp.take(self.num_samples) if self.num_samples is not None else cpp


class DistributedSampler(_Sampler):
    """Shard shard_id of num_shards (as the num_shards/shard_id arguments)."""

    def __init__(self, num_shards, shard_id, shuffle=True, num_samples=None, offset=-1):
        if not 0 <= shard_id < num_shards:
            raise ValueError(f"DistributedSampler: shard_id {shard_id} out of range for "
                             f"num_shards {num_shards}")
        self.num_shards, self.shard_id = num_shards, shard_id
        self.shuffle, self.num_samples = shuffle, num_samples

    def _apply(self, cpp, default_shuffle):
        cpp = _C.data.DistributedSampler(cpp, self.num_shards, self.shard_id, self.shuffle,
                                         None, "pad")
        return cpp.take(self.num_samples) if self.num_samples is not None else cpp


class SubsetSampler(_Sampler):
    """The items at indices, in that order."""

    _shuffle = False

    def __init__(self, indices, num_samples=None):
        self.indices = [int(i) for i in indices]
        self.num_samples = num_samples

    def _apply(self, cpp, default_shuffle):
        indices = list(self.indices)
        if self._shuffle:
            from zenith.dataset import config
            rng = np.random.default_rng(config.get_seed())
            indices = list(rng.permutation(indices))
        if self.num_samples is not None:
            indices = indices[:self.num_samples]
        return _C.data.GeneratorDataset(_Subset(cpp, indices), len(indices),
                                        cpp.get_col_names())


class SubsetRandomSampler(SubsetSampler):
    """The items at indices, in a seeded random order."""

    _shuffle = True


class _Subset:
    """Random access to items of a C++ dataset (its get(epoch, index))."""

    def __init__(self, cpp, indices):
        self._cpp, self._indices = cpp, indices

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, i):
        return tuple(t.asnumpy().copy() for t in self._cpp.get(self._indices[i], 0))


def _slices(columns, names, **kwargs):
    from zenith.dataset import NumpySlicesDataset
    return NumpySlicesDataset(dict(zip(names, columns)), **kwargs)


def KMnistDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                  shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """Kuzushiji-MNIST: the same IDX files and columns as MNIST."""
    from zenith.dataset import MnistDataset
    return MnistDataset(dataset_dir, usage, num_samples, num_parallel_workers, shuffle, sampler,
                        num_shards, shard_id, cache)


def Cifar100Dataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                    shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """CIFAR-100 binary files (train.bin, test.bin: coarse label, fine label, 3072 CHW bytes
    per record): columns image (uint8 32x32x3), coarse_label, fine_label."""
    usage = usage or "all"
    names = {"train": ["train.bin"], "test": ["test.bin"], "all": ["train.bin", "test.bin"]}
    if usage not in names:
        raise ValueError(f"Cifar100Dataset: unknown usage {usage!r} (train, test, all)")
    records = []
    for name in names[usage]:
        path = os.path.join(dataset_dir, name)
        if not os.path.isfile(path):
            if usage == "all":
                continue
            raise FileNotFoundError(f"Cifar100Dataset: {path} is missing")
        data = np.fromfile(path, np.uint8)
        if data.size % 3074:
            raise ValueError(f"Cifar100Dataset: {path} is {data.size} bytes, not a whole number "
                             "of 3074-byte records")
        records.append(data.reshape(-1, 3074))
    if not records:
        raise FileNotFoundError(f"Cifar100Dataset: {dataset_dir} holds neither train.bin nor "
                                "test.bin")
    r = np.concatenate(records)
    images = r[:, 2:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()
    return _slices([images, r[:, 0].astype(np.int64), r[:, 1].astype(np.int64)],
                   ["image", "coarse_label", "fine_label"], num_samples=num_samples,
                   shuffle=shuffle, sampler=sampler, num_shards=num_shards, shard_id=shard_id)


def FakeImageDataset(num_images=1000, image_size=(224, 224, 3), num_classes=10, base_seed=0,
                     num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                     num_shards=None, shard_id=None):
    """num_images random uint8 images (seeded by base_seed) with random labels."""
    rng = np.random.default_rng(base_seed)
    images = rng.integers(0, 256, (num_images,) + tuple(image_size), dtype=np.uint8)
    labels = rng.integers(0, num_classes, num_images).astype(np.int64)
    return _slices([images, labels], ["image", "label"], num_samples=num_samples,
                   shuffle=shuffle, sampler=sampler, num_shards=num_shards, shard_id=shard_id)


def RandomDataset(total_rows=None, schema=None, columns_list=None, num_samples=None,
                  num_parallel_workers=None, cache=None, shuffle=None, num_shards=None,
                  shard_id=None):
    """total_rows rows of random float32 columns (columns_list names; each of 2 values)."""
    rng = np.random.default_rng(0)
    rows = total_rows or int(rng.integers(1, 1000))
    names = list(columns_list or ["column_0"])
    return _slices([rng.random((rows, 2), dtype=np.float32) for _ in names], names,
                   num_samples=num_samples, shuffle=shuffle, num_shards=num_shards,
                   shard_id=shard_id)


def PaddedDataset(padded_samples):
    """A dataset of the given dicts (every dict with the same keys), in order."""
    from zenith.dataset import GeneratorDataset
    if not padded_samples or not all(isinstance(s, dict) for s in padded_samples):
        raise TypeError("PaddedDataset: padded_samples must be a non-empty list of dicts")
    names = list(padded_samples[0])
    rows = [tuple(np.asarray(s[n]) for n in names) for s in padded_samples]
    return GeneratorDataset(rows, names, shuffle=False)


def TextFileDataset(dataset_files, num_samples=None, num_parallel_workers=None, shuffle=None,
                    num_shards=None, shard_id=None, cache=None):
    """One row per line of the files (a path, a glob pattern or a list): column text."""
    from zenith.dataset import GeneratorDataset
    files = [dataset_files] if isinstance(dataset_files, str) else list(dataset_files)
    paths = [p for f in files for p in (sorted(glob.glob(f)) or [f])]
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines.extend(line.rstrip("\n") for line in f if line.strip())
    if shuffle:
        np.random.default_rng(0).shuffle(lines)
    if num_shards is not None:
        lines = lines[shard_id::num_shards]
    ds = GeneratorDataset([(line,) for line in lines], ["text"])
    return ds.take(num_samples) if num_samples else ds


def CSVDataset(dataset_files, field_delim=",", column_defaults=None, column_names=None,
               num_samples=None, num_parallel_workers=None, shuffle=None, num_shards=None,
               shard_id=None, cache=None):
    """Rows of CSV files; the first line gives the column names unless column_names does. A
    column whose values all parse as numbers is float32 (int64 when integral), else str."""
    from zenith.dataset import GeneratorDataset
    files = [dataset_files] if isinstance(dataset_files, str) else list(dataset_files)
    rows, names = [], column_names
    for path in files:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f, delimiter=field_delim)
            body = list(reader)
        if names is None:
            names, body = body[0], body[1:]
        elif column_names is None:
            body = body[1:]
        rows.extend(body)
    columns = list(zip(*rows))
    typed = []
    for values in columns:
        try:
            nums = np.array([float(v) for v in values])
            typed.append(nums.astype(np.int64) if np.all(nums == np.round(nums)) and
                         all("." not in v for v in values) else nums.astype(np.float32))
        except ValueError:
            typed.append(np.array(values, dtype=str))
    out = [tuple(np.asarray(c[i]) for c in typed) for i in range(len(rows))]
    if shuffle:
        np.random.default_rng(0).shuffle(out)
    if num_shards is not None:
        out = out[shard_id::num_shards]
    ds = GeneratorDataset(out, list(names), shuffle=False)
    return ds.take(num_samples) if num_samples else ds
