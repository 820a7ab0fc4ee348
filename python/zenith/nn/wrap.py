"""Wrapper cells: a network with its loss (MindSpore's nn.WithLossCell), and data
parallelism: nn.DistributedGradReducer for functional loops and DistributedDataParallel (what
Model uses under set_auto_parallel_context(parallel_mode="data_parallel"))."""

from zenith import _zenith as _C
from zenith.nn.cell import Cell
from zenith.nn.layers import _Builtin, _make

__all__ = ["WithLossCell", "DistributedGradReducer", "DistributedDataParallel"]


class WithLossCell(Cell):
    """loss_fn(backbone(data), label)."""

    def __init__(self, backbone, loss_fn):
        super().__init__()
        self._backbone = backbone
        self._loss_fn = loss_fn
        self.backbone = backbone

    def construct(self, data, label):
        return self._loss_fn(self._backbone(data), label)

    @property
    def backbone_network(self):
        return self._backbone


class DistributedGradReducer(Cell):
    """All-reduces gradients across the job's ranks (communication.init() first): their mean
    (mean=True) or sum. Use in a value_and_grad loop before optimizer(grads)."""

    def __init__(self, parameters, mean=True, degree=None, fusion_type=1, group=None):
        super().__init__()
        self.mean = mean
        self.degree = degree

    def construct(self, grads):
        out = []
        for g in grads:
            g = g.contiguous()
            _C.communication.all_reduce(g, "mean" if self.mean else "sum")
            out.append(g)
        return tuple(out)


class DistributedDataParallel(_Builtin):
    """network trained data-parallel over the job's ranks (communication.init() first; every
    rank builds it with the same network): rank 0's parameters and buffers are broadcast, and
    backward all-reduces the gradients (their mean) in buckets of bucket_cap_mb MiB while it
    runs. Parameter names are the network's own, so checkpoints load with or without it."""

    __slots__ = ()

    def __new__(cls, network, bucket_cap_mb=25.0):
        if not isinstance(network, Cell):
            raise TypeError(f"DistributedDataParallel wraps a Cell, got {type(network).__name__}")
        cell = _C.communication.DistributedDataParallel(network, float(bucket_cap_mb))
        return _make(cls, cell, module=network)
