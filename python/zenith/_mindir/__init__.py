"""MindIR files (MindSpore's protobuf mind_ir.ModelProto, schema in mind_ir.proto beside this
file) written from, and read back into, zenith's ONNX graphs.

zenith.export(..., file_format="MINDIR") traces the network into zenith's ONNX graph and
writes it here as a MindIR ModelProto: one GraphProto whose parameters are the weights
(TensorProto with dims, data_type and little-endian raw_data), whose input and output are
ValueInfoProtos (the batch dimension -1) and whose nodes carry MindSpore's primitive names and
attribute names (MatMul + BiasAdd for a Dense layer, Conv2D, MaxPool, ReLU, Softmax, ...).
zenith.load reads such a file back into an ONNX graph that nn.GraphCell runs. What MindSpore's
own exporter writes beyond this (primitives table, Return/MakeTuple nodes, abstract shapes,
control flow, functions) is not written, and a file that needs it is refused by name.
"""

import numpy as np

from zenith._mindir import mind_ir_pb2 as pb
from zenith._unsupported import UnsupportedError

__all__ = ["onnx_to_mindir", "mindir_to_onnx", "read"]

_A = pb.AttributeProto
_T = pb.TensorProto
# ONNX TensorProto.DataType -> MindIR TensorProto.DataType, and numpy types
_DTYPES = {1: (_T.FLOAT, np.float32), 7: (_T.INT64, np.int64), 6: (_T.INT32, np.int32),
           11: (_T.FLOAT64, np.float64), 10: (_T.FLOAT16, np.float16),
           2: (_T.UINT8, np.uint8), 9: (_T.BOOL, np.bool_)}
_TO_ONNX = {ms: onnx_type for onnx_type, (ms, _) in _DTYPES.items()}
_TO_ONNX[_T.DOUBLE] = 11

# element-wise ops: ONNX name -> MindSpore primitive name (and back)
_SAME = {"Relu": "ReLU", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log",
         "Sqrt": "Sqrt", "Neg": "Neg", "Abs": "Abs", "Erf": "Erf", "Add": "Add", "Sub": "Sub",
         "Mul": "Mul", "Div": "RealDiv", "Pow": "Pow", "Max": "Maximum", "Min": "Minimum",
         "Identity": "Identity"}
_SAME_BACK = {v: k for k, v in _SAME.items()}


# ---- attributes

def _attr(name, value):
    a = _A(name=name) if name else _A()
    if isinstance(value, bool):
        a.type, a.i = _A.BOOL, int(value)
    elif isinstance(value, int):
        a.type, a.i = _A.INT64, value
    elif isinstance(value, float):
        a.type, a.f = _A.FLOAT, value
    elif isinstance(value, str):
        a.type, a.s = _A.STRING, value.encode()
    else:  # a tuple of ints, as MindSpore's kernel_size, stride, pad, axis
        a.type = _A.TUPLE
        for v in value:
            a.values.append(_attr(None, int(v)))
    return a


def _attr_value(a):
    if a.type == _A.BOOL:
        return bool(a.i)
    if a.type == _A.INT64:
        return a.i
    if a.type == _A.FLOAT:
        return a.f
    if a.type == _A.STRING:
        return a.s.decode()
    if a.type in (_A.TUPLE, _A.LIST):
        return tuple(_attr_value(v) for v in a.values)
    raise UnsupportedError(f"mindspore.load: attribute {a.name!r} of type "
                           f"{_A.AttributeType.Name(a.type)} is not supported by zenith yet")


def _node(op_type, inputs, outputs, name, **attrs):
    n = pb.NodeProto(op_type=op_type, name=name, input=inputs, output=outputs)
    n.attribute.extend(_attr(k, v) for k, v in attrs.items())
    return n


# ---- ONNX -> MindIR

def _four(pair):
    return (1, 1, int(pair[0]), int(pair[1]))


def _pad_of(pads):
    """ONNX pads (top, left, bottom, right) as MindSpore's pad (top, bottom, left, right)."""
    top, left, bottom, right = (int(p) for p in pads)
    return (top, bottom, left, right)


