"""MindSpore's semi-auto parallel shard strategies on nn.Dense, run as zenith's tensor parallel.

    zenith.communication.init()
    zenith.set_auto_parallel_context(parallel_mode=zenith.ParallelMode.SEMI_AUTO_PARALLEL,
                                     device_num=2)
    self.fc1 = nn.Dense(16, 64); self.fc1.matmul.shard(((1, 1), (2, 1)))   # column-parallel
    self.fc2 = nn.Dense(64, 16); self.fc2.matmul.shard(((1, 2), (1, 2)))   # row-parallel

A strategy is MindSpore's for Dense's MatMul(transpose_b=True): one tuple for the input
[batch, in] and one for the weight [out, in]; a number splits that dimension over the ranks.
Every rank of the job is one tensor-parallel group (device_num ranks, every rank the same batch):

    ((1, 1), (N, 1))   the weight's rows (outputs) split: y_r = x W_r^T + b_r, the output
                       gathered (each rank's block summed into place by an all-reduce)
    ((1, N), (1, N))   the weight's columns (inputs) split: y = sum_r x_r W_r^T, all-reduced,
                       then the bias once
    ((1, 1), (1, 1))   replicated

Gradients flow through Megatron's conjugate collectives, so every replicated parameter gets the
same gradient on every rank and one optimizer step keeps them equal: the loss and the updates are
one process's. Any other strategy (a split batch, a split other than the world's size, both
dimensions split) raises zenith.UnsupportedError naming it. The Dense must be called from a
Cell's construct (Python): a Dense inside SequentialCell runs its C++ forward, which knows no
strategy, so shard() refuses it there.
"""

from zenith import _zenith as _C
from zenith._unsupported import UnsupportedError

__all__ = ["MatMulShard", "shard_dense", "is_tensor_parallel"]

# Parameters split by a strategy (each rank holds its own part), by their tensors' identity:
# the optimizer parallel (zenith.nn.parallel_optimizer) does not shard them again.
_SPLIT = set()


def is_tensor_parallel(param):
    """Whether a shard strategy split `param` over the ranks."""
    return param._id() in _SPLIT


def _mode():
    from zenith.context import ParallelMode, get_auto_parallel_context
    return get_auto_parallel_context("parallel_mode") == ParallelMode.SEMI_AUTO_PARALLEL


def _strategy(strategy):
    try:
        s = tuple(tuple(int(v) for v in dims) for dims in strategy)
    except (TypeError, ValueError):
        raise ValueError(f"Dense.matmul.shard: a strategy is two tuples of ints, got "
                         f"{strategy!r}") from None
    if len(s) != 2 or any(len(d) != 2 for d in s) or any(v < 1 for d in s for v in d):
        raise ValueError(f"Dense.matmul.shard: strategy {strategy!r} must be ((a, b), (c, b)) "
                         "of positive ints: input [batch, in], weight [out, in]")
    return s


