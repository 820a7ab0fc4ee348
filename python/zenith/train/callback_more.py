"""More of mindspore.train: the callbacks LearningRateScheduler and ReduceLROnPlateau, the
metric ROC and the function auc."""

import numpy as np

from zenith import _zenith as _C
from zenith.train.callback import Callback
from zenith.train.metrics_more import _Indexed, _np, rearrange_inputs

__all__ = ["LearningRateScheduler", "ReduceLROnPlateau", "ROC", "auc"]


def _set_lr(optimizer, lr):
    optimizer._opt.set_lr(_C.optim.constant_lr(float(lr)))


class LearningRateScheduler(Callback):
    """After each step, sets the learning rate to learning_rate_function(lr, cur_step_num)."""

    def __init__(self, learning_rate_function):
        self.learning_rate_function = learning_rate_function

    def on_train_step_end(self, run_context):
        p = run_context.original_args()
        opt = p.optimizer
        lr = float(opt._opt.current_lr)
        new = self.learning_rate_function(lr, p.cur_step_num)
        if new != lr:
            _set_lr(opt, new)


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by factor when monitor ('loss', or an eval metric such as
    'eval_loss' after Model.fit's evaluations) has not improved by min_delta for patience
    epochs; then waits cooldown epochs; never below min_lr."""

    def __init__(self, monitor="eval_loss", factor=0.1, patience=10, verbose=False, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0):
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau: factor must be < 1")
        self.monitor, self.factor, self.patience = monitor, factor, patience
        self.verbose, self.min_delta, self.cooldown, self.min_lr = verbose, min_delta, cooldown, \
            min_lr
        self.mode = mode if mode != "auto" else ("max" if "acc" in monitor else "min")
        self.best, self.wait, self.cooldown_counter = None, 0, 0

    def _value(self, p):
        if self.monitor == "loss":
            return float(p.net_outputs.asnumpy())
        results = p.eval_results or {}
        key = self.monitor[5:] if self.monitor.startswith("eval_") and \
            self.monitor not in results else self.monitor
        return results.get(key)

    def on_train_epoch_end(self, run_context):
        p = run_context.original_args()
        value = self._value(p)
        if value is None:
            return
        better = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                       else value > self.best + self.min_delta)
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if better:
            self.best, self.wait = value, 0
            return
        if self.cooldown_counter == 0:
            self.wait += 1
            if self.wait >= self.patience:
                opt = p.optimizer
                lr = float(opt._opt.current_lr)
                new = max(lr * self.factor, self.min_lr)
                if new < lr:
                    _set_lr(opt, new)
                    if self.verbose:
                        print(f"Epoch {p.cur_epoch_num}: reducing learning rate to {new}.")
                self.cooldown_counter, self.wait = self.cooldown, 0


def auc(x, y, reorder=False):
    """The area under the curve (x, y) by the trapezoidal rule."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if reorder:
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    return float(np.trapz(y, x))


class ROC(_Indexed):
    """Binary ROC curve: eval() returns (fpr, tpr, thresholds) over the scores seen (the
    positive class's probability), thresholds in decreasing order starting above the
    maximum."""

    def __init__(self, class_num=None, pos_label=None):
        self.pos_label = 1 if pos_label is None else pos_label
        self.clear()

    def clear(self):
        self._scores, self._labels = [], []

    @rearrange_inputs
    def update(self, *inputs):
        scores, labels = _np(inputs[0]), _np(inputs[1])
        if scores.ndim == 2:
            scores = scores[:, self.pos_label]
        self._scores.append(scores.reshape(-1))
        self._labels.append(labels.reshape(-1))

    def eval(self):
        s = np.concatenate(self._scores).astype(np.float64)
        y = np.concatenate(self._labels) == self.pos_label
        thresholds = np.unique(s)[::-1]
        tps = np.array([np.sum(y & (s >= th)) for th in thresholds], np.float64)
        fps = np.array([np.sum(~y & (s >= th)) for th in thresholds], np.float64)
        tps, fps = np.r_[0, tps], np.r_[0, fps]
        thresholds = np.r_[thresholds[0] + 1, thresholds]
        return fps / max(fps[-1], 1), tps / max(tps[-1], 1), thresholds
