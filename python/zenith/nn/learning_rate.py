"""Learning-rate schedules with MindSpore's names: functions that return a per-step list
(piecewise_constant_lr, cosine_decay_lr, ...) and LearningRateSchedule cells computing the rate
from the global step (CosineDecayLR, ...). Optimizers take either as learning_rate."""

import math

from zenith._tensor import Tensor, float32
from zenith.nn.cell import Cell

__all__ = [
    "piecewise_constant_lr", "exponential_decay_lr", "cosine_decay_lr", "polynomial_decay_lr",
    "warmup_lr", "LearningRateSchedule", "ExponentialDecayLR", "CosineDecayLR",
    "PolynomialDecayLR", "WarmUpLR",
]


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def piecewise_constant_lr(milestone, learning_rates):
    """learning_rates[i] for steps milestone[i-1] <= step < milestone[i]; a list of
    milestone[-1] rates."""
    if len(milestone) != len(learning_rates):
        raise ValueError("piecewise_constant_lr: milestone and learning_rates need the same length")
    out, last = [], 0
    for m, lr in zip(milestone, learning_rates):
        if m <= last:
            raise ValueError("piecewise_constant_lr: milestone must be strictly increasing")
        out += [float(lr)] * (m - last)
        last = m
    return out


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch,
                         is_stair=False):
    """learning_rate * decay_rate ** (epoch / decay_epoch) per step (floored with is_stair)."""
    for v, n in ((total_step, "total_step"), (step_per_epoch, "step_per_epoch"),
                 (decay_epoch, "decay_epoch")):
        _positive_int(v, n)
    out = []
    for i in range(total_step):
        p = (i // step_per_epoch) / decay_epoch
        out.append(learning_rate * decay_rate ** (math.floor(p) if is_stair else p))
    return out


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    """min_lr + (max_lr - min_lr) (1 + cos(pi epoch / decay_epoch)) / 2 per step."""
    for v, n in ((total_step, "total_step"), (step_per_epoch, "step_per_epoch"),
                 (decay_epoch, "decay_epoch")):
        _positive_int(v, n)
    out = []
    for i in range(total_step):
        epoch = min(i // step_per_epoch, decay_epoch)
        out.append(min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * epoch / decay_epoch)))
    return out


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch,
                        decay_epoch, power, update_decay_epoch=False):
    """(learning_rate - end) (1 - epoch / decay_epoch) ** power + end per step."""
    for v, n in ((total_step, "total_step"), (step_per_epoch, "step_per_epoch"),
                 (decay_epoch, "decay_epoch")):
        _positive_int(v, n)
    out = []
    for i in range(total_step):
        epoch = i // step_per_epoch
        decay = decay_epoch
        if update_decay_epoch:
            decay = decay_epoch * max(1, math.ceil(epoch / decay_epoch))
        else:
            epoch = min(epoch, decay_epoch)
        out.append((learning_rate - end_learning_rate) * (1 - epoch / decay) ** power
                   + end_learning_rate)
    return out


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    """learning_rate * min(epoch, warmup_epoch) / warmup_epoch per step."""
    for v, n in ((total_step, "total_step"), (step_per_epoch, "step_per_epoch"),
                 (warmup_epoch, "warmup_epoch")):
        _positive_int(v, n)
    return [learning_rate * min(i // step_per_epoch, warmup_epoch) / warmup_epoch
            for i in range(total_step)]


class LearningRateSchedule(Cell):
    """The base of schedules: construct(global_step) returns the rate as a float32 Tensor.
    Optimizers call it with the step count (0-based) before each step."""

    def construct(self, global_step):
        raise NotImplementedError

    def _rate(self, step):
        return float(self.construct(Tensor(step, float32)))


def _step(global_step):
    return float(global_step.item() if isinstance(global_step, Tensor) else global_step)


class ExponentialDecayLR(LearningRateSchedule):
    """learning_rate * decay_rate ** (step / decay_steps) (floored with is_stair)."""

    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__()
        self.learning_rate, self.decay_rate = learning_rate, decay_rate
        self.decay_steps, self.is_stair = _positive_int(decay_steps, "decay_steps"), is_stair

    def construct(self, global_step):
        p = _step(global_step) / self.decay_steps
        return Tensor(self.learning_rate * self.decay_rate ** (math.floor(p) if self.is_stair else p),
                      float32)


class CosineDecayLR(LearningRateSchedule):
    """min_lr + (max_lr - min_lr) (1 + cos(pi min(step, decay_steps) / decay_steps)) / 2."""

    def __init__(self, min_lr, max_lr, decay_steps):
        super().__init__()
        self.min_lr, self.max_lr = min_lr, max_lr
        self.decay_steps = _positive_int(decay_steps, "decay_steps")

    def construct(self, global_step):
        s = min(_step(global_step), self.decay_steps)
        return Tensor(self.min_lr + 0.5 * (self.max_lr - self.min_lr)
                      * (1 + math.cos(math.pi * s / self.decay_steps)), float32)


class PolynomialDecayLR(LearningRateSchedule):
    """(learning_rate - end) (1 - min(step, decay_steps) / decay_steps) ** power + end."""

    def __init__(self, learning_rate, end_learning_rate, decay_steps, power,
                 update_decay_steps=False):
        super().__init__()
        self.learning_rate, self.end_learning_rate = learning_rate, end_learning_rate
        self.decay_steps = _positive_int(decay_steps, "decay_steps")
        self.power, self.update_decay_steps = power, update_decay_steps

    def construct(self, global_step):
        s, decay = _step(global_step), self.decay_steps
        if self.update_decay_steps:
            decay = decay * max(1, math.ceil(s / decay))
        else:
            s = min(s, decay)
        return Tensor((self.learning_rate - self.end_learning_rate) * (1 - s / decay) ** self.power
                      + self.end_learning_rate, float32)


class WarmUpLR(LearningRateSchedule):
    """learning_rate * min(step, warmup_steps) / warmup_steps."""

    def __init__(self, learning_rate, warmup_steps):
        super().__init__()
        self.learning_rate = learning_rate
        self.warmup_steps = _positive_int(warmup_steps, "warmup_steps")

    def construct(self, global_step):
        return Tensor(self.learning_rate * min(_step(global_step), self.warmup_steps)
                      / self.warmup_steps, float32)
