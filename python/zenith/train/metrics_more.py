"""More metrics with MindSpore's names (mindspore.train), written in Python on numpy: MAE, MSE,
Precision, Recall, F1, Fbeta, ConfusionMatrix, CosineSimilarity, Perplexity, Dice; and
get_metric_fn, rearrange_inputs, and the callbacks History and LambdaCallback."""

import functools

import numpy as np

from zenith.train.callback import Callback
from zenith.train.metrics import Metric

__all__ = ["MAE", "MSE", "Precision", "Recall", "F1", "Fbeta", "ConfusionMatrix",
           "CosineSimilarity", "Perplexity", "Dice", "get_metric_fn", "rearrange_inputs",
           "History", "LambdaCallback"]


def _np(x):
    return x.asnumpy() if hasattr(x, "asnumpy") else np.asarray(x)


def rearrange_inputs(func):
    """Decorator for update(): passes the inputs in the order set_indexes([...]) chose."""
    @functools.wraps(func)
    def wrapper(self, *inputs):
        indexes = getattr(self, "_indexes", None)
        if indexes is not None:
            inputs = [inputs[i] for i in indexes]
        return func(self, *inputs)
    return wrapper


class _Indexed(Metric):
    def set_indexes(self, indexes):
        self._indexes = list(indexes)
        return self


class MAE(_Indexed):
    """Mean absolute error over all elements seen."""

    def __init__(self):
        self.clear()

    def clear(self):
        self._sum, self._n = 0.0, 0

    @rearrange_inputs
    def update(self, y_pred, y):
        d = np.abs(_np(y_pred).reshape(_np(y).shape) - _np(y))
        self._sum += float(d.reshape(len(d), -1).sum(-1).mean() * len(d)) if d.ndim > 1 \
            else float(d.sum())
        self._n += len(d)

    def eval(self):
        if self._n == 0:
            raise RuntimeError("MAE: no samples (call update first)")
        return self._sum / self._n


class MSE(MAE):
    """Mean squared error (per sample: the sum of squared differences), averaged."""

    @rearrange_inputs
    def update(self, y_pred, y):
        d = (_np(y_pred).reshape(_np(y).shape) - _np(y)) ** 2
        self._sum += float(d.reshape(len(d), -1).sum(-1).sum())
        self._n += len(d)


def _classes(y_pred, y):
    p = _np(y_pred)
    y = _np(y)
    pred = p.argmax(-1) if p.ndim > 1 else (p > 0.5).astype(int)
    labels = y.argmax(-1) if y.ndim > 1 else y.astype(int)
    n = p.shape[-1] if p.ndim > 1 else 2
    return pred, labels, n


class ConfusionMatrix(_Indexed):
    """num_classes x num_classes counts (rows: labels, columns: predictions); normalize
    'no_norm', 'target' (rows sum to 1), 'prediction' or 'all'."""

    def __init__(self, num_classes, normalize="no_norm", threshold=0.5):
        self.num_classes, self.normalize = int(num_classes), normalize
        self.clear()

    def clear(self):
        self._m = np.zeros((self.num_classes, self.num_classes))

    @rearrange_inputs
    def update(self, y_pred, y):
        pred, labels, _ = _classes(y_pred, y)
        np.add.at(self._m, (labels, pred), 1)

    def eval(self):
        m = self._m
        if self.normalize == "target":
            return m / np.maximum(m.sum(1, keepdims=True), 1e-12)
        if self.normalize == "prediction":
            return m / np.maximum(m.sum(0, keepdims=True), 1e-12)
        if self.normalize == "all":
            return m / max(m.sum(), 1e-12)
        return m


class _PerClass(_Indexed):
    def __init__(self, eval_type="classification"):
        if eval_type != "classification":
            raise ValueError(f"{type(self).__name__}: only eval_type='classification'")
        self.clear()

    def clear(self):
        self._tp = self._fp = self._fn = None

    @rearrange_inputs
    def update(self, y_pred, y):
        pred, labels, n = _classes(y_pred, y)
        if self._tp is None:
            self._tp, self._fp, self._fn = np.zeros(n), np.zeros(n), np.zeros(n)
        for c in range(n):
            self._tp[c] += np.sum((pred == c) & (labels == c))
            self._fp[c] += np.sum((pred == c) & (labels != c))
            self._fn[c] += np.sum((pred != c) & (labels == c))


class Precision(_PerClass):
    """Per-class precision tp / (tp + fp) (average=True: their mean)."""

    def eval(self, average=False):
        v = self._tp / np.maximum(self._tp + self._fp, 1e-12)
        return v.mean() if average else v


class Recall(_PerClass):
    """Per-class recall tp / (tp + fn) (average=True: their mean)."""

    def eval(self, average=False):
        v = self._tp / np.maximum(self._tp + self._fn, 1e-12)
        return v.mean() if average else v