def _convert_node(n, attrs, shapes):
    """The MindIR nodes of ONNX node n (attrs: its attributes as Python values)."""
    name, x, y = n.name or n.output[0], list(n.input), list(n.output)
    if n.op_type in _SAME:
        return [_node(_SAME[n.op_type], x, y, name)]
    if n.op_type == "Conv":
        out = y[0] + "/conv" if len(x) == 3 else y[0]
        w = shapes[x[1]]
        conv = _node("Conv2D", x[:2], [out], name, out_channel=int(w[0]),
                     kernel_size=tuple(attrs["kernel_shape"]), mode=1, pad_mode="pad",
                     pad=_pad_of(attrs.get("pads", (0, 0, 0, 0))),
                     stride=_four(attrs.get("strides", (1, 1))),
                     dilation=_four(attrs.get("dilations", (1, 1))),
                     group=int(attrs.get("group", 1)), format="NCHW")
        if len(x) < 3:
            return [conv]
        return [conv, _node("BiasAdd", [out, x[2]], y, name + "/bias", format="NCHW")]
    if n.op_type in ("Gemm", "MatMul"):
        if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or \
                attrs.get("beta", 1.0) != 1.0:
            raise UnsupportedError(f"mindspore.export: Gemm node {name!r} with transA, alpha "
                                   f"or beta is not supported by zenith's MindIR writer yet")
        out = y[0] + "/matmul" if len(x) == 3 else y[0]
        mm = _node("MatMul", x[:2], [out], name, transpose_a=False,
                   transpose_b=bool(attrs.get("transB", 0)))
        if len(x) < 3:
            return [mm]
        return [mm, _node("BiasAdd", [out, x[2]], y, name + "/bias", format="NCHW")]
    if n.op_type in ("MaxPool", "AveragePool"):
        if attrs.get("ceil_mode", 0):
            raise UnsupportedError(f"mindspore.export: pooling node {name!r} with ceil_mode is "
                                   f"not supported by zenith's MindIR writer yet")
        pads = _pad_of(attrs.get("pads", (0, 0, 0, 0)))
        extra = {"pad_mode": "VALID"} if not any(pads) else {"pad_mode": "PAD", "pad": pads}
        return [_node("MaxPool" if n.op_type == "MaxPool" else "AvgPool", x[:1], y[:1], name,
                      kernel_size=_four(attrs["kernel_shape"]),
                      strides=_four(attrs.get("strides", (1, 1))), format="NCHW", **extra)]
    if n.op_type == "GlobalAveragePool":
        return [_node("ReduceMean", x, y, name, axis=(2, 3), keep_dims=True)]
    if n.op_type == "Flatten":
        if attrs.get("axis", 1) != 1:
            raise UnsupportedError(f"mindspore.export: Flatten node {name!r} with axis "
                                   f"{attrs['axis']} is not supported (MindSpore's is axis 1)")
        return [_node("Flatten", x, y, name)]
    if n.op_type == "Reshape":
        return [_node("Reshape", x[:1], y, name, shape=tuple(shapes["const:" + x[1]]))]
    if n.op_type == "Transpose":
        return [_node("Transpose", x, y, name, perm=tuple(attrs["perm"]))]
    if n.op_type in ("Softmax", "LogSoftmax"):
        axis = int(attrs.get("axis", -1))
        return [_node(n.op_type, x, y, name, axis=(axis,) if n.op_type == "Softmax" else axis)]
    if n.op_type == "BatchNormalization":
        return [_node("BatchNorm", x, y[:1], name, is_training=False,
                      epsilon=float(attrs.get("epsilon", 1e-5)), format="NCHW")]
    raise UnsupportedError(f"mindspore.export: ONNX op {n.op_type} (node {name!r}) has no "
                           f"MindIR mapping in zenith yet")


def _tensor(name, array, onnx_type):
    ms_type, np_type = _DTYPES[onnx_type]
    little = np.dtype(np_type).newbyteorder("<")
    return _T(name=name, dims=list(array.shape), data_type=ms_type,
              raw_data=np.ascontiguousarray(array).astype(little).tobytes())


def _value_info(vi):
    t = vi.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
    return pb.ValueInfoProto(name=vi.name, tensor=[_T(name=vi.name, dims=dims,
                                                      data_type=_DTYPES[t.elem_type][0])])


def onnx_to_mindir(model, producer_version):
    """The mind_ir.ModelProto of an onnx.ModelProto that zenith's exporter wrote."""
    from onnx import helper, numpy_helper
    g = model.graph
    arrays = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    shapes = {name: a.shape for name, a in arrays.items()}
    reshape_targets = {n.input[1] for n in g.node if n.op_type == "Reshape"}
    for name in reshape_targets:
        shapes["const:" + name] = [int(v) for v in arrays[name]]
    graph = pb.GraphProto(name=model.graph.name)
    for t in g.initializer:
        if t.name not in reshape_targets:
            graph.parameter.append(_tensor(t.name, arrays[t.name], t.data_type))
    graph.input.extend(_value_info(vi) for vi in g.input)
    graph.output.extend(_value_info(vi) for vi in g.output)
    for n in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        graph.node.extend(_convert_node(n, attrs, shapes))
    for p in model.metadata_props:
        graph.attribute.append(_attr(p.key, p.value))
    return pb.ModelProto(ir_version="1", producer_name="zenith",
                         producer_version=producer_version, model_version="1",
                         doc_string="written by zenith.export (python/zenith/_mindir)",
                         graph=graph, little_endian=True, mind_ir_version=1)


# ---- MindIR -> ONNX

def read(path):
    """The mind_ir.ModelProto in path; ValueError when it is not one zenith can run."""
    model = pb.ModelProto()
    with open(path, "rb") as f:
        data = f.read()
    try:
        model.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError
        raise ValueError(f"{path} is not a MindIR file (mind_ir.ModelProto): {e}") from None
    if not model.HasField("graph") or not model.graph.node:
        raise ValueError(f"{path} is not a MindIR file: it holds no graph nodes")
    return model


