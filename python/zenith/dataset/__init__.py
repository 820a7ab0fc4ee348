"""zenith.dataset: the input pipeline with MindSpore's names (mindspore.dataset).

    ds = zenith.dataset.FashionMnistDataset("/usr/share/datasets/fashion-mnist", usage="train")
    ds = ds.map([vision.Rescale(1 / 255, 0), vision.HWC2CHW()], "image").batch(64)
    for image, label in ds.create_tuple_iterator(): ...

The pipeline is zenith's C++ one: item i of epoch e is a pure function of (seed, e, i), read
ahead by C++ worker threads. Python sources (GeneratorDataset) and Python transforms in map()
are called on those threads with the GIL taken for the call only.
"""

import atexit
import weakref

import numpy as np

from zenith import _zenith as _C
from zenith._tensor import Tensor, int64
from zenith.dataset import config, text, transforms, vision

__all__ = [
    "Dataset", "MnistDataset", "FashionMnistDataset", "Cifar10Dataset", "ImageFolderDataset",
    "GeneratorDataset", "NumpySlicesDataset", "config", "vision", "transforms", "text",
]

_LIVE_ITERATORS = weakref.WeakSet()


@atexit.register
def _close_iterators():
    # Worker threads that call Python must stop before the interpreter finalizes.
    for it in list(_LIVE_ITERATORS):
        it.close()


def _operations(operations):
    """The C++ transforms for map()'s operations: zenith transforms and Python callables."""
    if operations is None:
        return []
    if not isinstance(operations, (list, tuple)):
        operations = [operations]
    out = []
    for op in operations:
        if hasattr(op, "_cpp_ops"):
            out.extend(op._cpp_ops())
        elif isinstance(op, _C.data.Transform):
            out.append(op)
        elif callable(op):
            out.append(_C.data.PyTransform(op, getattr(op, "__name__", type(op).__name__)))
        else:
            raise TypeError(f"map: operations must be transforms or callables, got "
                            f"{type(op).__name__}")
    return out


def _column(columns, what):
    if columns is None:
        return ""
    if isinstance(columns, str):
        return columns
    columns = list(columns)
    if len(columns) != 1:
        raise ValueError(f"map: {what} takes one column per map() call, got {columns}")
    return columns[0]


class Dataset:
    """A pipeline (MindSpore's Dataset): map, shuffle, batch, repeat, take, skip; iterators
    over one epoch at a time; get_dataset_size()."""

    def __init__(self, cpp, parent=None):
        self._ds = cpp
        self._parent = parent
        self._epoch = 0
        # Columns of zenith.uint32 (MindSpore's UInt32 labels): int64 in the C++ pipeline,
        # uint32 where they come out (iterators, output_types).
        self._uint32 = parent._uint32 if parent is not None else frozenset()

    # ---- building
    def _derive(self, cpp):
        return Dataset(cpp, self)

    def map(self, operations=None, input_columns=None, output_columns=None,
            num_parallel_workers=None, python_multiprocessing=False, cache=None, callbacks=None,
            **kwargs):
        """Applies operations in order to input_columns (one column; default the first), on
        num_parallel_workers threads (default: config.get_num_parallel_workers())."""
        column = _column(input_columns, "input_columns")
        if output_columns is not None and _column(output_columns, "output_columns") != column:
            raise ValueError("map: output_columns must equal input_columns")
        workers = 0 if num_parallel_workers is None else int(num_parallel_workers)
        out = self._derive(self._ds.map(_operations(operations), column, workers))
        if column is None:
            column = self.get_col_names()[0]
        ops = operations if isinstance(operations, (list, tuple)) else [operations]
        to_uint32 = bool(ops) and getattr(ops[-1], "_to_uint32", False)
        out._uint32 = (self._uint32 | {column}) if to_uint32 else (self._uint32 - {column})
        return out

    def shuffle(self, buffer_size):
        """A new permutation of the whole dataset every epoch (from the seed and the epoch;
        any buffer_size >= 1 gives the full shuffle)."""
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise ValueError(f"shuffle: buffer_size must be a positive int, got {buffer_size!r}")
        return self._derive(self._ds.shuffle())

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None,
              per_batch_map=None, input_columns=None, output_columns=None, **kwargs):
        """Stacks batch_size consecutive items per column (the last, smaller batch is dropped
        with drop_remainder)."""
        if per_batch_map is not None:
            raise ValueError("batch: per_batch_map is not supported; map() per item instead")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int):
            raise TypeError(f"batch: batch_size must be an int, got {type(batch_size).__name__}")
        return self._derive(self._ds.batch(batch_size, bool(drop_remainder)))

    def repeat(self, count=None):
        """count passes over the data per epoch (each shuffled anew)."""
        if count is None or count == -1:
            raise ValueError("repeat: an endless repeat is not supported; give a count")
        return self._derive(self._ds.repeat(count))

    def take(self, count=-1):
        """The first count items (-1: all)."""
        return self if count == -1 else self._derive(self._ds.take(count))

    def skip(self, count):
        """Every item after the first count."""
        size = self._ds.get_dataset_size()
        count = min(count, size)
        return self._derive(self._ds.slice(count, size - count))

    # ---- reading
    def get_dataset_size(self):
        """Items per epoch (batches after batch())."""
        return self._ds.get_dataset_size()

    def get_col_names(self):
        """The column names, e.g. ['image', 'label']."""
        return self._ds.get_col_names()

    def output_shapes(self):
        """The shapes of the first item's columns."""
        return [list(t.shape) for t in self._ds.get(0, 0)]

    def output_types(self):
        """The dtypes of the first item's columns."""
        from zenith._uint32 import uint32
        return [uint32 if name in self._uint32 else t.dtype
                for name, t in zip(self.get_col_names(), self._ds.get(0, 0))]

    def _with_uint32(self, columns):
        """self, its columns named in columns coming out as zenith.uint32."""
        self._uint32 = self._uint32 | frozenset(columns)
        return self

    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False,
                              do_copy=True):
        """An iterator of lists of column Tensors (numpy arrays with output_numpy), one epoch
        per pass; num_epochs passes at most (-1: no limit)."""
        return _Iterator(self, columns, num_epochs, output_numpy, as_dict=False)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        """An iterator of {column name: Tensor} dicts."""
        return _Iterator(self, None, num_epochs, output_numpy, as_dict=True)

    def __iter__(self):
        return iter(self.create_tuple_iterator())

    def _next_epoch(self):
        epoch = self._epoch
        self._epoch += 1
        return epoch


