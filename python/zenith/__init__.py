"""zenith: an AI training platform in C++, with MindSpore's Python names.

    import zenith
    from zenith import nn, ops
    import zenith.dataset as ds
    from zenith.dataset import vision

    zenith.set_context(mode=zenith.PYNATIVE_MODE, device_target="CPU")
    net = nn.SequentialCell([nn.Conv2d(1, 32, 3, pad_mode="valid"), nn.ReLU(), ...])
    model = zenith.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                         nn.Momentum(net.trainable_params(), 0.01, 0.9), metrics={"accuracy"})
    model.train(10, train_ds, callbacks=[zenith.train.LossMonitor()])

Tensors, ops, autograd, cells, optimizers, the input pipeline and Model.train run in zenith's
C++ core (this package binds it: zenith._zenith); Python cells, losses, transforms, dataset
sources and callbacks are called back from C++. Errors of the core raise zenith.Error (a
ValueError and a RuntimeError) with the C++ message, e.g. "[conv2d] input has 3 channels,
weight expects 1".
"""

from zenith._zenith import Error
from zenith._tensor import (Parameter, ParameterTuple, Tensor, bfloat16, bool_, dtype, float16,
                            float32, float64, int32, int64, uint8)
from zenith.context import (GRAPH_MODE, PYNATIVE_MODE, ParallelMode, get_auto_parallel_context,
                            get_context, get_seed, reset_auto_parallel_context,
                            set_auto_parallel_context, set_context, set_seed)
from zenith._grad import grad, value_and_grad
from zenith import ops, nn, dataset, train, communication, models, llm
from zenith._checkpoint import load_checkpoint, load_param_into_net, save_checkpoint
from zenith.train import Model
from zenith.profiler import Profiler
from zenith import _ms_ops, _ms_tensor
from zenith._export import export, load
from zenith._jit import COMPATIBLE, LAX, STRICT, JitConfig, jit, jit_class
from zenith._ms_tensor import COOTensor, CSRTensor
from zenith._uint32 import uint32
from zenith._unsupported import UnsupportedError, unsupported as _unsupported
from zenith import amp, common, experimental, mindrecord
from zenith.amp import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager

_ms_ops.install()
from zenith import _ms_more  # noqa: E402
_ms_more.install()
from zenith import _ms_functions  # noqa: E402
_ms_functions.install()
from zenith import _ms_prims2  # noqa: E402
_ms_prims2.install()
from zenith import _ms_functions2  # noqa: E402
_ms_functions2.install()
from zenith import _ms_math, _ms_prims3, _ms_scatter  # noqa: E402
_ms_math.install()
_ms_scatter.install()
_ms_prims3.install()
_ms_tensor.install()
from zenith import _uint32  # noqa: E402
_uint32.install()
__getattr__ = _unsupported(__name__)

__version__ = "0.1.0"

__all__ = [
    "Error", "Tensor", "Parameter", "ParameterTuple", "dtype", "float16", "float32", "float64",
    "bfloat16", "int32", "int64", "uint8", "uint32", "bool_",
    "PYNATIVE_MODE", "GRAPH_MODE", "set_context", "get_context", "set_seed", "get_seed",
    "ParallelMode", "set_auto_parallel_context", "get_auto_parallel_context",
    "reset_auto_parallel_context",
    "value_and_grad", "grad",
    "save_checkpoint", "load_checkpoint", "load_param_into_net",
    "Model", "Profiler",
    "ops", "nn", "dataset", "train", "communication", "models", "llm",
    "jit", "jit_class", "JitConfig", "STRICT", "COMPATIBLE", "LAX", "CSRTensor", "COOTensor",
    "UnsupportedError", "amp", "common", "LossScaleManager", "FixedLossScaleManager",
    "DynamicLossScaleManager", "export", "load",
]
