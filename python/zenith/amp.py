"""Mixed precision with MindSpore's names (mindspore.amp).

auto_mixed_precision(network, 'O1'/'O2'/'O3') makes the network cast its inputs to float16
and its outputs to float32 (parameters stay float32: see its doc); the loss scalers
(StaticLossScaler, DynamicLossScaler), all_finite, the loss-scale managers for Model
(FixedLossScaleManager, DynamicLossScaleManager) and build_train_network (a one-step training
cell) behave as MindSpore's.
"""

import numpy as np

from zenith._tensor import Parameter, Tensor, bfloat16, float16, float32

__all__ = ["auto_mixed_precision", "build_train_network", "all_finite", "LossScaler",
           "StaticLossScaler", "DynamicLossScaler", "LossScaleManager", "FixedLossScaleManager",
           "DynamicLossScaleManager", "init_status"]

_LEVELS = ("O0", "O1", "O2", "O3", "auto")


def _map(fn, x):
    if isinstance(x, (tuple, list)):
        return type(x)(_map(fn, v) for v in x)
    if isinstance(x, dict):
        return {k: _map(fn, v) for k, v in x.items()}
    return fn(x)


def _cast_floats(x, dtype):
    return _map(lambda v: v.astype(dtype) if isinstance(v, Tensor) and v.dtype.is_floating_point
                and v.dtype != dtype else v, x)


def cast_calls(cell, in_dtype, out_dtype=None):
    """Makes calling `cell` cast its floating inputs to in_dtype (and its outputs to out_dtype):
    the cell's class becomes a subclass of the same name whose __call__ casts."""
    base = type(cell)
    if getattr(base, "_zenith_cast", None) is not None:
        base = base.__mro__[1]
    call = base.__call__

    def __call__(self, *args, **kwargs):
        out = call(self, *_cast_floats(args, in_dtype), **kwargs)
        return out if out_dtype is None else _cast_floats(out, out_dtype)

    cell.__class__ = type(base.__name__, (base,), {"__slots__": (), "__call__": __call__,
                                                   "_zenith_cast": (in_dtype, out_dtype)})
    return cell


def auto_mixed_precision(network, amp_level="O0", dtype=float16):
    """Returns network in mixed precision: 'O0' unchanged; 'O1', 'O2', 'O3', 'auto': the
    network's floating inputs are cast to dtype (float16) and its outputs to float32, as
    MindSpore's. zenith keeps the parameters in float32 (its optimizers update float32
    master weights), so the layers compute in float32 on the float16-rounded inputs: results
    are those of MindSpore's O2 up to float16 rounding inside the layers."""
    if amp_level not in _LEVELS:
        raise ValueError(f"auto_mixed_precision: amp_level must be one of {_LEVELS}, got "
                         f"{amp_level!r}")
    if dtype not in (float16, bfloat16):
        raise ValueError(f"auto_mixed_precision: dtype must be float16 or bfloat16, got {dtype}")
    if amp_level == "O0":
        return network
    return cast_calls(network, dtype, float32)


def all_finite(inputs):
    """True (a bool Tensor) when no element of the tensors in inputs is inf or nan."""
    ok = all(bool(np.isfinite(t.asnumpy()).all()) for t in _flatten(inputs))
    return Tensor(np.array(ok))


def init_status():
    """The overflow status MindSpore keeps on Ascend; on the CPU a zero tensor."""
    return Tensor(np.zeros(8, np.float32))


def _flatten(x):
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from _flatten(v)
    elif isinstance(x, Tensor):
        yield x


class LossScaler:
    """The base of loss scalers: scale(inputs), unscale(inputs), adjust(grads_finite)."""

    def scale(self, inputs):
        raise NotImplementedError

    def unscale(self, inputs):
        raise NotImplementedError

    def adjust(self, grads_finite):
        raise NotImplementedError


class StaticLossScaler(LossScaler):
    """Multiplies by a fixed scale_value (and divides back)."""

    def __init__(self, scale_value):
        self.scale_value = Parameter(Tensor(float(scale_value), float32), name="scale_value")

    def scale(self, inputs):
        return _map(lambda v: v * self.scale_value.astype(v.dtype)
                    if isinstance(v, Tensor) else v, inputs)

    def unscale(self, inputs):
        return _map(lambda v: v / self.scale_value.astype(v.dtype)
                    if isinstance(v, Tensor) else v, inputs)

    def adjust(self, grads_finite):
        return False


class DynamicLossScaler(StaticLossScaler):
    """A scale that grows by scale_factor after scale_window finite steps and shrinks by
    scale_factor (not below 1) on a step with non-finite gradients."""

    def __init__(self, scale_value, scale_factor, scale_window):
        super().__init__(scale_value)
        self.scale_factor = float(scale_factor)
        self.scale_window = int(scale_window)
        self.counter = Parameter(Tensor(0, float32), name="counter")

    def adjust(self, grads_finite):
        finite = bool(grads_finite.asnumpy()) if isinstance(grads_finite, Tensor) else \
            bool(grads_finite)
        scale = float(self.scale_value.asnumpy())
        if finite:
            count = int(self.counter.asnumpy()) + 1
            if count >= self.scale_window:
                scale, count = scale * self.scale_factor, 0
        else:
            scale, count = max(scale / self.scale_factor, 1.0), 0
        self.scale_value.set_data(Tensor(scale, float32))
        self.counter.set_data(Tensor(float(count), float32))
        return True


class LossScaleManager:
    """The base of Model's loss-scale managers."""

    def get_loss_scale(self):
        return self.loss_scale

    def update_loss_scale(self, overflow):
        pass

    def get_drop_overflow_update(self):
        return self.drop_overflow_update


class FixedLossScaleManager(LossScaleManager):
    """A constant loss scale (default 128); drop_overflow_update skips steps whose gradients
    overflow."""

    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        if loss_scale < 1:
            raise ValueError(f"FixedLossScaleManager: loss_scale must be >= 1, got {loss_scale}")
        self.loss_scale = float(loss_scale)
        self.drop_overflow_update = bool(drop_overflow_update)

    def _scaler(self):
        return StaticLossScaler(self.loss_scale)


class DynamicLossScaleManager(LossScaleManager):
    """A loss scale that starts at init_loss_scale (2**24), halves on overflow and doubles after
    scale_window (2000) finite steps."""

    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        self.loss_scale = float(init_loss_scale)
        self.scale_factor, self.scale_window = scale_factor, scale_window
        self.drop_overflow_update = True

    def update_loss_scale(self, overflow):
        if overflow:
            self.loss_scale = max(self.loss_scale / self.scale_factor, 1.0)

    def _scaler(self):
        return DynamicLossScaler(self.loss_scale, self.scale_factor, self.scale_window)


def build_train_network(network, optimizer, loss_fn=None, level="O0", boost_level="O0",
                        **kwargs):
    """A cell whose call (data, label) runs one training step of network in mixed precision
    (level) with the loss scale of kwargs['loss_scale_manager'], and returns the loss."""
    from zenith.amp_train import TrainOneStepWithLossScale
    network = auto_mixed_precision(network, level)
    manager = kwargs.get("loss_scale_manager")
    scaler = manager._scaler() if manager is not None else StaticLossScaler(1.0)
    return TrainOneStepWithLossScale(network, loss_fn, optimizer, scaler)