class _Iterator:
    """Items of one epoch at a time; iterating it again starts the next epoch."""

    def __init__(self, dataset, columns, num_epochs, output_numpy, as_dict):
        self._it = None
        self._dataset = dataset
        names = dataset.get_col_names()
        self._names = names
        self._select = None
        self._uint32 = [i for i, name in enumerate(names) if name in dataset._uint32]
        if columns is not None:
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise ValueError(f"unknown column(s) {unknown}; columns: {names}")
            self._select = [names.index(c) for c in columns]
        self._epochs_left = num_epochs
        self._numpy = output_numpy
        self._dict = as_dict
        _LIVE_ITERATORS.add(self)

    def _start(self):
        if self._epochs_left == 0:
            raise StopIteration
        if self._epochs_left > 0:
            self._epochs_left -= 1
        self._it = _C.data.Iterator(self._dataset._ds, self._dataset._next_epoch())

    def __iter__(self):
        return self

    def __next__(self):
        if self._it is None:
            self._start()
        row = self._it.next()
        if row is None:
            self.close()
            raise StopIteration
        if self._uint32:
            from zenith._uint32 import to_uint32
            row = list(row)
            for i in self._uint32:
                row[i] = to_uint32(row[i])
        if self._select is not None:
            row = [row[i] for i in self._select]
        if self._numpy:
            row = [t.asnumpy() for t in row]
        if self._dict:
            return dict(zip(self._names, row))
        return row

    def get_next(self):
        """The next item, or None at the end of the epoch."""
        try:
            return self.__next__()
        except StopIteration:
            return None

    def close(self):
        """Stops the workers of the current epoch."""
        if self._it is not None:
            self._it.close()
            self._it = None

    def __del__(self):
        self.close()


# ---- sources


def _source(cpp, num_samples, shuffle, num_shards, shard_id, sampler, default_shuffle=True):
    """A source with MindSpore's reading options: shuffled by default, sharded for data
    parallelism (num_shards ranks, this one shard_id), limited to num_samples (per shard)."""
    if sampler is not None:
        from zenith.dataset.more import _Sampler
        if not isinstance(sampler, _Sampler):
            raise ValueError(f"sampler must be one of zenith.dataset's samplers, got "
                             f"{type(sampler).__name__}")
        if num_shards is not None or shuffle is not None:
            raise ValueError("sampler goes without shuffle, num_shards and shard_id")
        cpp = sampler._apply(cpp, default_shuffle)
        return cpp.take(num_samples) if num_samples is not None else cpp
    shuffle = default_shuffle if shuffle is None else bool(shuffle)
    if (num_shards is None) != (shard_id is None):
        raise ValueError("num_shards and shard_id go together")
    if num_shards is not None:
        if not 0 <= shard_id < num_shards:
            raise ValueError(f"shard_id {shard_id} out of range for num_shards {num_shards}")
        cpp = _C.data.DistributedSampler(cpp, num_shards, shard_id, shuffle, None, "pad")
    elif shuffle:
        cpp = cpp.shuffle()
    if num_samples is not None:
        cpp = cpp.take(num_samples)
    return cpp


