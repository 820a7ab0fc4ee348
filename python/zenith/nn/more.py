"""More of mindspore.nn, composed from zenith.ops (gradients flow through them): losses
(BCELoss, NLLLoss, SmoothL1Loss, HuberLoss, SoftMarginLoss, RMSELoss, CosineEmbeddingLoss,
DiceLoss), activations (LogSigmoid, SoftShrink, HShrink, Threshold, PReLU, FastGelu,
get_activation), tools (Tril, Triu, Norm, OneHot, Range, Moments, ClipByNorm, L1Regularizer,
Roll) and the schedules InverseDecayLR, NaturalExpDecayLR, inverse_decay_lr,
natural_exp_decay_lr."""

import math

import numpy as np

from zenith import ops
from zenith._tensor import Parameter, Tensor, float32
from zenith.nn.activation import _Activation
from zenith.nn.cell import Cell
from zenith.nn.learning_rate import LearningRateSchedule, _positive_int, _step
from zenith.nn.loss import LossBase

__all__ = ["BCELoss", "NLLLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss", "RMSELoss",
           "CosineEmbeddingLoss", "DiceLoss", "LogSigmoid", "SoftShrink", "HShrink",
           "Threshold", "PReLU", "FastGelu", "get_activation", "Tril", "Triu", "Norm",
           "OneHot", "Range", "Moments", "ClipByNorm", "L1Regularizer", "Roll",
           "InverseDecayLR", "NaturalExpDecayLR", "inverse_decay_lr", "natural_exp_decay_lr"]


def _softplus(x):
    return ops.relu(x) + ops.log(ops.exp(-ops.abs(x)) + 1.0)


# ---- losses

class BCELoss(LossBase):
    """-w [y log p + (1 - y) log(1 - p)] on probabilities p (log clamped at -100, as
    PyTorch's)."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = weight

    def construct(self, logits, labels):
        lp = ops.clamp(ops.log(logits), -100.0, None)
        lq = ops.clamp(ops.log(1.0 - logits), -100.0, None)
        loss = -(labels * lp + (1.0 - labels) * lq)
        return self.get_loss(loss, self.weight if self.weight is not None else 1.0)


class NLLLoss(LossBase):
    """-w[y] logits[y] on log-probabilities [N, C]; ignore_index rows count for nothing;
    'mean' divides by the weights of the counted rows."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def construct(self, logits, labels):
        y = labels.asnumpy().astype(np.int64)
        keep = y != self.ignore_index
        safe = np.where(keep, y, 0)
        onehot = Tensor(np.eye(logits.shape[1], dtype=np.float32)[safe] * keep[:, None])
        w = np.ones(logits.shape[1], np.float32) if self.weight is None else \
            self.weight.asnumpy().astype(np.float32)
        wrow = Tensor((w[safe] * keep).astype(np.float32))
        loss = -(logits * onehot).sum(1) * wrow
        if self.reduction == "mean":
            return loss.sum() / float(wrow.asnumpy().sum())
        return loss.sum() if self.reduction == "sum" else loss


class SmoothL1Loss(LossBase):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (reduction 'none' by default)."""

    def __init__(self, beta=1.0, reduction="none"):
        super().__init__(reduction)
        self.beta = float(beta)

    def construct(self, logits, labels):
        d = ops.abs(logits - labels)
        return self.get_loss(ops.where(d < self.beta, d * d * (0.5 / self.beta),
                                       d - 0.5 * self.beta))


class HuberLoss(LossBase):
    """0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = float(delta)

    def construct(self, logits, labels):
        d = ops.abs(logits - labels)
        return self.get_loss(ops.where(d <= self.delta, d * d * 0.5,
                                       (d - 0.5 * self.delta) * self.delta))


class SoftMarginLoss(LossBase):
    """log(1 + exp(-y x)), averaged."""

    def construct(self, logits, labels):
        return self.get_loss(_softplus(-(labels * logits)))


class RMSELoss(LossBase):
    """sqrt(mean((x - y)^2))."""

    def construct(self, logits, label):
        d = logits - label
        return ops.sqrt((d * d).mean())