def _array(t):
    if t.HasField("external_data") or t.compression_type:
        raise UnsupportedError(f"mindspore.load: parameter {t.name!r} uses external data or "
                               f"compression, not supported by zenith yet")
    np_type = _DTYPES[_TO_ONNX[t.data_type]][1]
    return np.frombuffer(t.raw_data, np.dtype(np_type).newbyteorder("<")).astype(
        np_type).reshape(list(t.dims))


def mindir_to_onnx(model):
    """The onnx.ModelProto that runs model's graph (the inverse of onnx_to_mindir)."""
    from onnx import helper, numpy_helper
    g = model.graph
    inits = [numpy_helper.from_array(_array(t), t.name) for t in g.parameter]
    by_output = {}
    for n in g.node:
        for o in n.output:
            by_output[o] = n
    fused = {}  # conv/matmul output -> BiasAdd node folded into it
    for n in g.node:
        if n.op_type == "BiasAdd" and by_output.get(n.input[0]) is not None and \
                by_output[n.input[0]].op_type in ("Conv2D", "MatMul"):
            fused[n.input[0]] = n
    nodes = []
    for n in g.node:
        a = {x.name: _attr_value(x) for x in n.attribute}
        x, y, name = list(n.input), list(n.output), n.name
        bias = fused.get(y[0]) if y else None
        if bias is not None:
            x, y = x + [bias.input[1]], list(bias.output)
        if n.op_type in _SAME_BACK:
            nodes.append(helper.make_node(_SAME_BACK[n.op_type], x, y, name))
        elif n.op_type == "BiasAdd":
            if n.input[0] not in fused:
                raise UnsupportedError(f"mindspore.load: BiasAdd node {name!r} not after a "
                                       f"Conv2D or MatMul is not supported by zenith yet")
        elif n.op_type == "Conv2D":
            top, bottom, left, right = a.get("pad", (0, 0, 0, 0))
            nodes.append(helper.make_node(
                "Conv", x, y, name, kernel_shape=list(a["kernel_size"]),
                pads=[top, left, bottom, right], strides=list(a["stride"][2:]),
                dilations=list(a["dilation"][2:]), group=a.get("group", 1)))
        elif n.op_type == "MatMul":
            if a.get("transpose_a"):
                raise UnsupportedError(f"mindspore.load: MatMul node {name!r} with transpose_a "
                                       f"is not supported by zenith yet")
            if a.get("transpose_b") or len(x) == 3:
                nodes.append(helper.make_node("Gemm", x, y, name,
                                              transB=int(a.get("transpose_b", False))))
            else:
                nodes.append(helper.make_node("MatMul", x, y, name))
        elif n.op_type in ("MaxPool", "AvgPool"):
            top, bottom, left, right = a.get("pad", (0, 0, 0, 0))
            nodes.append(helper.make_node(
                "MaxPool" if n.op_type == "MaxPool" else "AveragePool", x, y, name,
                kernel_shape=list(a["kernel_size"][2:]), strides=list(a["strides"][2:]),
                pads=[top, left, bottom, right]))
        elif n.op_type == "ReduceMean" and tuple(a.get("axis", ())) == (2, 3):
            nodes.append(helper.make_node("GlobalAveragePool", x, y, name))
        elif n.op_type == "Flatten":
            nodes.append(helper.make_node("Flatten", x, y, name, axis=1))
        elif n.op_type == "Reshape":
            shape_name = name + "/shape"
            inits.append(numpy_helper.from_array(np.array(a["shape"], np.int64), shape_name))
            nodes.append(helper.make_node("Reshape", x + [shape_name], y, name))
        elif n.op_type == "Transpose":
            nodes.append(helper.make_node("Transpose", x, y, name, perm=list(a["perm"])))
        elif n.op_type == "Softmax":
            axis = a.get("axis", (-1,))
            nodes.append(helper.make_node("Softmax", x, y, name, axis=int(
                axis[0] if isinstance(axis, tuple) else axis)))
        elif n.op_type == "LogSoftmax":
            nodes.append(helper.make_node("LogSoftmax", x, y, name, axis=int(a.get("axis", -1))))
        elif n.op_type == "BatchNorm":
            nodes.append(helper.make_node("BatchNormalization", x, y, name,
                                          epsilon=float(a.get("epsilon", 1e-5))))
        else:
            raise UnsupportedError(f"mindspore.load: MindIR op {n.op_type!r} (node {name!r}) "
                                   f"is not supported by zenith yet")

    def info(vi):
        t = vi.tensor[0]
        dims = ["batch" if d < 0 else int(d) for d in t.dims]
        return helper.make_tensor_value_info(vi.name, _TO_ONNX[t.data_type], dims)

    graph = helper.make_graph(nodes, g.name or "mindir", [info(v) for v in g.input],
                              [info(v) for v in g.output], inits)
    out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                            producer_name="zenith")
    out.ir_version = 8
    meta = {a.name: _attr_value(a) for a in g.attribute if a.type == _A.STRING}
    helper.set_model_props(out, meta)
    return out
