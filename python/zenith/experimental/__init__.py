"""zenith.experimental: MindSpore's mindspore.experimental (optim: PyTorch-style optimizers
with param_groups, and their lr_scheduler)."""

from zenith.experimental import optim

__all__ = ["optim"]
