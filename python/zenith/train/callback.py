"""Callbacks with MindSpore's names (mindspore.train): the built-in ones run in C++; a Python
callback subclasses Callback and overrides on_train_step_end(run_context) etc."""

import os
import time

import numpy as np

from zenith import _zenith as _C
from zenith._tensor import Tensor, float32

__all__ = ["Callback", "RunContext", "LossMonitor", "TimeMonitor", "ModelCheckpoint",
           "CheckpointConfig", "SummaryCollector", "EarlyStopping"]


class _CppCallback:
    """A callback implemented in C++ (self._cb)."""

    def _cpp(self):
        return self._cb


class CheckpointConfig:
    """When ModelCheckpoint saves (MindSpore's defaults: every step, the newest 5 kept).

    save_checkpoint_steps: every N steps (0: never by step); save_checkpoint_epochs (zenith's
    addition): every N epochs (0: never by epoch); keep_checkpoint_max: files kept (0: all).
    """

    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 keep_checkpoint_per_n_minutes=0, integrated_save=True, async_save=False,
                 saved_network=None, append_info=None, enc_key=None, enc_mode="AES-GCM",
                 exception_save=False, save_checkpoint_epochs=0, **kwargs):
        if save_checkpoint_seconds or keep_checkpoint_per_n_minutes:
            raise ValueError("CheckpointConfig: time-based saving is not supported; use "
                             "save_checkpoint_steps or save_checkpoint_epochs")
        if enc_key is not None or saved_network is not None:
            raise ValueError("CheckpointConfig: enc_key and saved_network are not supported")
        for name, v in (("save_checkpoint_steps", save_checkpoint_steps),
                        ("keep_checkpoint_max", keep_checkpoint_max),
                        ("save_checkpoint_epochs", save_checkpoint_epochs)):
            if v is None or isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"CheckpointConfig: {name} must be an int >= 0, got {v!r}")
        self.save_checkpoint_steps = save_checkpoint_steps
        self.save_checkpoint_epochs = save_checkpoint_epochs
        self.keep_checkpoint_max = keep_checkpoint_max


class ModelCheckpoint(_CppCallback):
    """Saves checkpoints (safetensors: the network, optimizer state, run position; the files
    zenith train and zenith eval read) as directory/<prefix>_step_<S>.safetensors and
    <prefix>_epoch_<E>.safetensors, written atomically."""

    def __init__(self, prefix="CKP", directory=None, config=None, **kwargs):
        config = config or CheckpointConfig()
        if not isinstance(config, CheckpointConfig):
            raise TypeError("ModelCheckpoint: config must be a CheckpointConfig")
        self.directory = os.path.abspath(directory or ".")
        cpp_config = _C.train.CheckpointConfig(config.save_checkpoint_epochs,
                                               config.save_checkpoint_steps,
                                               config.keep_checkpoint_max, str(prefix))
        self._cb = _C.train.ModelCheckpoint(self.directory, cpp_config)
        self.prefix = str(prefix)

    def _on_train_end(self, run_context):
        # As MindSpore's ModelCheckpoint.end: the trained network at the end of training, in
        # <prefix>-<epoch>_<step in epoch>.ckpt (zenith's own files above are kept too).
        from zenith._checkpoint import save_checkpoint
        p = run_context.original_args()
        network = p.train_network
        if network is None:
            return
        os.makedirs(self.directory, exist_ok=True)
        name = f"{self.prefix}-{p.cur_epoch_num}_{p.cur_step_in_epoch or p.batch_num}.ckpt"
        save_checkpoint(network, os.path.join(self.directory, name))
        self.latest_ckpt_file_name = os.path.join(self.directory, name)


class SummaryCollector(_CppCallback):
    """TensorBoard scalars (loss, learning rate, epoch time, images/s, eval metrics) in event
    files under summary_dir, every collect_freq steps."""

    def __init__(self, summary_dir, collect_freq=10, **kwargs):
        self._cb = _C.train.SummaryCollector(str(summary_dir), int(collect_freq))