class CosineEmbeddingLoss(LossBase):
    """1 - cos(x1, x2) for y = 1, max(0, cos(x1, x2) - margin) for y = -1."""

    def __init__(self, margin=0.0, reduction="mean"):
        super().__init__(reduction)
        self.margin = float(margin)

    def construct(self, logits_x1, logits_x2, labels):
        dot = (logits_x1 * logits_x2).sum(-1)
        norms = ops.sqrt((logits_x1 * logits_x1).sum(-1) * (logits_x2 * logits_x2).sum(-1))
        cos = dot / ops.clamp(norms, 1e-12, None)
        y = labels.astype(cos.dtype)
        pos = (1.0 - cos) * ops.equal(y, 1.0).astype(cos.dtype)
        neg = ops.relu(cos - self.margin) * ops.equal(y, -1.0).astype(cos.dtype)
        return self.get_loss(pos + neg)


class DiceLoss(Cell):
    """1 - (2 |x n y| + smooth) / (|x| + |y| + smooth)."""

    def __init__(self, smooth=1e-5):
        super().__init__()
        self.smooth = float(smooth)

    def construct(self, logits, label):
        inter = (logits * label).sum()
        union = (logits * logits).sum() + (label * label).sum()
        return 1.0 - (inter * 2.0 + self.smooth) / (union + self.smooth)


# ---- activations

class LogSigmoid(_Activation):
    """log(sigmoid(x)) = -softplus(-x)."""

    def construct(self, x):
        return -_softplus(-x)


class SoftShrink(_Activation):
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = float(lambd)

    def construct(self, x):
        return ops.relu(x - self.lambd) - ops.relu(-x - self.lambd)


class HShrink(_Activation):
    """x where |x| > lambd, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = float(lambd)

    def construct(self, x):
        return x * ops.greater(ops.abs(x), self.lambd).astype(x.dtype)


class Threshold(_Activation):
    """x where x > threshold, else value."""

    def __init__(self, threshold, value):
        super().__init__()
        self.threshold, self.value = float(threshold), float(value)

    def construct(self, x):
        return ops.where(ops.greater(x, self.threshold), x, ops.full_like(x, self.value))


class PReLU(_Activation):
    """max(0, x) + w min(0, x) with a learned w per channel (axis 1) or one for all."""

    def __init__(self, channel=1, w=0.25):
        super().__init__()
        self.w = Parameter(Tensor(np.full((channel,), w, np.float32)), name="w")

    def construct(self, x):
        w = self.w.reshape((1, -1) + (1,) * (x.ndim - 2)) if x.ndim > 1 else self.w
        return ops.relu(x) - ops.relu(-x) * w


class FastGelu(_Activation):
    """x * sigmoid(1.702 x), MindSpore's fast GELU."""

    def construct(self, x):
        return x * ops.sigmoid(x * 1.702)


def get_activation(name, prim_name=None):
    """The activation cell called name ('relu', 'softmax', 'gelu', 'sigmoid', ...)."""
    from zenith import nn
    table = {"relu": nn.ReLU, "relu6": nn.ReLU6, "softmax": nn.Softmax,
             "logsoftmax": nn.LogSoftmax, "gelu": nn.GELU, "fast_gelu": FastGelu,
             "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "elu": nn.ELU, "leakyrelu": nn.LeakyReLU,
             "hswish": nn.HSwish, "hsigmoid": nn.HSigmoid, "logsigmoid": LogSigmoid,
             "softsign": nn.Softsign, "softplus": nn.Softplus, "prelu": PReLU, "silu": nn.SiLU,
             "mish": nn.Mish, "selu": nn.SeLU, "celu": nn.CELU}
    if name is None:
        return None
    if name.lower() not in table:
        raise KeyError(f"get_activation: unknown activation {name!r}; known: {sorted(table)}")
    return table[name.lower()]()


# ---- tools

class _Tri(Cell):
    def __init__(self, lower):
        super().__init__()
        self._lower = lower

    def construct(self, x, k=0):
        rows, cols = x.shape[-2], x.shape[-1]
        mask = (np.tril if self._lower else np.triu)(np.ones((rows, cols), np.float32), k)
        return x * Tensor(mask).astype(x.dtype)


class Tril(_Tri):
    """The lower triangle of the last two dimensions (diagonal offset k)."""

    def __init__(self):
        super().__init__(True)


class Triu(_Tri):
    """The upper triangle of the last two dimensions (diagonal offset k)."""

    def __init__(self):
        super().__init__(False)


class Norm(Cell):
    """The 2-norm over axis."""

    def __init__(self, axis=(), keep_dims=False):
        super().__init__()
        self.axis, self.keep_dims = axis, keep_dims

    def construct(self, x):
        axis = None if self.axis == () else self.axis
        return ops.sqrt((x * x).sum(axis, keepdims=self.keep_dims))


