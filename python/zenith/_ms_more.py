"""More MindSpore names on zenith's existing pieces: the top-level callback names
(mindspore.LossMonitor, ...), ms_function/ms_class/mutable/run_check, the dtype converters,
nn.TrainOneStepCell/WithEvalCell/WithGradCell/ForwardValueAndGrad, and ops functions composed
from zenith.ops (gradients flow through the float ones)."""

import numpy as np

from zenith import ops
from zenith._tensor import (Tensor, _as_tensor, bool_, float16, float32, float64, int32, int64,
                            uint8)

_NP = {float16: np.float16, float32: np.float32, float64: np.float64, int32: np.int32,
       int64: np.int64, uint8: np.uint8, bool_: np.bool_}


def dtype_to_nptype(type_):
    """The numpy type of a zenith dtype (zenith.float32 -> numpy.float32)."""
    return _NP[type_]


def dtype_to_pytype(type_):
    """The Python type of a zenith dtype (float, int or bool)."""
    return bool if type_ == bool_ else (float if type_.is_floating_point else int)


def pytype_to_dtype(obj):
    """The zenith dtype of a Python or numpy type (float -> float32 as MindSpore's float_)."""
    if obj is bool:
        return bool_
    if obj is int:
        return int64
    if obj is float:
        return float32
    for d, n in _NP.items():
        if np.dtype(obj) == np.dtype(n):
            return d
    raise TypeError(f"pytype_to_dtype: no zenith dtype for {obj!r}")


def mutable(input_data, dynamic_len=False):
    """Marks a value as variable for MindSpore's graph compiler; zenith runs it as is."""
    return input_data


def run_check():
    """Checks the installation: runs an addition and prints MindSpore's message."""
    import zenith
    x = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    assert (x + x).asnumpy().tolist() == [2.0, 4.0, 6.0]
    print(f"zenith version: {zenith.__version__}")
    print("The result of multiplication calculation is correct, zenith has been installed on "
          "platform [CPU] successfully!")


def get_level():
    """The log level as MindSpore's: GLOG_v ('2', warnings, by default)."""
    import os
    return os.environ.get("GLOG_v", "2")


def get_log_config():
    """The logging settings (MindSpore's GLOG_* variables) as a dict."""
    import os
    return {"GLOG_v": get_level(), "GLOG_logtostderr": os.environ.get("GLOG_logtostderr", "1")}


# ---- ops functions

def relu6(input):
    """min(max(input, 0), 6)."""
    return ops.clamp(input, 0.0, 6.0)


def hardswish(x):
    """x * relu6(x + 3) / 6."""
    return x * ops.clamp(x + 3.0, 0.0, 6.0) / 6.0


def softsign(x):
    """x / (1 + |x|)."""
    return x / (ops.abs(x) + 1.0)


def selu(input_x):
    """scale * ELU(x, alpha) with the self-normalising constants."""
    return (ops.relu(input_x) + (ops.exp(-ops.relu(-input_x)) - 1.0) * 1.6732632423543772) * \
        1.0507009873554805


def celu(x, alpha=1.0):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return ops.relu(x) + (ops.exp(-ops.relu(-x) / alpha) - 1.0) * alpha


def mish(x):
    """x * tanh(softplus(x))."""
    return x * ops.tanh(ops.relu(x) + ops.log(ops.exp(-ops.abs(x)) + 1.0))


def logsumexp(input, axis, keep_dims=False):
    """log(sum(exp(input), axis)), computed stably."""
    m = ops.stop_gradient(input.max(axis, keepdims=True))
    out = ops.log(ops.exp(input - m).sum(axis, keepdims=True)) + m
    return out if keep_dims else out.squeeze(axis)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """The 2-norm (Frobenius for matrices) over dim (all elements by default)."""
    if ord not in (None, 2, "fro"):
        raise ValueError(f"norm: ord {ord!r} is not supported (2 / 'fro' only)")
    return ops.sqrt((A * A).sum(dim, keepdims=keepdim))


def clip_by_value(x, clip_value_min=None, clip_value_max=None):
    """x (or each tensor of a list) clamped to [clip_value_min, clip_value_max]."""
    if isinstance(x, (list, tuple)):
        return type(x)(clip_by_value(v, clip_value_min, clip_value_max) for v in x)
    return ops.clamp(x, clip_value_min, clip_value_max)


def bmm(input_x, mat2):
    """Batched matrix product."""
    return ops.matmul(input_x, mat2)


def isnan(input):
    """True where input is NaN."""
    x = _as_tensor(input)
    return ops.not_equal(x, x)


def logical_not(input):
    """True where input is zero (False)."""
    return ops.equal(_as_tensor(input).astype(bool_), False)


def install():
    import zenith
    from zenith import nn, train
    from zenith._jit import jit, jit_class
    for name in ("Callback", "CheckpointConfig", "EarlyStopping", "LossMonitor",
                 "ModelCheckpoint", "RunContext", "TimeMonitor", "SummaryCollector", "History",
                 "LambdaCallback", "LearningRateScheduler", "ReduceLROnPlateau"):
        setattr(zenith, name, getattr(train, name))
    zenith.ms_function, zenith.ms_class = jit, jit_class
    for f in (dtype_to_nptype, dtype_to_pytype, pytype_to_dtype, mutable, run_check, get_level,
              get_log_config):
        setattr(zenith, f.__name__, f)
    for f in (relu6, hardswish, softsign, selu, celu, mish, logsumexp, norm, clip_by_value, bmm,
              isnan, logical_not):
        setattr(ops, f.__name__, f)
        ops.__all__.append(f.__name__)
    ops.ge, ops.gt, ops.le, ops.ne = (ops.greater_equal, ops.greater, ops.less_equal,
                                      ops.not_equal)
    ops.expand = ops.broadcast_to
    from zenith._wrap_more import ForwardValueAndGrad, TrainOneStepCell, WithEvalCell, WithGradCell
    for cls in (TrainOneStepCell, WithEvalCell, WithGradCell, ForwardValueAndGrad):
        setattr(nn, cls.__name__, cls)
        nn.__all__.append(cls.__name__)
