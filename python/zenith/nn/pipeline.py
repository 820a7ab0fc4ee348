"""MindSpore's pipeline parallel for a sequential network, run as a GPipe schedule.

    zenith.communication.init()                       # 2 ranks
    zenith.set_auto_parallel_context(parallel_mode=zenith.ParallelMode.SEMI_AUTO_PARALLEL,
                                     pipeline_stages=2)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 4)])
    net[0].pipeline_stage = 0; net[1].pipeline_stage = 0; net[2].pipeline_stage = 1
    pipe = nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), micro_size=4)
    opt = nn.Momentum(pipe.trainable_params(), 0.1, 0.9)   # this stage's parameters
    loss = pipe(x, y)        # forward and backward of the batch; every rank the same batch
    opt.step(); opt.zero_grad()

The backbone is a SequentialCell whose cells carry `pipeline_stage` (a cell without one is on
its predecessor's stage; stages never go back). Rank s of the job runs stage s's cells: the
batch is split into micro_size micro-batches, every micro-batch goes forward (activations sent
to the next stage), then every one backward (their gradients sent back), each micro-batch's
loss weighted 1/micro_size, so the gradients left on this stage's parameters are one process's
on the whole batch (a mean loss over equal micro-batches). The call returns the batch's mean
loss on every rank. Each rank computes and updates only its stage's parameters; it still builds
the whole network (the other stages' weights are made, never used).
"""

import numpy as np

from zenith import _zenith as _C
from zenith._tensor import Tensor, _as_tensor
from zenith._unsupported import UnsupportedError
from zenith.nn.cell import Cell, SequentialCell

__all__ = ["PipelineCell", "stage_of_cells"]

_MAX_DIMS = 8  # an activation's rank, at most, in the shape message


def stage_of_cells(cells, stages):
    """The stage of each cell: its pipeline_stage, or its predecessor's; checked."""
    out, current = [], 0
    for i, cell in enumerate(cells):
        stage = getattr(cell, "pipeline_stage", None)
        if stage is None:
            stage = current
        if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < stages:
            raise ValueError(f"PipelineCell: cell {i} ({type(cell).__name__}) has pipeline_stage "
                             f"{stage!r}; expected an int in [0, {stages}) "
                             f"(set_auto_parallel_context(pipeline_stages={stages}))")
        if stage < current:
            raise ValueError(f"PipelineCell: cell {i} ({type(cell).__name__}) is on stage {stage} "
                             f"after a cell on stage {current}; stages must not go back")
        out.append(stage)
        current = stage
    missing = sorted(set(range(stages)) - set(out))
    if missing:
        raise ValueError(f"PipelineCell: no cell on stage(s) {missing} of {stages}")
    return out


