"""mindspore.experimental.optim.lr_scheduler: schedulers that set each param group's 'lr'
Parameter when step() is called (once per epoch, as PyTorch's)."""

import math

from zenith._tensor import Tensor, float32

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR"]


class LRScheduler:
    """The base: base_lrs from the groups' initial lr, last_epoch, get_last_lr(), step()."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", float(g["lr"].asnumpy()))
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def _lrs(self):
        raise NotImplementedError

    def get_last_lr(self):
        """Each group's current learning rate, as float32 Tensors."""
        return [Tensor(float(g["lr"].asnumpy()), float32) for g in self.optimizer.param_groups]

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        for g, lr in zip(self.optimizer.param_groups, self._lrs()):
            g["lr"].set_data(Tensor(float(lr), float32))


def _current(scheduler):
    return [float(g["lr"].asnumpy()) for g in scheduler.optimizer.param_groups]


class StepLR(LRScheduler):
    """lr * gamma every step_size epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def _lrs(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return _current(self)
        return [lr * self.gamma for lr in _current(self)]


class MultiStepLR(LRScheduler):
    """lr * gamma at each epoch in milestones."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), float(gamma)
        super().__init__(optimizer, last_epoch)

    def _lrs(self):
        k = self.milestones.count(self.last_epoch)
        return [lr * self.gamma ** k for lr in _current(self)]


class ExponentialLR(LRScheduler):
    """lr * gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def _lrs(self):
        if self.last_epoch == 0:
            return _current(self)
        return [lr * self.gamma for lr in _current(self)]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def _lrs(self):
        return [self.eta_min + (b - self.eta_min) *
                (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]