class OneHot(Cell):
    """indices -> one-hot vectors of depth along axis (last), on_value / off_value."""

    def __init__(self, axis=-1, depth=1, on_value=1.0, off_value=0.0, dtype=float32):
        super().__init__()
        self.axis, self.depth = axis, int(depth)
        self.on_value, self.off_value, self.dtype = on_value, off_value, dtype

    def construct(self, indices):
        eye = np.eye(self.depth, dtype=bool)[indices.asnumpy().astype(np.int64)]
        out = np.where(eye, self.on_value, self.off_value).astype(np.float32)
        return Tensor(np.moveaxis(out, -1, self.axis)).astype(self.dtype)


class Range(Cell):
    """start, start + delta, ... below limit."""

    def __init__(self, start, limit=None, delta=1):
        super().__init__()
        if limit is None:
            start, limit = 0, start
        self.start, self.limit, self.delta = start, limit, delta

    def construct(self):
        return Tensor(np.arange(self.start, self.limit, self.delta))


class Moments(Cell):
    """(mean, variance) over axis."""

    def __init__(self, axis=None, keep_dims=None):
        super().__init__()
        self.axis, self.keep_dims = axis, bool(keep_dims)

    def construct(self, x):
        mean = x.mean(self.axis, True)
        var = ((x - mean) * (x - mean)).mean(self.axis, self.keep_dims)
        return (mean if self.keep_dims else x.mean(self.axis, False)), var


class ClipByNorm(Cell):
    """x scaled down so that its 2-norm over axis is at most clip_norm."""

    def __init__(self, axis=None):
        super().__init__()
        self.axis = axis

    def construct(self, x, clip_norm):
        norm = ops.sqrt((x * x).sum(self.axis, keepdims=True))
        clip = float(clip_norm.asnumpy()) if isinstance(clip_norm, Tensor) else float(clip_norm)
        return x * (clip / ops.maximum(norm, clip))


class L1Regularizer(Cell):
    """scale * sum(|weights|)."""

    def __init__(self, scale):
        super().__init__()
        if scale <= 0:
            raise ValueError(f"L1Regularizer: scale must be > 0, got {scale}")
        self.scale = float(scale)

    def construct(self, weights):
        return ops.abs(weights).sum() * self.scale


class Roll(Cell):
    """Elements shifted by shift along axis (wrapping around)."""

    def __init__(self, shift, axis):
        super().__init__()
        self.shift, self.axis = int(shift), int(axis)

    def construct(self, x):
        axis = self.axis % x.ndim
        n = x.shape[axis]
        s = self.shift % n
        if s == 0:
            return x
        head = (slice(None),) * axis
        return ops.cat([x[head + (slice(n - s, n),)], x[head + (slice(0, n - s),)]], axis)


# ---- learning-rate schedules

class InverseDecayLR(LearningRateSchedule):
    """learning_rate / (1 + decay_rate * step / decay_steps) (floored with is_stair)."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        self.learning_rate, self.decay_rate = learning_rate, decay_rate
        self.decay_steps, self.is_stair = _positive_int(decay_steps, "decay_steps"), is_stair

    def construct(self, global_step):
        p = _step(global_step) / self.decay_steps
        p = math.floor(p) if self.is_stair else p
        return Tensor(self.learning_rate / (1 + self.decay_rate * p), float32)


class NaturalExpDecayLR(InverseDecayLR):
    """learning_rate * exp(-decay_rate * step / decay_steps) (floored with is_stair)."""

    def construct(self, global_step):
        p = _step(global_step) / self.decay_steps
        p = math.floor(p) if self.is_stair else p
        return Tensor(self.learning_rate * math.exp(-self.decay_rate * p), float32)


def _per_step(fn, total_step, step_per_epoch, decay_epoch, is_stair):
    for v, n in ((total_step, "total_step"), (step_per_epoch, "step_per_epoch"),
                 (decay_epoch, "decay_epoch")):
        _positive_int(v, n)
    out = []
    for i in range(total_step):
        p = (i // step_per_epoch) / decay_epoch
        out.append(fn(math.floor(p) if is_stair else p))
    return out


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                     is_stair=False):
    """learning_rate / (1 + decay_rate * epoch / decay_epoch) per step."""
    return _per_step(lambda p: learning_rate / (1 + decay_rate * p), total_step,
                     step_per_epoch, decay_epoch, is_stair)


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """learning_rate * exp(-decay_rate * epoch / decay_epoch) per step."""
    return _per_step(lambda p: learning_rate * math.exp(-decay_rate * p), total_step,
                     step_per_epoch, decay_epoch, is_stair)
