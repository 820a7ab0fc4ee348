"""zenith.export, zenith.load and nn.GraphCell (MindSpore's names) on zenith's ONNX exporter
and interpreter (src/onnx).

export(net, input, file_name=..., file_format='ONNX') traces net's inference forward on the
example input and writes <file_name>.onnx, a standard ONNX file (opset 17) that onnxruntime
and MindSpore Lite read. file_format='MINDIR' writes <file_name>.mindir, MindSpore's protobuf
mind_ir.ModelProto of the same graph with MindSpore's primitive names (zenith._mindir says
what it holds and what it lacks). load(path) returns the graph of either file, which
nn.GraphCell(graph) runs as an inference cell.
"""

import os
import tempfile

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
    metadata = {_FORMAT_KEY: file_format, "zenith.network": type(net).__name__}
    if file_format == "ONNX":
        _C.onnx.export(net, list(x.shape[1:]), os.path.abspath(path), metadata,
                       type(net).__name__)
        return path
    import onnx
    import zenith
    from zenith import _mindir
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "graph.onnx")
        _C.onnx.export(net, list(x.shape[1:]), onnx_path, metadata, type(net).__name__)
        model = _mindir.onnx_to_mindir(onnx.load(onnx_path), zenith.__version__)
    _write_atomically(os.path.abspath(path), model.SerializeToString())
    return path


def _write_atomically(path, data):
    fd, tmp = tempfile.mkstemp(prefix=".export-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class Graph:
    """A loaded graph (what mindspore.load returns): nn.GraphCell(graph) runs it. A MindIR
    file's graph is held as the ONNX model it converts to (onnx_model)."""

    def __init__(self, path, metadata, onnx_model=None):
        self.path, self.metadata, self.onnx_model = path, metadata, onnx_model

    def _cell(self):
        if self.onnx_model is None:
            return _C.onnx.load_cell(self.path)
        with tempfile.TemporaryDirectory() as tmp:
            onnx_path = os.path.join(tmp, "graph.onnx")
            with open(onnx_path, "wb") as f:
                f.write(self.onnx_model.SerializeToString())
            return _C.onnx.load_cell(onnx_path)  # read whole: the file may go

    def __repr__(self):
        return f"Graph({self.path!r})"


def load(file_name, **kwargs):
    """The graph in file_name: a .mindir file (MindIR of the ops zenith's writer maps) or an
    ONNX file."""
    path = os.path.abspath(str(file_name))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: {file_name} does not exist")
    if path.endswith(".mindir"):
        from zenith import _mindir
        try:
            model = _mindir.read(path)
        except ValueError as e:
            raise UnsupportedError(f"mindspore.load: {e}") from None
        onnx_model = _mindir.mindir_to_onnx(model)
        return Graph(path, {p.key: p.value for p in onnx_model.metadata_props}, onnx_model)
    return Graph(path, dict(_C.onnx.metadata(path)))


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
            return _make(cls, graph._cell(), graph=graph)

    return GraphCell


GraphCell = _graph_cell_class()