class EarlyStopping(_CppCallback):
    """Stops when monitor ('eval_loss', 'loss' or a metric name) has not improved by min_delta
    for patience epochs; mode 'auto', 'min' or 'max'."""

    def __init__(self, monitor="eval_loss", min_delta=0, patience=0, verbose=False, mode="auto",
                 baseline=None, restore_best_weights=False):
        if baseline is not None or restore_best_weights:
            raise ValueError("EarlyStopping: baseline and restore_best_weights are not supported")
        self._cb = _C.train.EarlyStopping(monitor, int(patience), float(min_delta), mode)


class _CallbackParam:
    """run_context.original_args(): the run's state under MindSpore's names."""

    def __init__(self, data, model):
        self._data = data
        self._model = model

    cur_epoch_num = property(lambda self: self._data.epoch)
    epoch_num = property(lambda self: self._data.epochs)
    cur_step_num = property(lambda self: self._data.step)
    step_num = property(lambda self: self._data.step)
    batch_num = property(lambda self: self._data.steps_per_epoch)
    cur_step_in_epoch = property(lambda self: self._data.step_in_epoch)
    batch_size = property(lambda self: self._data.batch_size)
    learning_rate = property(lambda self: self._data.learning_rate)
    net_outputs = property(lambda self: Tensor(self._data.loss, float32))
    eval_results = property(lambda self: dict(self._data.eval_results))
    epoch_record = property(lambda self: self._data.epoch_record)
    last_checkpoint = property(lambda self: self._data.last_checkpoint)
    train_network = property(lambda self: self._model.train_network if self._model else None)
    network = property(lambda self: self._model.train_network if self._model else None)
    optimizer = property(lambda self: self._model.optimizer if self._model else None)


class RunContext:
    """What a callback receives: original_args() gives the run's state (cur_epoch_num,
    cur_step_num, batch_num, net_outputs, ...); request_stop() ends training after this
    step."""

    def __init__(self, data, model=None, params=None):
        self._data = data
        # One _CallbackParam per callback and run, as MindSpore's cb_params: attributes a
        # callback sets on it in one hook are there in the next.
        self._params = params if params is not None else _CallbackParam(data, model)
        self._params._data = data

    def original_args(self):
        return self._params

    def request_stop(self):
        self._data.request_stop("requested by a Python callback")

    def get_stop_requested(self):
        return self._data.stop_requested


class Callback:
    """The base of Python callbacks (MindSpore's Callback). Override any of on_train_begin,
    on_train_epoch_begin, on_train_step_begin, on_train_step_end, on_train_epoch_end,
    on_train_end, on_eval_end; each gets a RunContext. The MindSpore 1 names (begin,
    epoch_begin, step_begin, step_end, epoch_end, end) are what the defaults call."""

    def begin(self, run_context):
        pass

    def epoch_begin(self, run_context):
        pass

    def step_begin(self, run_context):
        pass

    def step_end(self, run_context):
        pass

    def epoch_end(self, run_context):
        pass

    def end(self, run_context):
        pass

    def on_train_begin(self, run_context):
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_train_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_train_step_end(self, run_context):
        self.step_end(run_context)

    def on_train_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_train_end(self, run_context):
        self.end(run_context)

    def on_eval_end(self, run_context):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *err):
        pass


class LossMonitor(Callback):
    """Prints MindSpore's 'epoch: E step: S, loss is L' every per_print_times steps (0: never)
    and, under Model.fit, 'Eval result: epoch E, metrics: {...}' after each evaluation; raises
    ValueError on a NaN or infinite loss, as MindSpore's."""

    def __init__(self, per_print_times=1):
        if isinstance(per_print_times, bool) or not isinstance(per_print_times, int) or \
                per_print_times < 0:
            raise ValueError(f"LossMonitor: per_print_times must be an int >= 0, got "
                             f"{per_print_times!r}")
        self._per_print_times = per_print_times
        self._last_print_time = 0
        self._steps = 0  # this run's steps (MindSpore's cur_step_num; zenith's counts on)

    def on_train_begin(self, run_context):
        self._last_print_time = self._steps = 0

    def on_train_step_end(self, run_context):
        p = run_context.original_args()
        self._steps += 1
        loss = float(np.float32(p._data.loss))  # a float32 loss printed as MindSpore's float()
        step = p.cur_step_in_epoch
        if not np.isfinite(loss):
            raise ValueError(f"In epoch: {p.cur_epoch_num} step: {step}, loss is NAN or INF, "
                             f"training process cannot continue, terminating training.")
        every = self._per_print_times
        if every != 0 and self._steps - self._last_print_time >= every:
            self._last_print_time = self._steps
            print(f"epoch: {p.cur_epoch_num} step: {step}, loss is {loss}", flush=True)

    def on_eval_end(self, run_context):
        p = run_context.original_args()
        names = getattr(p._model, "_metrics", None)
        metrics = {k: v for k, v in p.eval_results.items() if not names or k in names}
        if metrics:
            print(f"Eval result: epoch {p.cur_epoch_num}, metrics: {metrics}", flush=True)