def _usage(usage):
    return "all" if usage is None else usage


class MnistDataset(Dataset):
    """MNIST IDX files (gzipped or not) in dataset_dir: columns image (uint8 HWC, 28x28x1) and
    label (zenith.uint32, as MindSpore's). usage 'train', 'test' or 'all' (default); shuffled
    unless shuffle=False."""

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        super().__init__(_source(_C.data.MnistDataset(str(dataset_dir), _usage(usage)),
                                 num_samples, shuffle, num_shards, shard_id, sampler))
        self._with_uint32(["label"])


class FashionMnistDataset(Dataset):
    """Fashion-MNIST IDX files (Debian: dataset-fashion-mnist installs them in
    /usr/share/datasets/fashion-mnist), as MnistDataset."""

    def __init__(self, dataset_dir=None, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        if dataset_dir is None:
            dataset_dir = _C.data.default_dir("fashion-mnist")
        super().__init__(_source(_C.data.FashionMnistDataset(str(dataset_dir), _usage(usage)),
                                 num_samples, shuffle, num_shards, shard_id, sampler))
        self._with_uint32(["label"])


class Cifar10Dataset(Dataset):
    """CIFAR-10 binary files (cifar-10-batches-bin: data_batch_1..5.bin, test_batch.bin):
    image (uint8 32x32x3), label (zenith.uint32, as MindSpore's)."""

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        super().__init__(_source(_C.data.Cifar10Dataset(str(dataset_dir), _usage(usage)),
                                 num_samples, shuffle, num_shards, shard_id, sampler))
        self._with_uint32(["label"])


class ImageFolderDataset(Dataset):
    """One class per sub-folder of dataset_dir (sorted names -> 0, 1, ...); PNG and JPEG
    images decoded when read (RGB; vision.Decode() is accepted and does nothing)."""

    def __init__(self, dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
                 sampler=None, extensions=None, class_indexing=None, decode=True,
                 num_shards=None, shard_id=None, cache=None):
        if class_indexing is not None:
            raise ValueError("ImageFolderDataset: class_indexing is not supported (sorted folder "
                             "names give the labels)")
        super().__init__(_source(_C.data.ImageFolderDataset(str(dataset_dir), 3), num_samples,
                                 shuffle, num_shards, shard_id, sampler))


def _names(column_names, what):
    if column_names is None:
        raise ValueError(f"{what}: column_names is required")
    names = [column_names] if isinstance(column_names, str) else list(column_names)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"{what}: column_names must be distinct names, got {names}")
    return names


class GeneratorDataset(Dataset):
    """A dataset over a Python source (mindspore.dataset.GeneratorDataset).

    source: random access (len() and [], e.g. a list or a class with __getitem__/__len__; read
    lazily and shuffled by default), or an iterable or generator function (read once, in order,
    when the dataset is made). Each item is a tuple of columns (numpy arrays, numbers, Tensors)
    or one value for a single column. An exception raised by the source reaches the iterator
    (or Model.train) as itself, with a note naming the item.
    """

    def __new__(cls, source, column_names=None, *args, **kwargs):
        # Strings: zenith's C++ pipeline carries tensors only, so a source of strings (text
        # tutorials: GeneratorDataset(['Welcome to Beijing'], 'text')) becomes a dataset of
        # Python rows (_python_rows.py).
        from zenith.dataset._python_rows import PythonRowsDataset, holds_strings
        if isinstance(source, (list, tuple)) and source and holds_strings(source[0]):
            return PythonRowsDataset(list(source), _names(column_names, "GeneratorDataset"))
        return super().__new__(cls)

    def __init__(self, source, column_names=None, column_types=None, schema=None,
                 num_samples=None, num_parallel_workers=1, shuffle=None, sampler=None,
                 num_shards=None, shard_id=None, python_multiprocessing=True, max_rowsize=6):
        names = _names(column_names, "GeneratorDataset")
        random_access = hasattr(source, "__getitem__") and hasattr(source, "__len__")
        if not random_access:
            if callable(source):
                source = source()
            if not hasattr(source, "__iter__"):
                raise TypeError("GeneratorDataset: source must be random-access (len and []), "
                                f"iterable or a generator function, got {type(source).__name__}")
            source = list(source)
            default_shuffle = False
        else:
            default_shuffle = True
        from zenith._uint32 import uint32
        first = _first_row(source, len(names))
        wide = {name for name, column in zip(names, first) if _holds_uint32(column)}
        if wide:
            source = _Int64Columns(source, [i for i, c in enumerate(first) if _holds_uint32(c)])
        cpp = _C.data.GeneratorDataset(source, len(source), names)
        if num_parallel_workers and num_parallel_workers > 1:
            cpp = cpp.map([], "", int(num_parallel_workers))
        if column_types is not None:
            for name, t in zip(names, column_types):
                wide = wide | {name} if t is uint32 else wide - {name}
                cpp = cpp.map([_C.data.TypeCast(int64 if t is uint32 else t)], name, 0)
        super().__init__(_source(cpp, num_samples, shuffle, num_shards, shard_id, sampler,
                                 default_shuffle))
        self._with_uint32(wide)
        self._source_ref = source


