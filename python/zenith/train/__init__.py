"""zenith.train: Model, callbacks and metrics with MindSpore's names (mindspore.train;
mindspore.train.callback as zenith.train.callback)."""

from zenith.train import callback, metrics
from zenith.train.callback import (Callback, CheckpointConfig, EarlyStopping, LossMonitor,
                                   ModelCheckpoint, RunContext, SummaryCollector, TimeMonitor)
from zenith.train.metrics import (Accuracy, Loss, Metric, Top1CategoricalAccuracy,
                                  Top5CategoricalAccuracy, TopKCategoricalAccuracy)
from zenith.train.model import Model

__all__ = [
    "Model", "Callback", "RunContext", "LossMonitor", "TimeMonitor", "ModelCheckpoint",
    "CheckpointConfig", "SummaryCollector", "EarlyStopping", "Metric", "Accuracy", "Loss",
    "TopKCategoricalAccuracy", "Top1CategoricalAccuracy", "Top5CategoricalAccuracy",
    "callback", "metrics",
]

from zenith._unsupported import unsupported as _unsupported  # noqa: E402

__getattr__ = _unsupported(__name__)
