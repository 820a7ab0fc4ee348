"""zenith.jit (mindspore.jit): @jit on a function or a Cell's construct, or jit(fn).

A jit function is a graph step (src/graph, as value_and_grad's functions in GRAPH_MODE), in
PYNATIVE_MODE too: its first call per input signature (the tensors' shapes and dtypes, the other
arguments, whether the Cells it reaches train) runs it eagerly under capture and logs
"graph: N ops -> M after fusion ..."; later calls replay that graph without entering the Python
function. The state is the parameters and buffers of the Cells the function reaches (itself,
its self, its closure and the globals its code names); like MindSpore's compiled graph, other
Python values it reads are frozen at capture.

A function that cannot be replayed correctly runs eagerly (as written) for that signature, the
reason logged once:
  - it reads a tensor's value on the host (`if x.sum() > 0:`, .asnumpy(), .item(), float()):
    control flow on data, which a replay would freeze;
  - it calls an optimizer (`optimizer(grads)`, as a train step does): the optimizer's learning
    rate schedule and step count live outside the graph (value_and_grad's own function inside
    it is still a graph step in GRAPH_MODE);
  - it is called while value_and_grad differentiates or Model trains, evaluates or predicts
    (its ops must be on the tape: it runs as written), inside another jit function's capture
    (it is recorded into that graph), with an input that requires a gradient, or with an
    argument other than tensors and plain values.
jit's options (mode, jit_config, input_signature, ...) are accepted and checked by name."""

import functools
import inspect
import os
import sys
import weakref

from zenith import _zenith as _C
from zenith import _grad
from zenith._tensor import Tensor, _as_tensor

__all__ = ["jit", "jit_class", "STRICT", "COMPATIBLE", "LAX", "JitConfig"]

STRICT = 0
COMPATIBLE = 1
LAX = 2

_OPTIONS = ("mode", "jit_config", "input_signature", "hash_args", "jit_level", "dynamic",
            "fullgraph", "backend", "capture_mode", "compile_once")

_PLAIN = (int, float, bool, str, bytes, type(None))


def _plain(value):
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN) or type(value).__name__ == "dtype"


def _optimizer_classes():
    from zenith.experimental import optim
    from zenith.nn import optim as nn_optim
    return (nn_optim.Optimizer, optim.Optimizer)


_MODEL = os.path.join("zenith", "train", "model.py")


