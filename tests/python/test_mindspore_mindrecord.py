"""zenith.mindrecord (FileWriter/FileReader) and dataset.MindDataset as MindSpore's dataset
tutorial uses them, plus WeightedRandomSampler, PKSampler, Shuffle and Schema."""

import json
from collections import Counter

import numpy as np
import pytest

from zenith import dataset as ds
from zenith import mindrecord


SCHEMA = {"file_name": {"type": "string"}, "label": {"type": "int32"},
          "data": {"type": "bytes"}, "box": {"type": "float32", "shape": [-1, 2]}}


def write(path, n, shard_num=1):
    writer = mindrecord.FileWriter(str(path), shard_num=shard_num, overwrite=True)
    writer.add_schema(SCHEMA, "test")
    writer.add_index(["file_name", "label"])
    writer.write_raw_data([{"file_name": f"{i}.jpg", "label": i % 3, "data": bytes([i] * (i + 1)),
                            "box": np.full((i % 2 + 1, 2), i, np.float32)} for i in range(n)])
    writer.commit()


def test_write_and_read_back(tmp_path):
    write(tmp_path / "a.mindrecord", 5)
    rows = list(ds.MindDataset(str(tmp_path / "a.mindrecord"), shuffle=False)
                .create_dict_iterator(output_numpy=True))
    assert len(rows) == 5
    r = rows[3]
    assert str(r["file_name"]) == "3.jpg" and int(r["label"]) == 0
    assert r["data"].dtype == np.uint8 and r["data"].tolist() == [3] * 4
    assert r["box"].shape == (2, 2) and r["box"].dtype == np.float32
    only = ds.MindDataset(str(tmp_path / "a.mindrecord"), ["label"], shuffle=False)
    assert [int(x[0]) for x in only.create_tuple_iterator(output_numpy=True)] == [0, 1, 2, 0, 1]
    assert mindrecord.FileReader(str(tmp_path / "a.mindrecord")).schema() == SCHEMA


def test_shards_sharding_and_errors(tmp_path):
    write(tmp_path / "s.mindrecord", 7, shard_num=3)
    for i in range(3):
        assert (tmp_path / f"s.mindrecord{i}").exists()
    every = ds.MindDataset(str(tmp_path / "s.mindrecord1"), ["label"], shuffle=False)
    assert every.get_dataset_size() == 7  # one file names its whole set
    half = ds.MindDataset(str(tmp_path / "s.mindrecord0"), ["label"], shuffle=False,
                          num_shards=2, shard_id=1)
    assert half.get_dataset_size() == 3
    with pytest.raises(RuntimeError, match="exists"):
        mindrecord.FileWriter(str(tmp_path / "s.mindrecord"), 3)
    writer = mindrecord.FileWriter(str(tmp_path / "b.mindrecord"))
    with pytest.raises(ValueError, match="'x' has type 'float8'"):
        writer.add_schema({"x": {"type": "float8"}})
    writer.add_schema({"x": {"type": "int64"}})
    with pytest.raises(ValueError, match="lacks field 'x'"):
        writer.write_raw_data([{"y": 1}])
    (tmp_path / "bad.mindrecord").write_bytes(b"MINDSPORE-SHARD")
    with pytest.raises(ValueError, match="not a zenith mindrecord"):
        ds.MindDataset(str(tmp_path / "bad.mindrecord"))


def labelled(n_per_class):
    labels = np.repeat(np.arange(len(n_per_class)), n_per_class).astype(np.int64)
    return {"x": np.arange(len(labels), dtype=np.float32), "label": labels}


def test_weighted_random_and_pk_samplers():
    data = labelled([3, 3])
    sampler = ds.WeightedRandomSampler([0, 0, 1, 0, 0, 3], num_samples=400)
    got = [int(x) for x, _ in ds.NumpySlicesDataset(data, sampler=sampler)
           .create_tuple_iterator(output_numpy=True)]
    counts = Counter(got)
    assert set(counts) == {2, 5} and 0.18 < counts[2] / 400 < 0.32
    once = ds.WeightedRandomSampler([1, 1, 1, 1, 1, 1], 6, replacement=False)
    assert sorted(int(x) for x, _ in ds.NumpySlicesDataset(data, sampler=once)
                  .create_tuple_iterator(output_numpy=True)) == list(range(6))
    data = labelled([1, 4, 2])
    pk = ds.NumpySlicesDataset(data, sampler=ds.PKSampler(2))
    assert [int(y) for _, y in pk.create_tuple_iterator(output_numpy=True)] == [0, 0, 1, 1, 2, 2]
    assert [int(x) for x, _ in ds.NumpySlicesDataset(data, sampler=ds.PKSampler(2))
            .create_tuple_iterator(output_numpy=True)] == [0, 0, 1, 2, 5, 6]
    with pytest.raises(ValueError, match="no column 'cls'"):
        ds.NumpySlicesDataset(data, sampler=ds.PKSampler(2, class_column="cls"))


def test_shuffle_modes_and_schema(tmp_path):
    assert ds.Shuffle.GLOBAL.value == "global" and ds.Shuffle("infile") is ds.Shuffle.INFILE
    (tmp_path / "t.txt").write_text("\n".join(str(i) for i in range(50)))
    lines = [str(x[0]) for x in ds.TextFileDataset(str(tmp_path / "t.txt"),
                                                   shuffle=ds.Shuffle.GLOBAL)
             .create_tuple_iterator(output_numpy=True)]
    assert sorted(lines, key=int) == [str(i) for i in range(50)] and lines[:5] != list("01234")
    schema = ds.Schema()
    schema.add_column("image", "uint8", [28, 28, 1])
    schema.add_column("label", "int32")
    body = json.loads(schema.to_json())
    assert body["columns"]["image"] == {"type": "uint8", "shape": [28, 28, 1], "rank": 3}
    path = tmp_path / "schema.json"
    path.write_text(schema.to_json())
    again = ds.Schema(str(path))
    assert [c["name"] for c in again.columns] == ["image", "label"]
    with pytest.raises(ValueError, match="unknown type"):
        schema.add_column("x", "complex64")