class TimeMonitor(Callback):
    """Prints MindSpore's 'Train epoch time: T ms, per step time: S ms' after each epoch
    (per step: over the epoch's steps, else data_size)."""

    def __init__(self, data_size=None, data_time=False):
        if data_time:
            raise ValueError("TimeMonitor: data_time=True is not supported by zenith yet")
        self.data_size = data_size
        self.epoch_time = time.time()

    def on_train_epoch_begin(self, run_context):
        self.epoch_time = time.time()

    def on_train_epoch_end(self, run_context):
        epoch_ms = (time.time() - self.epoch_time) * 1000
        batch_num = run_context.original_args().batch_num
        steps = batch_num if isinstance(batch_num, int) and batch_num > 0 else self.data_size
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"TimeMonitor: the step count must be a positive int, got {steps!r}")
        print(f"Train epoch time: {epoch_ms:5.3f} ms, per step time: {epoch_ms / steps:5.3f} ms",
              flush=True)


_EVENTS = ("on_train_begin", "on_train_epoch_begin", "on_train_step_begin", "on_train_step_end",
           "on_train_epoch_end", "on_train_end", "on_eval_end")
_LEGACY = {"on_train_begin": "begin", "on_train_epoch_begin": "epoch_begin",
           "on_train_step_begin": "step_begin", "on_train_step_end": "step_end",
           "on_train_epoch_end": "epoch_end", "on_train_end": "end"}


def _overrides(cb, event):
    """Whether cb does anything at event (so that idle events cost no call into Python)."""
    cls = type(cb)
    if getattr(cls, event, None) is not getattr(Callback, event, None):
        return True
    legacy = _LEGACY.get(event)
    return legacy is not None and getattr(cls, legacy, None) is not getattr(Callback, legacy, None)


def cpp_callbacks(callbacks, model):
    """The C++ callbacks for Model.train's callbacks argument (a callback or a list)."""
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        callbacks = [callbacks]
    out = []
    from zenith.profiler import Profiler
    for cb in callbacks:
        if isinstance(cb, (_CppCallback, Profiler)):
            out.append(cb._cpp())
            extra = _mindspore_lines(cb, model)
            if extra is not None:
                out.append(extra)
        elif isinstance(cb, Callback) or any(hasattr(cb, e) for e in _EVENTS):
            events = {e for e in _EVENTS if not isinstance(cb, Callback) or _overrides(cb, e)}

            def dispatch(event, data, cb=cb, state={}):
                if event == "on_train_begin" or "params" not in state:
                    state["params"] = _CallbackParam(data, model)
                getattr(cb, event)(RunContext(data, model, state["params"]))

            out.append(_C.train.PyCallback(dispatch, events))
        else:
            raise TypeError(f"callbacks must be Callbacks, got {type(cb).__name__}")
    return out


def _mindspore_lines(cb, model):
    """What MindSpore's built-in callbacks do beyond zenith's C++ ones: ModelCheckpoint saves
    <prefix>-<epoch>_<step>.ckpt at the end of training."""
    if isinstance(cb, ModelCheckpoint):
        def dispatch(event, data):
            cb._on_train_end(RunContext(data, model))
        return _C.train.PyCallback(dispatch, {"on_train_end"})
    return None
