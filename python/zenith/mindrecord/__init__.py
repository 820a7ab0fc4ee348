"""zenith.mindrecord: mindspore.mindrecord's FileWriter and FileReader on zenith's own record
file format (read back by zenith.dataset.MindDataset).

The format is zenith's, not MindSpore's: MindSpore's .mindrecord shards (its page layout and
the SQLite .db index beside them) are not read or written, so files do not move between the
two frameworks. A set of shard_num files file_name (or file_name0 .. file_nameN-1), each:

    b"ZMINDREC" | u32 version (1) | u64 header length | header (UTF-8 JSON) | rows

The header holds {"schema", "desc", "index_fields", "shards" (all file names of the set, base
names), "shard_id", "rows" (count in this file)}. Each row is u64 length + payload; the payload
is, for each schema field in sorted name order, u64 byte count + bytes: UTF-8 for "string",
raw for "bytes", little-endian values for int32/int64/float32/float64 (C order, "shape" in
the schema for arrays). Files are written at commit(), each atomically (temporary + rename).
"""

import json
import os
import struct

import numpy as np

__all__ = ["FileWriter", "FileReader", "MAGIC"]

MAGIC = b"ZMINDREC"
_VERSION = 1
_TYPES = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}


def _check_schema(schema):
    if not isinstance(schema, dict) or not schema:
        raise ValueError("FileWriter.add_schema: schema must be a non-empty dict "
                         "{field: {'type': ...}}")
    for name, spec in schema.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind not in (*_TYPES, "string", "bytes"):
            raise ValueError(f"FileWriter.add_schema: field {name!r} has type {kind!r}; "
                             f"expected one of {sorted(_TYPES) + ['bytes', 'string']}")
        if "shape" in spec and kind in ("string", "bytes"):
            raise ValueError(f"FileWriter.add_schema: field {name!r}: {kind} takes no shape")


def _encode(schema, row):
    parts = []
    for name in sorted(schema):
        if name not in row:
            raise ValueError(f"FileWriter.write_raw_data: row lacks field {name!r}")
        kind, value = schema[name]["type"], row[name]
        if kind == "string":
            data = str(value).encode("utf-8")
        elif kind == "bytes":
            data = bytes(value)
        else:
            array = np.asarray(value, _TYPES[kind])
            shape = schema[name].get("shape")
            if shape is None and array.ndim:
                raise ValueError(f"FileWriter.write_raw_data: field {name!r} is a scalar "
                                 f"{kind} in the schema, got shape {array.shape}")
            if shape is not None:
                want = [d for d in shape]
                if len(want) != array.ndim or any(w not in (-1, a) for w, a in
                                                  zip(want, array.shape)):
                    raise ValueError(f"FileWriter.write_raw_data: field {name!r} has shape "
                                     f"{array.shape}, schema says {tuple(shape)}")
            data = struct.pack("<I", array.ndim) + struct.pack(
                f"<{array.ndim}q", *array.shape) + np.ascontiguousarray(array).tobytes()
        parts.append(struct.pack("<Q", len(data)) + data)
    payload = b"".join(parts)
    return struct.pack("<Q", len(payload)) + payload


