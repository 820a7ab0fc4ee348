"""zenith.nn: cells, layers, losses, optimizers and learning-rate schedules with MindSpore's
names (mindspore.nn)."""

from zenith.nn.cell import Cell, CellList, SequentialCell
from zenith.nn.layers import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv2d, Dense, Dropout,
                              Embedding, Flatten, GELU, LayerNorm, MaxPool2d, ReLU, RMSNorm,
                              Sigmoid, SiLU, Tanh)
from zenith.nn.learning_rate import (CosineDecayLR, ExponentialDecayLR, LearningRateSchedule,
                                     PolynomialDecayLR, WarmUpLR, cosine_decay_lr,
                                     exponential_decay_lr, piecewise_constant_lr,
                                     polynomial_decay_lr, warmup_lr)
from zenith.nn.activation import (CELU, ELU, HSigmoid, HSwish, Hardtanh, LeakyReLU, LogSoftmax,
                                  Mish, ReLU6, SeLU, Softmax, Softmin, Softplus, Softsign,
                                  Tanhshrink)
from zenith.nn.loss import (BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, LossBase, MAELoss,
                            MSELoss, SoftmaxCrossEntropyWithLogits)
from zenith._unsupported import unsupported as _unsupported
from zenith._export import GraphCell
from zenith.nn import more as _more
from zenith.nn.more import *  # noqa: F401,F403  (listed in more.__all__)
from zenith.nn import more2 as _more2
from zenith.nn.more2 import *  # noqa: F401,F403  (listed in more2.__all__)
from zenith.nn import recurrent as _recurrent
from zenith.nn.recurrent import *  # noqa: F401,F403  (listed in recurrent.__all__)
from zenith.nn.optim import SGD, Adam, AdamW, AdamWeightDecay, Momentum, Optimizer
from zenith.nn.wrap import DistributedDataParallel, DistributedGradReducer, WithLossCell
from zenith.nn.pipeline import PipelineCell

__all__ = [
    "Cell", "CellList", "SequentialCell",
    "Conv2d", "Dense", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Flatten", "MaxPool2d",
    "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm2d", "Dropout", "Embedding", "LayerNorm",
    "RMSNorm",
    "LossBase", "SoftmaxCrossEntropyWithLogits", "CrossEntropyLoss", "MSELoss",
    "Optimizer", "Momentum", "SGD", "Adam", "AdamW", "AdamWeightDecay",
    "LearningRateSchedule", "ExponentialDecayLR", "CosineDecayLR", "PolynomialDecayLR",
    "WarmUpLR", "piecewise_constant_lr", "exponential_decay_lr", "cosine_decay_lr",
    "polynomial_decay_lr", "warmup_lr",
    "WithLossCell", "DistributedGradReducer", "DistributedDataParallel", "PipelineCell",
    "Softmax", "LogSoftmax", "Softmin", "LeakyReLU", "ReLU6", "ELU", "CELU", "SeLU", "Softplus",
    "Softsign", "HSigmoid", "HSwish", "Hardtanh", "Mish", "Tanhshrink",
    "L1Loss", "MAELoss", "BCEWithLogitsLoss", "GraphCell",
] + _more.__all__ + _more2.__all__ + _recurrent.__all__

__getattr__ = _unsupported(__name__)
