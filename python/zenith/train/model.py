"""Model: train/eval/predict with MindSpore's arguments, on the C++ Model (the training loop
runs in C++ with the GIL released; Python cells, losses, metrics and callbacks are called back).
"""

import os
import sys

from zenith import _zenith as _C
from zenith._tensor import Tensor, _as_tensor
from zenith.nn.cell import Cell
from zenith.nn.loss import LossBase, _CppLoss
from zenith.nn.optim import Optimizer
from zenith.train.callback import cpp_callbacks
from zenith.train.metrics import Metric, get_metric_by_name

__all__ = ["Model"]


def _metrics(metrics):
    if metrics is None:
        return {}
    if isinstance(metrics, (set, list, tuple)):
        return {name: get_metric_by_name(name) for name in metrics}
    if isinstance(metrics, dict):
        out = {}
        for name, m in metrics.items():
            if isinstance(m, str):
                m = get_metric_by_name(m)
            if not isinstance(m, Metric):
                raise TypeError(f"metric {name!r} is {type(m).__name__}, not a Metric")
            out[name] = m
        return out
    raise TypeError(f"metrics must be a set of names or a dict of Metrics, got "
                    f"{type(metrics).__name__}")


def _loss(loss_fn):
    if loss_fn is None:
        return None
    if isinstance(loss_fn, LossBase) and loss_fn.reduction == "none":
        raise ValueError("Model: the loss returns per-sample values (reduction='none'); "
                         "training needs a scalar loss: use reduction='mean' (or 'sum')")
    if isinstance(loss_fn, _CppLoss):
        return loss_fn._loss
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a loss Cell or callable, got {type(loss_fn).__name__}")
    return _C.nn.PyLoss(loss_fn)


def _data_parallel(network):
    """network wrapped in DistributedDataParallel when set_auto_parallel_context asks for data
    parallelism and the job has more than one rank."""
    from zenith import context
    from zenith.nn.wrap import DistributedDataParallel
    if context.get_auto_parallel_context("parallel_mode") != context.ParallelMode.DATA_PARALLEL:
        return network
    if not _C.communication.is_initialized():
        raise RuntimeError("parallel_mode='data_parallel' needs zenith.communication.init() "
                           "before Model is made")
    if not context.get_auto_parallel_context("gradients_mean"):
        raise ValueError("set_auto_parallel_context(gradients_mean=False) is not supported: "
                         "zenith's data parallelism averages the gradients; set "
                         "gradients_mean=True (and scale the learning rate for summed gradients)")
    size = _C.communication.get_group_size()
    device_num = context.get_auto_parallel_context("device_num")
    if device_num not in (1, size):
        raise ValueError(f"set_auto_parallel_context(device_num={device_num}) but the job has "
                         f"{size} ranks")
    if size == 1 or isinstance(network, DistributedDataParallel):
        return network
    return DistributedDataParallel(network, context.get_auto_parallel_context("bucket_cap_mb"))


def _dataset(dataset, what):
    cpp = getattr(dataset, "_ds", None)
    if cpp is None:
        raise TypeError(f"Model.{what}: expected a zenith.dataset Dataset, got "
                        f"{type(dataset).__name__}")
    return cpp


