"""zenith.export(file_format="MINDIR") writes MindSpore's protobuf (mind_ir.ModelProto), checked
independently with Debian's protoc against the schema; zenith.load + nn.GraphCell run it with
the original network's outputs."""

import os
import re
import subprocess

import numpy as np
import pytest

import zenith
from zenith import Tensor, nn

SCHEMA_DIR = os.path.join(os.path.dirname(zenith.__file__), "_mindir")


class LeNetish(nn.Cell):
    """The tutorials' layers: Conv2D (+ bias), ReLU, MaxPool, Flatten, Dense, Add, Softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, pad_mode="pad", padding=1, has_bias=True)
        self.conv2 = nn.Conv2d(4, 6, 5, pad_mode="valid")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(6 * 5 * 5, 32)
        self.fc2 = nn.Dense(32, 32, has_bias=False)
        self.fc3 = nn.Dense(32, 10)
        self.softmax = nn.Softmax()

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        h = self.relu(self.fc1(self.flatten(x)))
        return self.softmax(self.fc3(h + self.fc2(h)))


def _quickstart_mlp():
    return nn.SequentialCell(nn.Flatten(), nn.Dense(784, 64), nn.ReLU(), nn.Dense(64, 64),
                             nn.ReLU(), nn.Dense(64, 10))


def _decode(path):
    """protoc's text of the file (Debian's protoc, the schema in the package)."""
    with open(path, "rb") as f:
        out = subprocess.run(["protoc", "--decode", "mind_ir.ModelProto", "-I", SCHEMA_DIR,
                              "mind_ir.proto"], stdin=f, capture_output=True, check=True)
    return out.stdout.decode("latin-1")


def _nodes(text):
    """(op_type, inputs, outputs) of each node, in order, from protoc's text."""
    out = []
    for block in re.findall(r"\n  node \{\n(.*?)\n  \}", text, re.S):
        inputs = re.findall(r'^    input: "([^"]*)"', block, re.M)
        outputs = re.findall(r'^    output: "([^"]*)"', block, re.M)
        op = re.search(r'^    op_type: "([^"]*)"', block, re.M)[1]
        out.append((op, inputs, outputs))
    return out


def _parameters(text):
    return {m[3]: [int(d) for d in re.findall(r"-?\d+", m[1])]
            for m in re.finditer(r"\n  parameter \{\n((    dims: -?\d+\n)*)    data_type: 1\n"
                                 r'    name: "([^"]*)"', text)}


def _value_infos(text, kind):
    return [(m[1], [int(d) for d in re.findall(r"-?\d+", m[2])])
            for m in re.finditer(r"\n  " + kind + r' \{\n    name: "([^"]*)"\n    tensor \{\n'
                                 r"((      dims: -?\d+\n)*)", text)]


@pytest.mark.parametrize("make", [LeNetish, _quickstart_mlp])
def test_mindir_round_trip_gives_the_networks_outputs(tmp_path, rng, make):
    zenith.set_seed(1)
    net = make()
    x = Tensor(rng.normal(size=(2, 1, 28, 28)).astype(np.float32))
    path = zenith.export(net, x, file_name=str(tmp_path / "net"), file_format="MINDIR")
    assert path == str(tmp_path / "net") + ".mindir" and os.listdir(tmp_path) == ["net.mindir"]
    graph = zenith.load(path)
    assert graph.metadata["zenith.network"] == type(net).__name__
    cell = nn.GraphCell(graph)
    batch = Tensor(rng.normal(size=(5, 1, 28, 28)).astype(np.float32))  # any batch size
    np.testing.assert_allclose(cell(batch).asnumpy(), net(batch).asnumpy(), rtol=1e-5,
                               atol=1e-6)


def test_protoc_decodes_the_lenet_graph(tmp_path, rng):
    net = LeNetish()
    x = Tensor(rng.normal(size=(1, 1, 28, 28)).astype(np.float32))
    text = _decode(zenith.export(net, x, file_name=str(tmp_path / "lenet"),
                                 file_format="MINDIR"))
    assert 'producer_name: "zenith"' in text and "little_endian: true" in text
    nodes = _nodes(text)
    assert [op for op, _, _ in nodes] == [
        "Conv2D", "BiasAdd", "ReLU", "MaxPool", "Conv2D", "ReLU", "MaxPool", "Flatten",
        "MatMul", "BiasAdd", "ReLU", "MatMul", "Add", "MatMul", "BiasAdd", "Softmax"]
    # each node reads the graph input, a parameter or an earlier node's output
    params = _parameters(text)
    assert params == {"conv1.weight": [4, 1, 3, 3], "conv1.bias": [4],
                      "conv2.weight": [6, 4, 5, 5], "fc1.weight": [32, 150], "fc1.bias": [32],
                      "fc2.weight": [32, 32], "fc3.weight": [10, 32], "fc3.bias": [10]}
    inputs = _value_infos(text, "input")
    outputs = _value_infos(text, "output")
    assert inputs == [("input", [-1, 1, 28, 28])] and outputs == [("output", [-1, 10])]
    known = {"input"} | set(params)
    for op, ins, outs in nodes:
        assert ins and set(ins) <= known, (op, ins)
        known |= set(outs)
    assert nodes[0][1] == ["input", "conv1.weight"] and nodes[1][1][1] == "conv1.bias"
    assert nodes[-1][2] == ["output"]
    # MindSpore's attribute conventions on Conv2D and MaxPool
    conv = re.search(r'op_type: "Conv2D"(.*?)\n  \}', text, re.S)[1]
    assert re.search(r'name: "pad_mode"\n      s: "pad"', conv)
    assert re.search(r'name: "out_channel"\n      i: 4', conv)
    pool = re.search(r'op_type: "MaxPool"(.*?)\n  \}', text, re.S)[1]
    assert re.search(r'name: "pad_mode"\n      s: "VALID"', pool)
    # the weights are the network's, little-endian float32
    raw = zenith.load(str(tmp_path / "lenet.mindir")).onnx_model.graph.initializer
    from onnx import numpy_helper
    weights = {t.name: numpy_helper.to_array(t) for t in raw}
    np.testing.assert_array_equal(weights["fc1.weight"], net.fc1.weight.asnumpy())


def test_the_generated_module_is_current(tmp_path):
    subprocess.run(["protoc", f"--python_out={tmp_path}", "-I", SCHEMA_DIR, "mind_ir.proto"],
                   check=True)
    with open(os.path.join(SCHEMA_DIR, "mind_ir_pb2.py")) as f:
        committed = f.read()
    assert (tmp_path / "mind_ir_pb2.py").read_text() == committed


def test_unknown_ops_and_foreign_files_are_refused_by_name(tmp_path, rng):
    from zenith._mindir import mind_ir_pb2 as pb
    path = zenith.export(_quickstart_mlp(), Tensor(np.ones((1, 1, 28, 28), np.float32)),
                         file_name=str(tmp_path / "mlp"), file_format="MINDIR")
    model = pb.ModelProto()
    with open(path, "rb") as f:
        model.ParseFromString(f.read())
    model.graph.node[2].op_type = "REF::Conv3D"
    edited = tmp_path / "edited.mindir"
    edited.write_bytes(model.SerializeToString())
    with pytest.raises(zenith.UnsupportedError, match=r"MindIR op 'REF::Conv3D'"):
        zenith.load(str(edited))
    empty = tmp_path / "empty.mindir"
    empty.write_bytes(pb.ModelProto(producer_name="MindSpore").SerializeToString())
    with pytest.raises(zenith.UnsupportedError, match="holds no graph nodes"):
        zenith.load(str(empty))