def _in_model():
    """Whether Model (train, eval, predict: the C++ loop, its backward on the tape) called us."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_MODEL):
            return True
        frame = frame.f_back
    return False


class _OptimizerWatch:
    """While it is entered, calling any optimizer (a subclass of nn.Optimizer or
    experimental.optim.Optimizer) is noted in .called."""

    def __init__(self):
        self.called = None

    def __enter__(self):
        self._saved = []
        for cls in _optimizer_classes():
            self._saved.append((cls, cls.__dict__.get("__call__")))
            parent = cls.__call__

            def watched(opt, *a, _parent=parent, **k):
                self.called = self.called or type(opt).__name__
                return _parent(opt, *a, **k)

            cls.__call__ = watched
        return self

    def __exit__(self, *exc):
        for cls, saved in self._saved:
            if saved is None:
                del cls.__call__
            else:
                cls.__call__ = saved
        return False


# How the compiler logs a capture it cannot replay (the step then runs eagerly).
_FAILED = "graph: this step runs eagerly ("


class _JitStep(_grad._GraphStep):
    """One jit function (or one Cell's jit construct): a graph::StepCompiler over the state of
    the Cells it reaches, with the signatures that run eagerly and why."""

    def __init__(self, fn, name):
        super().__init__(fn, [])
        self._name = name
        self._eager = {}  # signature -> why it runs eagerly
        self.calls = 0    # times the Python function was entered (for tests)
        self._failed = None

    def _state(self):
        # Without requires_grad: the graph reads and updates the state's values; gradients a
        # PYNATIVE Model.train left in .grad (nothing in a jit function accumulates there)
        # must not keep it eager.
        state = super()._state()
        self._layout = [(t, tuple(t.shape), t.dtype) for _, t in state]
        return [(name, t.detach()) for name, t in state]

    def _state_changed(self):
        """Whether a parameter took a new shape or dtype (set_data) since the capture."""
        return any(tuple(t.shape) != shape or t.dtype != dtype
                   for t, shape, dtype in self._layout)

    def _enter(self, args, kwargs):
        self.calls += 1
        return self._fn(*args, **kwargs)

    def _eagerly(self, key, reason, log):
        if key not in self._eager and log:
            _grad._log(f"jit: {self._name} runs eagerly ({reason})")
        self._eager[key] = reason

    def __call__(self, args, kwargs):
        args = [_as_tensor(a) if type(a).__module__ == "numpy" else a for a in args]
        inputs = [a for a in args if isinstance(a, Tensor)]
        inputs += [kwargs[k] for k in sorted(kwargs) if isinstance(kwargs[k], Tensor)]
        if (_grad._differentiating[0] or _grad._jit_capturing[0] or _in_model()
                or any(t.requires_grad for t in inputs)):
            return self._enter(args, kwargs)  # on the autograd tape, or into the outer graph
        others = [a for a in args if not isinstance(a, Tensor)]
        others += [v for v in kwargs.values() if not isinstance(v, Tensor)]
        if not all(_plain(v) for v in others):
            self._eagerly("args", "an argument is neither a tensor nor a plain value", True)
            return self._enter(args, kwargs)
        if self._cells is None:
            self._cells = _grad._reachable_cells(self._fn)
        tag = repr([None if isinstance(a, Tensor) else a for a in args] +
                   sorted((k, None if isinstance(v, Tensor) else v) for k, v in kwargs.items()) +
                   [c.training for c in self._cells])
        key = (tag, tuple((tuple(t.shape), str(t.dtype)) for t in inputs))
        if key in self._eager:
            return self._enter(args, kwargs)
        if self._compiler is not None and self._state_changed():
            self._compiler, self._specs, self._eager = None, {}, {}  # capture anew
        if self._compiler is None:
            self._compiler = _C.graph.StepCompiler(self._state(), self._log)
        ran = {}

        def phase():
            # value_and_grad's functions (GRAPH_MODE graph steps) and jit functions it calls
            # are recorded into this graph rather than being graph steps of their own.
            _grad._jit_capturing[0] += 1
            try:
                with _OptimizerWatch() as watch:
                    out = self._enter(args, kwargs)
            finally:
                _grad._jit_capturing[0] -= 1
            leaves = []
            ran["spec"] = _grad._flatten(out, leaves)
            ran["optimizer"] = watch.called
            return leaves

        captures = self._compiler.captures
        self._failed = None
        leaves = self._compiler.run(inputs, tag, phase)
        if "spec" not in ran:  # a replay
            return _grad._unflatten(self._specs[key], iter(leaves))
        if self._compiler.captures > captures:
            if self._failed is not None:  # the compiler logged why
                self._eagerly(key, self._failed, False)
            elif ran["optimizer"]:
                self._eagerly(key, f"it calls the optimizer {ran['optimizer']}, whose learning "
                              "rate and step count a replay would freeze", True)
            else:
                self._specs[key] = ran["spec"]
        elif key in self._specs:  # the compiler runs this signature eagerly (logged once)
            self._eagerly(key, self._compiler.fallback_reason, False)
        # else: an eager call while parameters still hold gradients; a later one captures
        return _grad._unflatten(ran["spec"], iter(leaves))

    def _log(self, line):
        if line.startswith(_FAILED):
            self._failed = line[len(_FAILED):].rstrip(")")
        _grad._log(line)


def _takes_self(fn):
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] == "self"


def jit(function=None, *args, **kwargs):
    """Decorator or call: jit(fn), @jit, @jit(mode='PSJit', ...). Returns a function captured
    once per input signature and replayed (a Cell's construct: one graph per Cell)."""
    unknown = sorted(set(kwargs) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"jit: unknown option(s) {unknown}; known: {list(_OPTIONS)}")

    def wrap(fn):
        name = getattr(fn, "__qualname__", type(fn).__name__)
        if _takes_self(fn):  # a method such as construct, decorated in its class
            steps = weakref.WeakKeyDictionary()  # one graph step per Cell (not copied with it)

            @functools.wraps(fn)
            def method(self, *a, **k):
                step = steps.get(self)
                if step is None:
                    step = steps[self] = _JitStep(fn.__get__(self), name)
                return step(a, k)
            method.__zenith_jit__ = True
            method._jit = steps  # each Cell's captures, replays and eager signatures, for tests
            return method

        step = _JitStep(fn, name)

        @functools.wraps(fn)
        def run(*a, **k):
            return step(a, k)
        run.__zenith_jit__ = True
        run._jit = step  # its captures, replays and eager signatures, for tests
        return run

    if function is None:
        return wrap
    if not callable(function):
        raise TypeError(f"jit: expected a function, got {type(function).__name__}")
    return wrap(function)


def jit_class(cls):
    """Marks a class usable in jit functions; returns it unchanged."""
    return cls


class JitConfig:
    """jit options (mindspore.JitConfig): accepted and kept as a dict."""

    def __init__(self, jit_level="", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE",
                 infer_boost="off", **kwargs):
        self.jit_config_dict = dict(jit_level=jit_level, exc_mode=exc_mode,
                                    jit_syntax_level=jit_syntax_level, debug_level=debug_level,
                                    infer_boost=infer_boost, **kwargs)