class Fbeta(_PerClass):
    """Per-class F-beta score."""

    def __init__(self, beta):
        if beta <= 0:
            raise ValueError(f"Fbeta: beta must be > 0, got {beta}")
        self.beta = float(beta)
        super().__init__()

    def eval(self, average=False):
        p = self._tp / np.maximum(self._tp + self._fp, 1e-12)
        r = self._tp / np.maximum(self._tp + self._fn, 1e-12)
        b2 = self.beta ** 2
        v = (1 + b2) * p * r / np.maximum(b2 * p + r, 1e-12)
        return v.mean() if average else v


class F1(Fbeta):
    """Per-class F1 score."""

    def __init__(self):
        super().__init__(1.0)


class CosineSimilarity(_Indexed):
    """The matrix of cosine similarities between the rows seen (reduction 'none'), or their
    'sum' / 'mean' (diagonal excluded)."""

    def __init__(self, similarity="cosine", reduction="none", zero_diagonal=True):
        self.reduction, self.zero_diagonal = reduction, zero_diagonal
        self.clear()

    def clear(self):
        self._rows = []

    @rearrange_inputs
    def update(self, inputs):
        self._rows.append(_np(inputs))

    def eval(self):
        x = np.concatenate(self._rows)
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        m = x @ x.T
        if self.zero_diagonal:
            np.fill_diagonal(m, 0)
        return {"none": m, "sum": m.sum(), "mean": m.mean()}[self.reduction]


class Perplexity(_Indexed):
    """exp(mean negative log-likelihood of the labels under the predicted probabilities)."""

    def __init__(self, ignore_label=None):
        self.ignore_label = ignore_label
        self.clear()

    def clear(self):
        self._nll, self._n = 0.0, 0

    @rearrange_inputs
    def update(self, preds, labels):
        p = _np(preds).reshape(-1, _np(preds).shape[-1])
        y = _np(labels).reshape(-1).astype(int)
        keep = y != self.ignore_label if self.ignore_label is not None else np.ones_like(y, bool)
        probs = p[np.arange(len(y)), y][keep]
        self._nll += float(-np.log(np.maximum(probs, 1e-12)).sum())
        self._n += int(keep.sum())

    def eval(self):
        return float(np.exp(self._nll / self._n))


class Dice(_Indexed):
    """Dice coefficient 2|A n B| / (|A| + |B|) over all samples (smooth added to both)."""

    def __init__(self, smooth=1e-5):
        self.smooth = float(smooth)
        self.clear()

    def clear(self):
        self._inter, self._union = 0.0, 0.0

    @rearrange_inputs
    def update(self, y_pred, y):
        p, t = _np(y_pred).astype(np.float64), _np(y).astype(np.float64)
        self._inter += float((p * t).sum())
        self._union += float(p.sum() + t.sum())

    def eval(self):
        return (2 * self._inter + self.smooth) / (self._union + self.smooth)


def get_metric_fn(name, *args, **kwargs):
    """The metric called name ('accuracy', 'mae', 'mse', 'precision', 'recall', 'f1', ...)."""
    from zenith.train import metrics
    extra = {"mae": MAE, "mse": MSE, "precision": Precision, "recall": Recall, "F1": F1,
             "f1": F1, "perplexity": Perplexity, "dice": Dice}
    if name in extra:
        return extra[name](*args, **kwargs)
    return metrics.get_metric_by_name(name, *args, **kwargs)


class History(Callback):
    """Records each epoch's loss (and eval results) in history: {'net_output': [...], ...};
    epoch is the list of epochs."""

    def __init__(self):
        self.history, self.epoch = {}, []

    def on_train_begin(self, run_context):
        self.history, self.epoch = {}, []

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        self.epoch.append(p.cur_epoch_num)
        self.history.setdefault("net_output", []).append(float(p.net_outputs.asnumpy()))
        for k, v in (p.eval_results or {}).items():
            self.history.setdefault(k, []).append(v)


class LambdaCallback(Callback):
    """A callback from functions: on_train_begin=f(run_context), on_train_step_end=..., ..."""

    def __init__(self, on_train_epoch_begin=None, on_train_epoch_end=None,
                 on_train_step_begin=None, on_train_step_end=None, on_train_begin=None,
                 on_train_end=None, on_eval_epoch_begin=None, on_eval_epoch_end=None,
                 on_eval_step_begin=None, on_eval_step_end=None, on_eval_begin=None,
                 on_eval_end=None):
        self._fns = {k: v for k, v in locals().items() if k.startswith("on_") and v}

    def _call(self, event, run_context):
        fn = self._fns.get(event)
        if fn is not None:
            fn(run_context)

    def on_train_begin(self, run_context):
        self._call("on_train_begin", run_context)

    def on_train_epoch_begin(self, run_context):
        self._call("on_train_epoch_begin", run_context)

    def on_train_step_begin(self, run_context):
        self._call("on_train_step_begin", run_context)

    def on_train_step_end(self, run_context):
        self._call("on_train_step_end", run_context)

    def on_train_epoch_end(self, run_context):
        self._call("on_train_epoch_end", run_context)

    def on_train_end(self, run_context):
        self._call("on_train_end", run_context)

    def on_eval_end(self, run_context):
        self._call("on_eval_end", run_context)
