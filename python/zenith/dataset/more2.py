"""More of mindspore.dataset: MindDataset (zenith.mindrecord's files), WeightedRandomSampler,
PKSampler, the Shuffle modes and Schema."""

import enum
import json

import numpy as np

from zenith import _zenith as _C
from zenith.dataset.more import _Sampler, _Subset

__all__ = ["MindDataset", "WeightedRandomSampler", "PKSampler", "Shuffle", "Schema"]


def _subset(cpp, indices):
    return _C.data.GeneratorDataset(_Subset(cpp, list(indices)), len(indices),
                                    cpp.get_col_names())


def _rng():
    from zenith.dataset import config
    return np.random.default_rng(config.get_seed())


class WeightedRandomSampler(_Sampler):
    """num_samples indices drawn with probability proportional to weights (with replacement
    unless replacement=False)."""

    def __init__(self, weights, num_samples=None, replacement=True):
        w = np.asarray(weights, np.float64)
        if w.ndim != 1 or not len(w) or (w < 0).any() or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be a non-empty list of "
                             "non-negative numbers with a positive sum")
        self.weights, self.replacement = w, replacement
        self.num_samples = len(w) if num_samples is None else int(num_samples)

    def _apply(self, cpp, default_shuffle):
        if len(self.weights) > cpp.get_dataset_size():
            raise ValueError(f"WeightedRandomSampler: {len(self.weights)} weights for "
                             f"{cpp.get_dataset_size()} rows")
        picks = _rng().choice(len(self.weights), self.num_samples, self.replacement,
                              self.weights / self.weights.sum())
        return _subset(cpp, [int(i) for i in picks])


class PKSampler(_Sampler):
    """num_val rows of each class of class_column (classes in order, or shuffled); a class
    with fewer rows repeats them."""

    def __init__(self, num_val, num_class=None, shuffle=False, class_column="label",
                 num_samples=None):
        if num_val < 1:
            raise ValueError(f"PKSampler: num_val must be positive, got {num_val}")
        self.num_val, self.shuffle, self.class_column = num_val, shuffle, class_column
        self.num_samples = num_samples

    def _apply(self, cpp, default_shuffle):
        names = cpp.get_col_names()
        if self.class_column not in names:
            raise ValueError(f"PKSampler: no column {self.class_column!r} (columns {names})")
        col = names.index(self.class_column)
        labels = [int(cpp.get(i, 0)[col].asnumpy()) for i in range(cpp.get_dataset_size())]
        rng = _rng()
        classes = sorted(set(labels))
        if self.shuffle:
            classes = list(rng.permutation(classes))
        picks = []
        for c in classes:
            rows = [i for i, label in enumerate(labels) if label == c]
            if self.shuffle:
                rows = list(rng.permutation(rows))
            picks += [rows[k % len(rows)] for k in range(self.num_val)]
        return _subset(cpp, picks[:self.num_samples] if self.num_samples else picks)


class Shuffle(str, enum.Enum):
    """Shuffle modes of the file-reading datasets (any of them shuffles the rows in zenith)."""
    GLOBAL = "global"
    FILES = "file"
    INFILE = "infile"


_DE_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64", "string", "bool"}


class Schema:
    """Column names, types and shapes (mindspore.dataset.Schema), as MindSpore's JSON."""

    def __init__(self, schema_file=None):
        self.columns, self.num_rows = [], None
        if schema_file is not None:
            with open(schema_file, encoding="utf-8") as f:
                self.from_json(json.load(f))

    def add_column(self, name, de_type, shape=None):
        kind = str(getattr(de_type, "name", de_type)).lower()
        kind = {"bool_": "bool"}.get(kind, kind)
        if kind not in _DE_TYPES:
            raise ValueError(f"Schema.add_column: {name!r} has unknown type {de_type!r}")
        column = {"name": name, "type": kind}
        if shape is not None:
            column["shape"], column["rank"] = list(shape), len(shape)
        self.columns.append(column)

    def parse_columns(self, columns):
        items = columns.items() if isinstance(columns, dict) else [
            (c["name"], c) for c in columns]
        for name, spec in items:
            self.add_column(name, spec["type"], spec.get("shape"))

    def to_json(self):
        body = {"columns": {c["name"]: {k: v for k, v in c.items() if k != "name"}
                            for c in self.columns}}
        if self.num_rows is not None:
            body["numRows"] = self.num_rows
        return json.dumps(body, indent=2)

    def from_json(self, json_obj):
        self.columns = []
        self.parse_columns(json_obj["columns"])
        self.num_rows = json_obj.get("numRows")

    def __str__(self):
        return self.to_json()


def MindDataset(dataset_files, columns_list=None, num_parallel_workers=None, shuffle=None,
                num_shards=None, shard_id=None, sampler=None, padded_sample=None,
                num_padded=None, num_samples=None, cache=None):
    """Rows of zenith.mindrecord files: one file of a set (its siblings are read too) or a list
    of files. Columns in columns_list order (default: the schema's fields, sorted)."""
    from zenith.dataset.corpora import _rows
    from zenith.mindrecord import FileReader, shard_files
    files = shard_files(dataset_files) if isinstance(dataset_files, str) else list(
        dataset_files)
    reader = FileReader(files)
    schema = reader.schema()
    names = list(columns_list) if columns_list else sorted(schema)
    for name in names:
        if name not in schema:
            raise ValueError(f"MindDataset: no field {name!r} in {files[0]} (fields "
                             f"{sorted(schema)})")
    rows = [tuple(row[n] for n in names) for row in reader.get_next()]
    if padded_sample is not None and num_padded:
        rows += [tuple(np.asarray(padded_sample[n]) for n in names)] * int(num_padded)
    if sampler is not None:
        from zenith.dataset import GeneratorDataset
        return GeneratorDataset(rows, names, sampler=sampler, num_samples=num_samples)
    return _rows(rows, names, num_samples, shuffle, num_shards, shard_id)
