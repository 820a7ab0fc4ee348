"""zenith.export, zenith.load and nn.GraphCell (MindSpore's names) on zenith's ONNX exporter
and interpreter (src/onnx).

export(net, input, file_name=..., file_format='ONNX') traces net's inference forward on the
example input and writes <file_name>.onnx, a standard ONNX file (opset 17) that onnxruntime
and MindSpore Lite read. file_format='MINDIR' writes <file_name>.mindir holding the same ONNX
graph: zenith cannot write MindSpore's MindIR protobuf, so the file round-trips through
zenith.load but MindSpore cannot read it, and zenith.load refuses MindIR files that MindSpore
wrote. load(path) returns the graph, which nn.GraphCell(graph) runs as an inference cell.
"""

import os

from zenith import _zenith as _C
from zenith._tensor import _as_tensor
from zenith._unsupported import UnsupportedError

__all__ = ["export", "load", "Graph", "GraphCell"]

_EXTENSIONS = {"ONNX": ".onnx", "MINDIR": ".mindir"}
_FORMAT_KEY = "zenith.export_format"


def export(net, *inputs, file_name, file_format="MINDIR", **kwargs):
    """Writes net's inference graph for inputs shaped like inputs[0] (any batch size) to
    file_name + '.onnx' or '.mindir' (see the module's doc). Returns the path."""
    if file_format not in _EXTENSIONS:
        raise UnsupportedError(f"mindspore.export: file_format {file_format!r} is not supported "
                               f"by zenith yet (supported: ONNX, MINDIR)")
    if len(inputs) != 1:
        raise ValueError(f"export: zenith exports networks of one input, got {len(inputs)}")
    x = _as_tensor(inputs[0])
    if x.ndim < 2:
        raise ValueError(f"export: the input needs a batch dimension, got shape {x.shape}")
    ext = _EXTENSIONS[file_format]
    path = str(file_name) if str(file_name).endswith(ext) else f"{file_name}{ext}"
    _C.onnx.export(net, list(x.shape[1:]), os.path.abspath(path),
                   {_FORMAT_KEY: file_format, "zenith.network": type(net).__name__},
                   type(net).__name__)
    return path


class Graph:
    """A loaded graph (what mindspore.load returns): nn.GraphCell(graph) runs it."""

    def __init__(self, path, metadata):
        self.path, self.metadata = path, metadata

    def __repr__(self):
        return f"Graph({self.path!r})"


def load(file_name, **kwargs):
    """The graph in file_name (an .onnx file, or a .mindir that zenith.export wrote)."""
    path = os.path.abspath(str(file_name))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: {file_name} does not exist")
    try:
        metadata = dict(_C.onnx.metadata(path))
    except _C.Error as e:
        if path.endswith(".mindir"):
            raise UnsupportedError(
                f"mindspore.load: {file_name} is not a MindIR file zenith wrote; reading "
                f"MindSpore's MindIR is not supported by zenith yet ({e})") from None
        raise
    return Graph(path, metadata)


def _graph_cell_class():
    from zenith.nn.layers import _Builtin, _make

    class GraphCell(_Builtin):
        """Runs a loaded graph (mindspore.nn.GraphCell): inference only, one input."""

        __slots__ = ()

        def __new__(cls, graph, params_init=None, obf_random_seed=None):
            if params_init is not None or obf_random_seed is not None:
                raise UnsupportedError("mindspore.nn.GraphCell: params_init and obf_random_seed "
                                       "are not supported by zenith yet")
            if not isinstance(graph, Graph):
                raise TypeError(f"GraphCell takes what zenith.load returns, got "
                                f"{type(graph).__name__}")
            return _make(cls, _C.onnx.load_cell(graph.path), graph=graph)

    return GraphCell


GraphCell = _graph_cell_class()