def shard_dense(dense, strategy):
    """Splits `dense`'s weight (and bias) for `strategy` over the job's ranks and makes its
    forward run the matching collectives; see the module's text."""
    s = _strategy(strategy)
    if not _mode():
        # MindSpore keeps the strategy and ignores it outside (semi-)auto parallel.
        object.__setattr__(dense, "_shard_strategy", s)
        return dense
    if dense.__dict__.get("_in_sequential"):
        raise UnsupportedError(f"Dense.matmul.shard({s}): the Dense is inside a SequentialCell, "
                               "whose chain runs in C++ without strategies; call it from a "
                               "Cell's construct")
    if not _C.communication.is_initialized():
        raise ValueError("Dense.matmul.shard: call zenith.communication.init() first")
    n, rank = _C.communication.get_group_size(), _C.communication.get_rank()
    from zenith.context import get_auto_parallel_context
    devices = get_auto_parallel_context("device_num")
    if devices not in (1, n):  # 1: not set
        raise ValueError(f"Dense.matmul.shard: set_auto_parallel_context(device_num={devices}) "
                         f"but the job has {n} ranks")
    (batch, k_in), (out, k_w) = s
    if s == ((1, 1), (1, 1)):
        return dense
    if batch == 1 and k_in == 1 and k_w == 1 and out == n:
        kind = "column"
    elif batch == 1 and out == 1 and k_in == n and k_w == n:
        kind = "row"
    else:
        raise UnsupportedError(
            f"Dense.matmul.shard: strategy {s} is not supported on {n} ranks (zenith splits one "
            f"Dense's weight over every rank: ((1, 1), ({n}, 1)) column-parallel or "
            f"((1, {n}), (1, {n})) row-parallel; for a split batch use data_parallel)")
    if dense.__dict__.get("_tp") is not None:
        raise ValueError(f"Dense.matmul.shard: this Dense is already sharded "
                         f"({dense._tp['strategy']})")
    weight = dense.weight
    rows, cols = weight.shape
    size = rows if kind == "column" else cols
    if size % n:
        raise ValueError(f"Dense.matmul.shard: strategy {s} splits {size} "
                         f"{'outputs' if kind == 'column' else 'inputs'} over {n} ranks: "
                         "not divisible")
    part = size // n
    lo, hi = rank * part, (rank + 1) * part
    w = weight.asnumpy()
    weight.set_data(w[lo:hi] if kind == "column" else w[:, lo:hi].copy())
    bias = dense.bias if dense.has_bias else None
    _SPLIT.add(weight._id())
    if bias is not None and kind == "column":
        bias.set_data(bias.asnumpy()[lo:hi])
        _SPLIT.add(bias._id())
    object.__setattr__(dense, "_tp", {"kind": kind, "strategy": s, "lo": lo, "hi": hi,
                                      "out": rows})
    object.__setattr__(dense, "_shard_strategy", s)
    dense.__class__ = _sharded_class(type(dense))
    return dense


def _forward(dense, x):
    from zenith import ops
    tp = dense._tp
    weight = dense.weight
    bias = dense.bias if dense.has_bias else None
    x = _C.communication.copy_to_tensor_parallel(x)  # the input's gradient summed over ranks
    if tp["kind"] == "column":
        y = _C.ops.linear(x, weight, bias)
        # Each rank's block in place in zeros; the all-reduce is the gathered output, and its
        # identity backward hands each block its slice of the gradient.
        shape = list(y.shape)
        parts = []
        if tp["lo"] > 0:
            parts.append(ops.zeros(tuple(shape[:-1] + [tp["lo"]]), y.dtype))
        parts.append(y)
        if tp["hi"] < tp["out"]:
            parts.append(ops.zeros(tuple(shape[:-1] + [tp["out"] - tp["hi"]]), y.dtype))
        full = ops.concat(parts, -1) if len(parts) > 1 else y
        return _C.communication.reduce_from_tensor_parallel(full)
    y = _C.ops.linear(x[..., tp["lo"]:tp["hi"]], weight, None)
    y = _C.communication.reduce_from_tensor_parallel(y)
    return y + bias if bias is not None else y


_SHARDED = {}


def _sharded_class(cls):
    """cls with a Python __call__ that runs the sharded forward (one subclass per class)."""
    if cls not in _SHARDED:
        _SHARDED[cls] = type(cls.__name__, (cls,), {
            "__slots__": (), "__call__": _forward, "construct": _forward,
            "__module__": cls.__module__})
    return _SHARDED[cls]


class MatMulShard:
    """Dense.matmul: MindSpore's MatMul primitive inside nn.Dense, for .shard(strategy)."""

    __slots__ = ("_dense",)

    def __init__(self, dense):
        self._dense = dense

    def shard(self, in_strategy, out_strategy=None):
        if out_strategy is not None:
            raise UnsupportedError(f"MatMul.shard: out_strategy {out_strategy!r} is not "
                                   "supported (zenith picks the output's layout)")
        shard_dense(self._dense, in_strategy)
        return self

    def __repr__(self):
        return f"MatMul(transpose_b=True, strategy={self._dense.__dict__.get('_shard_strategy')})"
