"""More of mindspore.nn composed from zenith.ops: optimizers (RMSProp, Adagrad, Adadelta,
AdaMax, LazyAdam), padding (Pad, ConstantPad1d/2d/3d, ZeroPad2d, ReflectionPad1d/2d), 1-d and
adaptive pooling, BatchNorm1d, GroupNorm, InstanceNorm1d/2d, Dropout2d, RReLU, FocalLoss,
matrix diagonals, CentralCrop, ImageGradients, PSNR, and the loss-scale training cells."""

import numpy as np

from zenith import ops
from zenith._tensor import Parameter, Tensor, float32
from zenith.nn.activation import _Activation
from zenith.nn.cell import Cell
from zenith.nn.loss import LossBase
from zenith.nn.optim import Optimizer, _schedule

__all__ = ["RMSProp", "Adagrad", "Adadelta", "AdaMax", "LazyAdam", "Pad", "ConstantPad1d",
           "ConstantPad2d", "ConstantPad3d", "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "BatchNorm1d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
           "Dropout2d", "RReLU", "FocalLoss", "MatrixDiag", "MatrixDiagPart", "MatrixSetDiag",
           "CentralCrop", "ImageGradients", "PSNR", "FixedLossScaleUpdateCell",
           "DynamicLossScaleUpdateCell", "TrainOneStepWithLossScaleCell"]


# ---- optimizers: MindSpore's update rules, in Python on the parameters in place