class Model:
    """Trains and evaluates a network (mindspore.train.Model).

    Model(network, loss_fn=None, optimizer=None, metrics=None)
      metrics: a set of names ({'accuracy'}) or a dict of Metrics ({'Accuracy': Accuracy()}).
    train(epoch, train_dataset, callbacks=None, dataset_sink_mode=False, initial_epoch=0);
    eval(valid_dataset) returns {metric name: value}; predict(data) the network's output.
    Under set_auto_parallel_context(parallel_mode='data_parallel', gradients_mean=True) the
    network is wrapped in DistributedDataParallel. When the platform gives the rank
    ZENITH_METRICS_FILE, training logs its scalars there for the dashboard.
    """

    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
                 eval_indexes=None, amp_level="O0", boost_level="O0", **kwargs):
        if not isinstance(network, Cell):
            raise TypeError(f"Model: network must be a Cell, got {type(network).__name__}")
        if eval_network is not None or eval_indexes is not None:
            raise ValueError("Model: eval_network and eval_indexes are not supported")
        if boost_level not in ("O0", None):
            raise ValueError("Model: only boost_level='O0' is supported")
        unknown = sorted(set(kwargs) - {"loss_scale_manager", "keep_batchnorm_fp32"})
        if unknown:
            raise ValueError(f"Model: unknown argument(s) {unknown}")
        if amp_level not in (None, "O0"):
            from zenith.amp import auto_mixed_precision
            network = auto_mixed_precision(network, amp_level)
        # A loss scale multiplies the loss and divides the gradients back: in float32
        # gradients (zenith keeps float32 parameters) the step is the same without it.
        self._loss_scale_manager = kwargs.get("loss_scale_manager")
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise TypeError(f"Model: optimizer must be a zenith.nn optimizer, got "
                            f"{type(optimizer).__name__}")
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._metrics = _metrics(metrics)
        self.train_network = _data_parallel(network)
        self._model = _C.train.Model(self.train_network, _loss(loss_fn),
                                     optimizer._model_optimizer() if optimizer is not None
                                     else None,
                                     {n: m._cpp() for n, m in self._metrics.items()})

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def predict_network(self):
        return self._network

    @property
    def eval_network(self):
        return self._network

    def _callbacks(self, callbacks):
        cbs = cpp_callbacks(callbacks, self)
        cbs.append(_C.train.SignalCheck())
        metrics_file = os.environ.get("ZENITH_METRICS_FILE")
        if metrics_file:  # the platform's dashboard store (zenith server ingests the file)
            cbs.append(_C.train.MetricsLogger(metrics_file, 10))
        return cbs

    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1,
              initial_epoch=0):
        """Trains epochs initial_epoch + 1 .. epoch over train_dataset (rows of input, label)."""
        if self._loss_fn is None or self._optimizer is None:
            raise ValueError("Model.train needs loss_fn and optimizer")
        data = _dataset(train_dataset, "train")
        sys.stdout.flush()
        try:
            self._model.train(int(epoch), data, self._callbacks(callbacks),
                              bool(dataset_sink_mode), int(initial_epoch))
        finally:
            _C.train.flush_stdout()

    def fit(self, epoch, train_dataset, valid_dataset=None, valid_frequency=1, callbacks=None,
            dataset_sink_mode=False, valid_dataset_sink_mode=False, sink_size=-1,
            initial_epoch=0):
        """train() plus eval(valid_dataset) every valid_frequency epochs (and after the last);
        callbacks see the results in on_eval_end."""
        if valid_dataset is None:
            return self.train(epoch, train_dataset, callbacks, dataset_sink_mode, sink_size,
                              initial_epoch)
        if self._loss_fn is None or self._optimizer is None:
            raise ValueError("Model.fit needs loss_fn and optimizer")
        sys.stdout.flush()
        try:
            self._model.fit(int(epoch), _dataset(train_dataset, "fit"),
                            _dataset(valid_dataset, "fit"), int(valid_frequency),
                            self._callbacks(callbacks), bool(dataset_sink_mode),
                            int(initial_epoch))
        finally:
            _C.train.flush_stdout()

    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        """{metric name: value} over valid_dataset, in inference mode."""
        if not self._metrics:
            raise ValueError("Model.eval needs metrics (Model(..., metrics={'accuracy'}))")
        results = self._model.eval(_dataset(valid_dataset, "eval"))
        return {name: results[name] for name in self._metrics}

    def predict(self, *predict_data):
        """The network's output for one batch, in inference mode without gradients."""
        if len(predict_data) != 1:
            raise ValueError("Model.predict takes one input tensor")
        return self._model.predict(_as_tensor(predict_data[0]))

    # zenith's additions: checkpoints with the run position (resumable), and the history.
    def save_checkpoint(self, path):
        """Network, optimizer state, epoch/step and RNG state (resumable with
        load_checkpoint)."""
        self._model.save_checkpoint(str(path))

    def load_checkpoint(self, path):
        """Restores what save_checkpoint wrote; returns its metadata; train(..., initial_epoch=
        metadata['epoch']) resumes."""
        return dict(self._model.load_checkpoint(str(path)))

    @property
    def history(self):
        """Per epoch: loss, seconds, images_per_second, learning_rate, eval results."""
        return self._model.history()
