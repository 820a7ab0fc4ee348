"""A dataset of rows held and transformed in Python: what GeneratorDataset becomes when its
source yields strings, which zenith's C++ pipeline (tensors only) cannot carry. It has the
pipeline's surface (map, shuffle, batch of numeric columns, take, skip, repeat, iterators,
get_dataset_size, get_col_names); string columns come out as numpy arrays of str."""

import random

import numpy as np

from zenith._tensor import Tensor


def holds_strings(item):
    values = item if isinstance(item, (tuple, list)) else (item,)
    return any(isinstance(v, str) or (isinstance(v, np.ndarray) and v.dtype.kind in "US")
               for v in values)


def _out(value, output_numpy):
    if isinstance(value, Tensor):
        return value.asnumpy() if output_numpy else value
    array = np.asarray(value)
    if array.dtype.kind in "US" or output_numpy:
        return array
    return Tensor(array)


class PythonRowsDataset:
    """Rows (tuples of column values) and the transforms that make each row."""

    def __init__(self, rows, names, stages=()):
        self._rows, self._names, self._stages = rows, list(names), list(stages)

    def _derive(self, stage, names=None):
        return PythonRowsDataset(self._rows, names or self._names, self._stages + [stage])

    def _iter_rows(self):
        rows = (tuple(r) if isinstance(r, (tuple, list)) else (r,) for r in self._rows)
        for stage in self._stages:
            rows = stage(rows)
        return rows

    def map(self, operations=None, input_columns=None, output_columns=None, **kwargs):
        ops = operations if isinstance(operations, (list, tuple)) else [operations]
        column = input_columns if isinstance(input_columns, str) else (
            list(input_columns)[0] if input_columns else self._names[0])
        index = self._names.index(column)

        def stage(rows):
            for row in rows:
                value = row[index]
                for op in ops:
                    value = op(value)
                yield row[:index] + (value,) + row[index + 1:]
        return self._derive(stage)

    def shuffle(self, buffer_size):
        def stage(rows):
            rows = list(rows)
            random.shuffle(rows)
            return iter(rows)
        return self._derive(stage)

    def take(self, count=-1):
        def stage(rows):
            for i, row in enumerate(rows):
                if 0 <= count <= i:
                    return
                yield row
        return self._derive(stage)

    def skip(self, count):
        def stage(rows):
            for i, row in enumerate(rows):
                if i >= count:
                    yield row
        return self._derive(stage)

    def repeat(self, count=None):
        base = self

        def stage(rows):
            yield from rows
            for _ in range((count or 1) - 1):
                yield from PythonRowsDataset(base._rows, base._names,
                                             base._stages)._iter_rows()
        return self._derive(stage)

    def batch(self, batch_size, drop_remainder=False, **kwargs):
        def stage(rows):
            chunk = []
            for row in rows:
                chunk.append(row)
                if len(chunk) == batch_size:
                    yield tuple(np.stack([np.asarray(_out(v, True)) for v in col])
                                for col in zip(*chunk))
                    chunk = []
            if chunk and not drop_remainder:
                yield tuple(np.stack([np.asarray(_out(v, True)) for v in col])
                            for col in zip(*chunk))
        return self._derive(stage)

    def get_col_names(self):
        return list(self._names)

    def get_dataset_size(self):
        return sum(1 for _ in self._iter_rows())

    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False,
                              do_copy=True):
        for row in self._iter_rows():
            yield [_out(v, output_numpy) for v in row]

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        for row in self._iter_rows():
            yield {n: _out(v, output_numpy) for n, v in zip(self._names, row)}

    def __iter__(self):
        return self.create_tuple_iterator()

    def __len__(self):
        return self.get_dataset_size()