class FileWriter:
    """Writes rows to shard_num files named file_name (shard_num 1) or file_name0.. ."""

    def __init__(self, file_name, shard_num=1, overwrite=False):
        if not 1 <= int(shard_num) <= 1000:
            raise ValueError(f"FileWriter: shard_num must be in [1, 1000], got {shard_num}")
        self._paths = ([str(file_name)] if shard_num == 1 else
                       [f"{file_name}{i}" for i in range(shard_num)])
        for path in self._paths:
            if os.path.exists(path) and not overwrite:
                raise RuntimeError(f"FileWriter: {path} exists (pass overwrite=True)")
        self._schema, self._desc, self._index, self._rows = None, "", [], []
        self._committed = False

    def add_schema(self, content, desc=None):
        _check_schema(content)
        self._schema, self._desc = dict(content), desc or ""
        return 0

    def add_index(self, index_fields):
        if self._schema is None:
            raise RuntimeError("FileWriter.add_index: add_schema first")
        for name in index_fields:
            if name not in self._schema or self._schema[name]["type"] == "bytes" or \
                    "shape" in self._schema[name]:
                raise ValueError(f"FileWriter.add_index: {name!r} is not a scalar field of "
                                 "the schema")
        self._index = list(index_fields)
        return True

    def write_raw_data(self, raw_data, parallel_writer=False):
        if self._schema is None:
            raise RuntimeError("FileWriter.write_raw_data: add_schema first")
        if self._committed:
            raise RuntimeError("FileWriter.write_raw_data: already committed")
        self._rows.extend(_encode(self._schema, row) for row in raw_data)
        return True

    def commit(self):
        """Writes the files (rows spread over the shards in contiguous blocks)."""
        if self._schema is None:
            raise RuntimeError("FileWriter.commit: add_schema first")
        n = len(self._paths)
        bounds = np.linspace(0, len(self._rows), n + 1).astype(int)
        names = [os.path.basename(p) for p in self._paths]
        for i, path in enumerate(self._paths):
            rows = self._rows[bounds[i]:bounds[i + 1]]
            header = json.dumps({"schema": self._schema, "desc": self._desc,
                                 "index_fields": self._index, "shards": names,
                                 "shard_id": i, "rows": len(rows)}).encode("utf-8")
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(MAGIC + struct.pack("<IQ", _VERSION, len(header)) + header)
                f.writelines(rows)
            os.replace(tmp, path)
        self._committed = True
        return True

    def open_and_set_header(self):
        return True

    def set_page_size(self, page_size):
        return True

    def set_header_size(self, header_size):
        return True


def _read_header(f, path):
    if f.read(8) != MAGIC:
        raise ValueError(f"{path}: not a zenith mindrecord file (MindSpore's own .mindrecord "
                         "files are not supported)")
    version, size = struct.unpack("<IQ", f.read(12))
    if version != _VERSION:
        raise ValueError(f"{path}: mindrecord version {version}, zenith reads {_VERSION}")
    return json.loads(f.read(size).decode("utf-8"))


def _decode(schema, payload):
    row, at = {}, 0
    for name in sorted(schema):
        (size,) = struct.unpack_from("<Q", payload, at)
        data = payload[at + 8:at + 8 + size]
        at += 8 + size
        kind = schema[name]["type"]
        if kind == "string":
            row[name] = np.array(data.decode("utf-8"))
        elif kind == "bytes":
            row[name] = np.frombuffer(data, np.uint8).copy()
        else:
            (ndim,) = struct.unpack_from("<I", data, 0)
            shape = struct.unpack_from(f"<{ndim}q", data, 4)
            row[name] = np.frombuffer(data, _TYPES[kind], offset=4 + 8 * ndim).astype(
                _TYPES[kind][1:]).reshape(shape)
    return row


def shard_files(file_name):
    """Every file of the set file_name belongs to, in shard order."""
    with open(file_name, "rb") as f:
        header = _read_header(f, file_name)
    folder = os.path.dirname(str(file_name))
    return [os.path.join(folder, n) for n in header["shards"]]


class FileReader:
    """Reads rows of one file (or list of files) as dicts of numpy values."""

    def __init__(self, file_name, num_consumer=4, columns=None, operator=None):
        self._paths = [file_name] if isinstance(file_name, str) else list(file_name)
        self._columns = columns

    def schema(self):
        with open(self._paths[0], "rb") as f:
            return _read_header(f, self._paths[0])["schema"]

    def get_next(self):
        for path in self._paths:
            with open(path, "rb") as f:
                header = _read_header(f, path)
                for _ in range(header["rows"]):
                    (size,) = struct.unpack("<Q", f.read(8))
                    row = _decode(header["schema"], f.read(size))
                    yield {k: v for k, v in row.items()
                           if self._columns is None or k in self._columns}

    def close(self):
        return None