class _PyOptimizer(Optimizer):
    def __init__(self, params, learning_rate, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self._lr = _schedule(learning_rate)
        self._steps = 0
        self._state = {}

    def _slot(self, i, name, init=0.0):
        key = (i, name)
        if key not in self._state:
            self._state[key] = ops.full_like(self.parameters[i].detach(), init)
        return self._state[key]

    def get_lr(self):
        return Tensor(self._lr(self._steps), float32)

    def construct(self, gradients):
        lr = float(self._lr(self._steps))
        self._steps += 1
        wd = self.weight_decay if isinstance(self.weight_decay, float) else 0.0
        for i, (p, g) in enumerate(zip(self.parameters, gradients)):
            w = p.detach()
            if wd:
                g = g + w * wd
            w._assign(self._update(i, w, g, lr))
        return True

    @property
    def global_step(self):
        return self._steps


class RMSProp(_PyOptimizer):
    """s = decay s + (1 - decay) g^2; m = momentum m + lr g / sqrt(s + epsilon); w -= m
    (centered: s - mean_g^2 under the root)."""

    def __init__(self, params, learning_rate=0.1, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, loss_scale=1.0, weight_decay=0.0):
        super().__init__(params, learning_rate, weight_decay)
        self.decay, self.momentum, self.epsilon = decay, momentum, epsilon
        self.centered = centered

    def _update(self, i, w, g, lr):
        s = self._slot(i, "ms")
        s._assign(s * self.decay + g * g * (1 - self.decay))
        denom = s
        if self.centered:
            mg = self._slot(i, "mg")
            mg._assign(mg * self.decay + g * (1 - self.decay))
            denom = s - mg * mg
        m = self._slot(i, "moment")
        m._assign(m * self.momentum + g * lr / ops.sqrt(denom + self.epsilon))
        return w - m


class Adagrad(_PyOptimizer):
    """accum += g^2; w -= lr g / sqrt(accum) (accum starts at accum, 0.1)."""

    def __init__(self, params, accum=0.1, learning_rate=0.001, update_slots=True,
                 loss_scale=1.0, weight_decay=0.0):
        super().__init__(params, learning_rate, weight_decay)
        self.accum = float(accum)

    def _update(self, i, w, g, lr):
        a = self._slot(i, "accum", self.accum)
        a._assign(a + g * g)
        return w - g * lr / ops.sqrt(a)


class Adadelta(_PyOptimizer):
    """accum = rho accum + (1 - rho) g^2; u = sqrt(accum_update + eps) / sqrt(accum + eps) g;
    accum_update = rho accum_update + (1 - rho) u^2; w -= lr u."""

    def __init__(self, params, learning_rate=1.0, rho=0.9, epsilon=1e-6, loss_scale=1.0,
                 weight_decay=0.0):
        super().__init__(params, learning_rate, weight_decay)
        self.rho, self.epsilon = rho, epsilon

    def _update(self, i, w, g, lr):
        a, au = self._slot(i, "accum"), self._slot(i, "accum_update")
        a._assign(a * self.rho + g * g * (1 - self.rho))
        u = ops.sqrt(au + self.epsilon) / ops.sqrt(a + self.epsilon) * g
        au._assign(au * self.rho + u * u * (1 - self.rho))
        return w - u * lr


class AdaMax(_PyOptimizer):
    """m = b1 m + (1 - b1) g; v = max(b2 v, |g|); w -= lr / (1 - b1^t) m / (v + eps)."""

    def __init__(self, params, learning_rate=0.001, beta1=0.9, beta2=0.999, eps=1e-08,
                 weight_decay=0.0, loss_scale=1.0):
        super().__init__(params, learning_rate, weight_decay)
        self.beta1, self.beta2, self.eps = beta1, beta2, eps

    def _update(self, i, w, g, lr):
        m, v = self._slot(i, "m"), self._slot(i, "v")
        m._assign(m * self.beta1 + g * (1 - self.beta1))
        v._assign(ops.maximum(v * self.beta2, ops.abs(g)))
        return w - m / (v + self.eps) * (lr / (1 - self.beta1 ** self._steps))


def LazyAdam(params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, use_locking=False,
             use_nesterov=False, weight_decay=0.0, loss_scale=1.0):
    """Adam; on dense gradients its lazy update is Adam's."""
    from zenith.nn.optim import Adam
    return Adam(params, learning_rate, beta1, beta2, eps, use_locking, use_nesterov,
                weight_decay, loss_scale)


# ---- padding

def _const_pad(x, pads, value):
    """pads: ((before, after) per dimension from the first)."""
    for axis, (before, after) in enumerate(pads):
        if before or after:
            shape = list(x.shape)
            parts = []
            if before:
                shape[axis] = before
                parts.append(ops.full(tuple(shape), value, dtype=x.dtype))
            parts.append(x)
            if after:
                shape[axis] = after
                parts.append(ops.full(tuple(shape), value, dtype=x.dtype))
            x = ops.cat(parts, axis)
    return x


def _trailing(padding, dims):
    """PyTorch-style (left, right[, top, bottom[, front, back]]) on the last dims."""
    if isinstance(padding, int):
        padding = (padding,) * (2 * dims)
    padding = tuple(padding)
    pairs = [(padding[2 * k], padding[2 * k + 1]) for k in range(len(padding) // 2)]
    return list(reversed(pairs))


class Pad(Cell):
    """paddings ((before, after) per dimension); mode 'CONSTANT' (zeros), 'REFLECT'."""

    def __init__(self, paddings, mode="CONSTANT"):
        super().__init__()
        self.paddings, self.mode = tuple(tuple(p) for p in paddings), mode.upper()
        if self.mode not in ("CONSTANT", "REFLECT"):
            raise ValueError(f"Pad: mode {mode!r} is not supported (CONSTANT, REFLECT)")

    def construct(self, x):
        if self.mode == "CONSTANT":
            return _const_pad(x, self.paddings, 0.0)
        return _reflect(x, self.paddings)


class _ConstPadNd(Cell):
    _dims = 1

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding, self.value = padding, float(value)

    def construct(self, x):
        pairs = _trailing(self.padding, self._dims)
        return _const_pad(x, [(0, 0)] * (x.ndim - len(pairs)) + pairs, self.value)


class ConstantPad1d(_ConstPadNd):
    """Pads the last dimension by padding (int or (left, right)) with value."""


class ConstantPad2d(_ConstPadNd):
    """Pads the last two dimensions ((left, right, top, bottom)) with value."""
    _dims = 2


class ConstantPad3d(_ConstPadNd):
    """Pads the last three dimensions with value."""
    _dims = 3


class ZeroPad2d(ConstantPad2d):
    """ConstantPad2d with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)


def _reflect(x, pads):
    for axis, (before, after) in enumerate(pads):
        if before or after:
            n = x.shape[axis]
            idx = list(range(before, 0, -1)) + list(range(n)) + \
                list(range(n - 2, n - 2 - after, -1))
            x = ops.index_select(x, axis, Tensor(np.array(idx, np.int64)))
    return x


class _ReflectPadNd(Cell):
    _dims = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = padding

    def construct(self, x):
        pairs = _trailing(self.padding, self._dims)
        return _reflect(x, [(0, 0)] * (x.ndim - len(pairs)) + pairs)


class ReflectionPad1d(_ReflectPadNd):
    """Pads the last dimension with its reflection."""


class ReflectionPad2d(_ReflectPadNd):
    """Pads the last two dimensions with their reflection."""
    _dims = 2


# ---- pooling over windows gathered with index_select

def _windows(x, kernel, stride):
    n = x.shape[-1]
    starts = range(0, n - kernel + 1, stride)
    idx = np.array([[s + k for k in range(kernel)] for s in starts], np.int64)
    out = ops.index_select(x, x.ndim - 1, Tensor(idx.reshape(-1)))
    return out.reshape(tuple(x.shape[:-1]) + idx.shape)


class MaxPool1d(Cell):
    """Max over windows of the last dimension."""

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid"):
        super().__init__()
        if pad_mode != "valid":
            raise ValueError("MaxPool1d: only pad_mode='valid' is supported")
        self.kernel_size, self.stride = kernel_size, stride

    def construct(self, x):
        return _windows(x, self.kernel_size, self.stride).max(-1)


class AvgPool1d(MaxPool1d):
    """Mean over windows of the last dimension."""

    def construct(self, x):
        return _windows(x, self.kernel_size, self.stride).mean(-1)


class AdaptiveAvgPool1d(Cell):
    """Mean over output_size even windows of the last dimension (length divisible)."""

    _reduce = "mean"

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def construct(self, x):
        n = x.shape[-1]
        if n % self.output_size:
            raise ValueError(f"{type(self).__name__}: length {n} is not divisible by "
                             f"output_size {self.output_size}")
        w = _windows(x, n // self.output_size, n // self.output_size)
        return w.mean(-1) if self._reduce == "mean" else w.max(-1)


class AdaptiveMaxPool1d(AdaptiveAvgPool1d):
    """Max over output_size even windows of the last dimension."""
    _reduce = "max"


class AdaptiveMaxPool2d(Cell):
    """Max over output_size even windows of H and W (sizes divisible)."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        if return_indices:
            raise ValueError("AdaptiveMaxPool2d: return_indices is not supported")
        self.output_size = (output_size, output_size) if isinstance(output_size, int) else \
            tuple(output_size)

    def construct(self, x):
        h, w = x.shape[-2], x.shape[-1]
        oh, ow = self.output_size
        if h % oh or w % ow:
            raise ValueError(f"AdaptiveMaxPool2d: {h}x{w} is not divisible by {oh}x{ow}")
        t = x.reshape(tuple(x.shape[:-2]) + (oh, h // oh, ow, w // ow))
        return t.max(-1).max(-2)


# ---- normalisation and dropout

class BatchNorm1d(Cell):
    """Batch normalisation of [N, C] (or [N, C, L]) input over the batch; moving_mean and
    moving_variance move as momentum * moving + (1 - momentum) * batch."""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones",
                 beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                 use_batch_statistics=None, data_format="NCHW", dtype=None):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.gamma = Parameter(Tensor(np.ones(num_features, np.float32)), name="gamma",
                               requires_grad=affine)
        self.beta = Parameter(Tensor(np.zeros(num_features, np.float32)), name="beta",
                              requires_grad=affine)
        self.moving_mean = Parameter(Tensor(np.zeros(num_features, np.float32)),
                                     name="mean", requires_grad=False)
        self.moving_variance = Parameter(Tensor(np.ones(num_features, np.float32)),
                                         name="variance", requires_grad=False)

    def construct(self, x):
        flat = x if x.ndim == 2 else x.reshape((x.shape[0], x.shape[1], -1))
        return ops.batch_norm(flat, self.moving_mean, self.moving_variance, self.gamma,
                              self.beta, self.training, 1.0 - self.momentum,
                              self.eps).reshape(tuple(x.shape))


def _affine_norm(x, axes, eps, gamma, beta):
    mean = x.mean(axes, True)
    var = ((x - mean) * (x - mean)).mean(axes, True)
    y = (x - mean) * ops.rsqrt(var + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return y * gamma.reshape(shape) + beta.reshape(shape)


class GroupNorm(Cell):
    """Normalises each of num_groups channel groups per sample; gamma, beta per channel."""

    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, gamma_init="ones",
                 beta_init="zeros", dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("GroupNorm: num_channels must be divisible by num_groups")
        self.num_groups, self.eps = num_groups, eps
        self.gamma = Parameter(Tensor(np.ones(num_channels, np.float32)), name="gamma",
                               requires_grad=affine)
        self.beta = Parameter(Tensor(np.zeros(num_channels, np.float32)), name="beta",
                              requires_grad=affine)

    def construct(self, x):
        n, c = x.shape[0], x.shape[1]
        g = x.reshape((n, self.num_groups, -1))
        mean = g.mean(2, True)
        var = ((g - mean) * (g - mean)).mean(2, True)
        y = ((g - mean) * ops.rsqrt(var + self.eps)).reshape(tuple(x.shape))
        shape = (1, c) + (1,) * (x.ndim - 2)
        return y * self.gamma.reshape(shape) + self.beta.reshape(shape)


class InstanceNorm2d(Cell):
    """Normalises each channel of each sample over its spatial positions."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, gamma_init="ones",
                 beta_init="zeros", dtype=None):
        super().__init__()
        self.eps = eps
        self.gamma = Parameter(Tensor(np.ones(num_features, np.float32)), name="gamma",
                               requires_grad=affine)
        self.beta = Parameter(Tensor(np.zeros(num_features, np.float32)), name="beta",
                              requires_grad=affine)

    def construct(self, x):
        return _affine_norm(x, tuple(range(2, x.ndim)), self.eps, self.gamma, self.beta)


class InstanceNorm1d(InstanceNorm2d):
    """InstanceNorm over [N, C, L]."""


class Dropout2d(Cell):
    """Zeroes whole channels with probability p when training (the rest scaled 1/(1-p))."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"Dropout2d: p must be in [0, 1), got {p}")
        self.p = p

    def construct(self, x):
        if not self.training or self.p == 0:
            return x
        keep = ops.dropout(ops.ones((x.shape[0], x.shape[1], 1, 1)), self.p, True)
        return x * keep.astype(x.dtype)


class RReLU(_Activation):
    """Leaky ReLU with slope (lower + upper) / 2 in inference (MindSpore draws it per element
    in training; zenith uses the mean slope in both)."""

    def __init__(self, lower=1 / 8, upper=1 / 3):
        super().__init__()
        self.slope = (float(lower) + float(upper)) / 2

    def construct(self, x):
        return ops.relu(x) - ops.relu(-x) * self.slope


class FocalLoss(LossBase):
    """-(1 - p_t)^gamma log(p_t) on softmax probabilities of logits [N, C] against class
    labels [N] (weight per class)."""

    def __init__(self, weight=None, gamma=2.0, reduction="mean"):
        super().__init__(reduction)
        self.weight, self.gamma = weight, float(gamma)

    def construct(self, logits, labels):
        logp = ops.log_softmax(logits, 1)
        onehot = Tensor(np.eye(logits.shape[1], dtype=np.float32)[
            labels.asnumpy().astype(np.int64).reshape(-1)])
        logpt = (logp * onehot).sum(1)
        pt = ops.exp(logpt)
        loss = -ops.pow(1.0 - pt, self.gamma) * logpt
        if self.weight is not None:
            loss = loss * (onehot * self.weight).sum(1)
        return self.get_loss(loss)


# ---- matrices and images

class MatrixDiag(Cell):
    """A batch of diagonal matrices from the last dimension."""

    def construct(self, x):
        n = x.shape[-1]
        return ops.unsqueeze(x, -1) * Tensor(np.eye(n, dtype=np.float32)).astype(x.dtype)


class MatrixDiagPart(Cell):
    """The diagonals of a batch of matrices."""

    def construct(self, x):
        n = min(x.shape[-2], x.shape[-1])
        eye = Tensor(np.eye(x.shape[-2], x.shape[-1], dtype=np.float32)).astype(x.dtype)
        return (x * eye).sum(-1)[..., :n] if x.shape[-2] >= x.shape[-1] else (x * eye).sum(-2)


class MatrixSetDiag(Cell):
    """x with its diagonals replaced by diagonal."""

    def construct(self, x, diagonal):
        eye = Tensor(np.eye(x.shape[-2], x.shape[-1], dtype=np.float32)).astype(x.dtype)
        return x * (1.0 - eye) + ops.unsqueeze(diagonal, -1) * eye


class CentralCrop(Cell):
    """The central central_fraction of the last two dimensions."""

    def __init__(self, central_fraction):
        super().__init__()
        if not 0 < central_fraction <= 1:
            raise ValueError("CentralCrop: central_fraction must be in (0, 1]")
        self.central_fraction = central_fraction

    def construct(self, image):
        h, w = image.shape[-2], image.shape[-1]
        top = int((h - h * self.central_fraction) / 2)
        left = int((w - w * self.central_fraction) / 2)
        return image[..., top:h - top, left:w - left]


class ImageGradients(Cell):
    """(dy, dx): differences to the next row / column, zero at the last one."""

    def construct(self, images):
        dy = images[..., 1:, :] - images[..., :-1, :]
        dx = images[..., :, 1:] - images[..., :, :-1]
        zy = ops.zeros_like(images[..., :1, :])
        zx = ops.zeros_like(images[..., :, :1])
        return ops.cat([dy, zy], images.ndim - 2), ops.cat([dx, zx], images.ndim - 1)


class PSNR(Cell):
    """10 log10(max_val^2 / MSE) per image."""

    def __init__(self, max_val=1.0):
        super().__init__()
        self.max_val = float(max_val)

    def construct(self, img1, img2):
        d = img1 - img2
        mse = (d * d).mean(tuple(range(1, d.ndim)))
        return ops.log(self.max_val * self.max_val / mse) * (10 / np.log(10))


# ---- loss-scale training cells

class FixedLossScaleUpdateCell(Cell):
    """A fixed loss scale (the scale manager of TrainOneStepWithLossScaleCell)."""

    def __init__(self, loss_scale_value):
        super().__init__()
        self.loss_scale_value = float(loss_scale_value)

    def get_loss_scale(self):
        return self.loss_scale_value

    def construct(self, loss_scale, overflow):
        return overflow


class DynamicLossScaleUpdateCell(Cell):
    """A scale divided by scale_factor on overflow and multiplied by it after scale_window
    finite steps."""

    def __init__(self, loss_scale_value, scale_factor, scale_window):
        super().__init__()
        from zenith.amp import DynamicLossScaler
        self._scaler = DynamicLossScaler(loss_scale_value, scale_factor, scale_window)

    def get_loss_scale(self):
        return float(self._scaler.scale_value.asnumpy())

    def construct(self, loss_scale, overflow):
        self._scaler.adjust(not bool(overflow))
        return overflow


class TrainOneStepWithLossScaleCell(Cell):
    """cell(*inputs) -> (loss, overflow, scale): one step of network (a loss cell) with the
    loss scaled by scale_sense (a number, a Tensor or an update cell); overflowed steps are
    skipped."""

    def __init__(self, network, optimizer, scale_sense):
        super().__init__()
        from zenith.amp import StaticLossScaler
        from zenith.amp_train import TrainOneStepWithLossScale
        if isinstance(scale_sense, DynamicLossScaleUpdateCell):
            scaler = scale_sense._scaler
        else:
            value = scale_sense.get_loss_scale() if isinstance(
                scale_sense, FixedLossScaleUpdateCell) else float(
                scale_sense.asnumpy() if isinstance(scale_sense, Tensor) else scale_sense)
            scaler = StaticLossScaler(value)
        self._scaler = scaler
        self._step = TrainOneStepWithLossScale(network, None, optimizer, scaler)

    def construct(self, *inputs):
        scale = Tensor(float(self._scaler.scale_value.asnumpy()), float32)
        finite = []
        loss = self._step(*inputs, _finite=finite)
        return loss, Tensor(np.array(not finite[0])), scale