class PipelineCell(Cell):
    """network (WithLossCell(backbone, loss_fn), backbone a SequentialCell) split into the
    stages its cells' pipeline_stage name, micro_size micro-batches per call (MindSpore's
    nn.PipelineCell); see the module's text."""

    def __init__(self, network, micro_size, stage_config=None):
        super().__init__()
        from zenith.context import ParallelMode, get_auto_parallel_context
        if stage_config is not None:
            raise UnsupportedError("PipelineCell: stage_config is not supported; set "
                                   "cell.pipeline_stage on the backbone's cells")
        if isinstance(micro_size, bool) or not isinstance(micro_size, int) or micro_size < 1:
            raise ValueError(f"PipelineCell: micro_size must be an int >= 1, got {micro_size!r}")
        backbone = getattr(network, "backbone_network", None)
        loss_fn = getattr(network, "_loss_fn", None)
        if not isinstance(backbone, SequentialCell) or loss_fn is None:
            raise UnsupportedError("PipelineCell: zenith pipelines nn.WithLossCell(backbone, "
                                   "loss_fn) whose backbone is a SequentialCell, got "
                                   f"{type(network).__name__}")
        stages = get_auto_parallel_context("pipeline_stages")
        if get_auto_parallel_context("parallel_mode") != ParallelMode.SEMI_AUTO_PARALLEL:
            raise ValueError("PipelineCell: set_auto_parallel_context(parallel_mode="
                             "'semi_auto_parallel', pipeline_stages=N) first")
        if not _C.communication.is_initialized():
            raise ValueError("PipelineCell: call zenith.communication.init() first")
        ranks = _C.communication.get_group_size()
        if stages != ranks:
            raise UnsupportedError(f"PipelineCell: pipeline_stages={stages} on {ranks} ranks; "
                                   "zenith runs one pipeline over every rank of the job "
                                   "(pipeline_stages = the number of ranks)")
        if micro_size < stages:
            raise ValueError(f"PipelineCell: micro_size {micro_size} must be >= pipeline_stages "
                             f"{stages}")
        cells = list(backbone)
        where = stage_of_cells(cells, stages)
        self._mesh = _C.communication.PipelineMesh(stages)
        self._stage, self._stages = self._mesh.stage, stages
        self._cells = [c for c, s in zip(cells, where) if s == self._stage]
        self._loss_fn = loss_fn
        self.network = network
        self.micro_size = micro_size

    @property
    def stage(self):
        """This rank's stage."""
        return self._stage

    def trainable_params(self, recurse=True):
        """This stage's trainable parameters (give these to the optimizer)."""
        return [p for c in self._cells for p in c.trainable_params(recurse)]

    def construct(self, data, label):
        data, label = _as_tensor(data), _as_tensor(label)
        batch = data.shape[0]
        if batch % self.micro_size or label.shape[0] != batch:
            raise ValueError(f"PipelineCell: a batch of {batch} (labels {label.shape[0]}) does "
                             f"not split into micro_size={self.micro_size} equal micro-batches")
        step = batch // self.micro_size
        first, last = self._stage == 0, self._stage == self._stages - 1
        kept = []  # (input, output) of each micro-batch on this stage
        total = 0.0
        for j in range(self.micro_size):  # every micro-batch forward (GPipe)
            if first:
                x = data[j * step:(j + 1) * step]
            else:
                x = self._recv_activation()
                x.requires_grad = True
            out = x
            for cell in self._cells:
                out = cell(out)
            if last:
                out = self._loss_fn(out, label[j * step:(j + 1) * step]) * (1.0 / self.micro_size)
                total += float(out.item())
            else:
                self._send_activation(out)
            kept.append((x, out))
        for x, out in reversed(kept):  # then every one backward, the last first
            if last:
                _C.autograd.backward(out, None)
            else:
                grad = Tensor(np.zeros(out.shape, np.float32))
                self._mesh.recv_next(grad)
                _C.autograd.backward(out, grad)
            if not first:
                grad_in = _C.autograd.get_grad(x)
                self._mesh.send_prev(grad_in.contiguous())
        loss = Tensor(np.array([total if last else 0.0], np.float32))
        _C.communication.all_reduce(loss, "sum")  # the last stage's loss on every rank
        return loss.reshape(())

    def _send_activation(self, out):
        if str(out.dtype) != "Float32":
            raise UnsupportedError(f"PipelineCell: stage {self._stage} sends a {out.dtype} "
                                   "activation; zenith's pipeline sends float32")
        if out.ndim > _MAX_DIMS - 1:
            raise UnsupportedError(f"PipelineCell: an activation of rank {out.ndim} "
                                   f"(at most {_MAX_DIMS - 1})")
        shape = np.zeros(_MAX_DIMS, np.float32)
        shape[0] = out.ndim
        shape[1:1 + out.ndim] = out.shape
        self._mesh.send_next(Tensor(shape))
        self._mesh.send_next(out.contiguous())

    def _recv_activation(self):
        shape = Tensor(np.zeros(_MAX_DIMS, np.float32))
        self._mesh.recv_prev(shape)
        dims = shape.asnumpy()
        x = Tensor(np.zeros(tuple(int(v) for v in dims[1:1 + int(dims[0])]), np.float32))
        self._mesh.recv_prev(x)
        return x