def _holds_uint32(value):
    """Whether value is a numpy uint32 array or scalar, or a zenith.uint32 tensor."""
    from zenith._uint32 import uint32
    dtype = getattr(value, "dtype", None)
    return dtype is uint32 or (isinstance(dtype, np.dtype) and dtype == np.uint32)


class _Int64Columns:
    """source's items with their uint32 columns (indices) as int64, which the pipeline
    carries them in."""

    def __init__(self, source, indices):
        self._source, self._indices = source, indices

    def __len__(self):
        return len(self._source)

    def __getitem__(self, i):
        row = self._source[i]
        if not isinstance(row, tuple):
            return np.asarray(row).astype(np.int64)
        row = list(row)
        for k in self._indices:
            row[k] = np.asarray(row[k]).astype(np.int64)
        return tuple(row)


def _first_row(source, columns):
    """The columns of the first item of a list or tuple source (what says a column is
    uint32); [] for other sources, which are read on the pipeline's threads only."""
    if not isinstance(source, (list, tuple)) or len(source) == 0:
        return []
    row = source[0]
    return row if isinstance(row, tuple) and len(row) == columns else [row]


class NumpySlicesDataset(Dataset):
    """Rows sliced from in-memory arrays along their first dimension: data is an array, a
    list/tuple of arrays (columns) or a dict {name: array}. Held as tensors; no Python at read
    time."""

    def __init__(self, data, column_names=None, num_samples=None, num_parallel_workers=1,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None):
        if isinstance(data, dict):
            names = list(data.keys()) if column_names is None else _names(column_names, "")
            columns = list(data.values())
        elif isinstance(data, (list, tuple)) and data and not isinstance(data[0], (int, float)):
            columns = list(data)
            names = ([f"column_{i}" for i in range(len(columns))] if column_names is None
                     else _names(column_names, "NumpySlicesDataset"))
        else:
            columns = [data]
            names = ["column_0"] if column_names is None else _names(column_names,
                                                                     "NumpySlicesDataset")
        if len(names) != len(columns):
            raise ValueError(f"NumpySlicesDataset: {len(columns)} columns, {len(names)} names")
        tensors = [c.copy() if isinstance(c, Tensor) else Tensor(c).copy() for c in columns]
        sizes = {t.shape[0] if t.ndim else -1 for t in tensors}
        if len(sizes) != 1 or -1 in sizes:
            raise ValueError("NumpySlicesDataset: every column needs the same first dimension")
        super().__init__(_source(_C.data.TensorDataset(tensors, names), num_samples, shuffle,
                                 num_shards, shard_id, sampler))
        self._with_uint32(name for name, c in zip(names, columns) if _holds_uint32(c))

from zenith.dataset import more as _more  # noqa: E402
from zenith.dataset.more import *  # noqa: E402,F401,F403  (listed in more.__all__)
from zenith.dataset import corpora as _corpora  # noqa: E402
from zenith.dataset.corpora import *  # noqa: E402,F401,F403  (listed in corpora.__all__)
from zenith.dataset import more2 as _more2  # noqa: E402
from zenith.dataset import media as _media  # noqa: E402
from zenith.dataset.media import *  # noqa: E402,F401,F403  (listed in media.__all__)
from zenith.dataset import media2 as _media2  # noqa: E402
from zenith.dataset.media2 import *  # noqa: E402,F401,F403  (listed in media2.__all__)
from zenith.dataset.more2 import *  # noqa: E402,F401,F403  (listed in more2.__all__)
from zenith._unsupported import unsupported as _unsupported  # noqa: E402

__all__ += (_more.__all__ + _corpora.__all__ + _more2.__all__ + _media.__all__ +
            _media2.__all__)

__getattr__ = _unsupported(__name__)
