"""Metrics with MindSpore's names (mindspore.train): the built-in ones run in C++; a Python
metric subclasses Metric (clear, update(y_pred, y), eval)."""

from zenith import _zenith as _C

__all__ = ["Metric", "Accuracy", "Loss", "TopKCategoricalAccuracy", "Top1CategoricalAccuracy",
           "Top5CategoricalAccuracy", "names", "get_metric_by_name"]


class Metric:
    """The base of metrics: clear() before an evaluation, update(y_pred, y) per batch,
    eval() for the value. A metric written in Python overrides all three."""

    def clear(self):
        raise NotImplementedError

    def update(self, *inputs):
        raise NotImplementedError

    def eval(self):
        raise NotImplementedError

    def _cpp(self):
        return _C.train.PyMetric(self)


class _CppMetric(Metric):
    """A metric computed in C++ (self._m), usable on its own too."""

    def clear(self):
        self._m.clear()

    def update(self, y_pred, y):
        self._m.update(y_pred, y)

    def eval(self):
        return self._m.eval()

    def _cpp(self):
        return self._m


class Accuracy(_CppMetric):
    """The fraction of samples whose argmax of y_pred [N, C] equals the label y [N]."""

    def __init__(self, eval_type="classification"):
        if eval_type != "classification":
            raise ValueError("Accuracy: only eval_type='classification' is supported")
        self._m = _C.train.Accuracy()


class Loss(_CppMetric):
    """The mean loss per sample over the evaluation."""

    def __init__(self):
        self._m = _C.train.Loss()


class TopKCategoricalAccuracy(_CppMetric):
    """The fraction of samples whose label is among the k largest logits."""

    def __init__(self, k):
        self._m = _C.train.TopKCategoricalAccuracy(int(k))


class Top1CategoricalAccuracy(TopKCategoricalAccuracy):
    """Top-1 accuracy."""

    def __init__(self):
        super().__init__(1)


class Top5CategoricalAccuracy(TopKCategoricalAccuracy):
    """Top-5 accuracy."""

    def __init__(self):
        super().__init__(5)


_BY_NAME = {"accuracy": Accuracy, "loss": Loss, "top_1_accuracy": Top1CategoricalAccuracy,
            "top_5_accuracy": Top5CategoricalAccuracy}


def names():
    """The metric names Model's metrics argument accepts."""
    return sorted(_BY_NAME)


def get_metric_by_name(metric, *args, **kwargs):
    """The metric called `metric` ('accuracy', 'loss', 'top_1_accuracy', 'top_5_accuracy')."""
    if metric not in _BY_NAME:
        raise ValueError(f"unknown metric {metric!r}; known: {names()}")
    return _BY_NAME[metric](*args, **kwargs)
