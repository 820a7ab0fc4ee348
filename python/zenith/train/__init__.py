"""zenith.train: Model, callbacks and metrics with MindSpore's names (mindspore.train;
mindspore.train.callback as zenith.train.callback)."""

from zenith.train import callback, metrics
from zenith.train.callback import (Callback, CheckpointConfig, EarlyStopping, LossMonitor,
                                   ModelCheckpoint, RunContext, SummaryCollector, TimeMonitor)
from zenith.train.metrics import (Accuracy, Loss, Metric, Top1CategoricalAccuracy,
                                  Top5CategoricalAccuracy, TopKCategoricalAccuracy)
from zenith.train.model import Model
from zenith.train.metrics_more import (F1, MAE, MSE, ConfusionMatrix, CosineSimilarity, Dice,
                                       Fbeta, History, LambdaCallback, Perplexity, Precision,
                                       Recall, get_metric_fn, rearrange_inputs)
from zenith.train.metrics import names
from zenith.train.callback_more import ROC, LearningRateScheduler, ReduceLROnPlateau, auc

__all__ = [
    "Model", "Callback", "RunContext", "LossMonitor", "TimeMonitor", "ModelCheckpoint",
    "CheckpointConfig", "SummaryCollector", "EarlyStopping", "Metric", "Accuracy", "Loss",
    "TopKCategoricalAccuracy", "Top1CategoricalAccuracy", "Top5CategoricalAccuracy",
    "callback", "metrics", "MAE", "MSE", "Precision", "Recall", "F1", "Fbeta", "ConfusionMatrix",
    "CosineSimilarity", "Perplexity", "Dice", "get_metric_fn", "rearrange_inputs", "History",
    "LambdaCallback", "names", "ROC", "LearningRateScheduler", "ReduceLROnPlateau", "auc",
]

from zenith._unsupported import unsupported as _unsupported  # noqa: E402

__getattr__ = _unsupported(__name__)
