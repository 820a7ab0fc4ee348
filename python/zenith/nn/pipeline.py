"""MindSpore's pipeline parallel for a sequential network: 1F1B or GPipe over micro-batches.

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
batch is split into micro_size micro-batches whose activations go to the next stage and whose
gradients come back, each micro-batch's loss weighted 1/micro_size, so the gradients left on
this stage's parameters are one process's on the whole batch (a mean loss over equal
micro-batches). set_auto_parallel_context(pipeline_config={'pipeline_scheduler': ...}):
'1f1b' (MindSpore's default; p - s - 1 forwards fill the pipe, then one forward and one
backward in turn: at most p - s micro-batches alive on stage s) or 'gpipe' (every micro-batch
forward, then every one backward: all alive at once); max_in_flight says how many were.
The call returns the batch's mean loss on every rank. Each rank computes and updates only its
stage's parameters, and keeps only those: PipelineCell empties the other stages' (shape [0];
every rank still builds the whole network first).
"""

import numpy as np

from zenith import _zenith as _C
from zenith._tensor import Tensor, _as_tensor
from zenith._unsupported import UnsupportedError
from zenith.nn.cell import Cell, SequentialCell

__all__ = ["PipelineCell", "stage_of_cells"]

# pipeline_config keys MindSpore documents, and zenith's defaults (MindSpore's).
DEFAULT_CONFIG = {"pipeline_interleave": False, "pipeline_scheduler": "1f1b"}


def check_config(config):
    """Validates a pipeline_config dict; returns it with the defaults filled in."""
    if not isinstance(config, dict):
        raise TypeError(f"set_auto_parallel_context: pipeline_config must be a dict, got "
                        f"{type(config).__name__}")
    unknown = sorted(set(config) - set(DEFAULT_CONFIG))
    if unknown:
        raise ValueError(f"set_auto_parallel_context: pipeline_config key(s) {unknown} unknown; "
                         f"known: {sorted(DEFAULT_CONFIG)}")
    out = dict(DEFAULT_CONFIG, **config)
    if out["pipeline_interleave"]:
        raise UnsupportedError("set_auto_parallel_context: pipeline_config['pipeline_interleave']"
                               "=True is not supported (one stage per rank)")
    if out["pipeline_scheduler"] not in ("1f1b", "gpipe"):
        raise UnsupportedError("set_auto_parallel_context: pipeline_config['pipeline_scheduler']="
                               f"{out['pipeline_scheduler']!r} is not supported ('1f1b', 'gpipe')")
    return out

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
        # The other stages' weights are dropped here (shape [0]), as zenith finetune's stages
        # do: a rank holds its stage's share of the model.
        for c, s in zip(cells, where):
            if s != self._stage:
                for p in c.get_parameters():
                    p.set_data(np.zeros((0,), np.float32))
        self._loss_fn = loss_fn
        self.network = network
        self.micro_size = micro_size
        self.max_in_flight = 0  # micro-batches alive at once on this stage in the last call

    @property
    def stage(self):
        """This rank's stage."""
        return self._stage

    def trainable_params(self, recurse=True):
        """This stage's trainable parameters (give these to the optimizer)."""
        return [p for c in self._cells for p in c.trainable_params(recurse)]

    def construct(self, data, label):
        from zenith.context import get_auto_parallel_context
        data, label = _as_tensor(data), _as_tensor(label)
        batch = data.shape[0]
        if batch % self.micro_size or label.shape[0] != batch:
            raise ValueError(f"PipelineCell: a batch of {batch} (labels {label.shape[0]}) does "
                             f"not split into micro_size={self.micro_size} equal micro-batches")
        step = batch // self.micro_size
        m, p, s = self.micro_size, self._stages, self._stage
        gpipe = get_auto_parallel_context("pipeline_config")["pipeline_scheduler"] == "gpipe"
        # GPipe: every micro-batch forward, then every one backward. 1F1B: p - s - 1 forwards
        # to fill the pipe, then one forward and one backward in turn, so that at most p - s
        # micro-batches' activations are alive on stage s.
        warmup = m if gpipe else min(p - s - 1, m)
        self._sends, self._loss = [], 0.0
        alive, peak = [], 0
        for j in range(m):
            alive.append(self._forward(data[j * step:(j + 1) * step],
                                       label[j * step:(j + 1) * step]))
            peak = max(peak, len(alive))
            if j >= warmup:
                self._backward(*alive.pop(0))
        while alive:
            self._backward(*alive.pop(0))
        for work, _ in self._sends:
            work.wait()
        self._sends = []
        self.max_in_flight = peak
        loss = Tensor(np.array([self._loss], np.float32))
        _C.communication.all_reduce(loss, "sum")  # the last stage's loss on every rank
        return loss.reshape(())

    def _forward(self, data, label):
        """One micro-batch through this stage's cells: (input, output or weighted loss)."""
        if self._stage == 0:
            x = data
        else:
            x = self._recv_activation()
            x.requires_grad = True
        out = x
        for cell in self._cells:
            out = cell(out)
        if self._stage == self._stages - 1:
            out = self._loss_fn(out, label) * (1.0 / self.micro_size)
            self._loss += float(out.item())
        else:
            self._send_activation(out)
        return x, out

    def _backward(self, x, out):
        if self._stage == self._stages - 1:
            _C.autograd.backward(out, None)
        else:
            grad = Tensor(np.zeros(out.shape, np.float32))
            self._mesh.recv_next(grad)
            _C.autograd.backward(out, grad)
        if self._stage > 0:
            self._send(self._mesh.send_prev_async, _C.autograd.get_grad(x).contiguous())

    def _send(self, send, tensor):
        self._sends.append((send(tensor), tensor))  # the tensor alive until the send is done

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
        self._send(self._mesh.send_next_async, Tensor(shape))
        self._send(self._mesh.send_next_async, out.contiguous())

    def _recv_activation(self):
        shape = Tensor(np.zeros(_MAX_DIMS, np.float32))
        self._mesh.recv_prev(shape)
        dims = shape.asnumpy()
        x = Tensor(np.zeros(tuple(int(v) for v in dims[1:1 + int(dims[0])]), np.float32))
        self._mesh.recv_prev(x)
        return x
