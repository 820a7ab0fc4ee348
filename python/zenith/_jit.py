"""zenith.jit (mindspore.jit): @jit on a function or a Cell's construct, or jit(fn).

zenith runs the decorated function as written (eagerly), which gives the same results as
MindSpore's compiled graph; training steps under set_context(mode=GRAPH_MODE) are captured
and replayed by value_and_grad and Model as before. jit's options (mode, jit_config,
input_signature, ...) are accepted and checked by name."""

import functools

__all__ = ["jit", "jit_class", "STRICT", "COMPATIBLE", "LAX", "JitConfig"]

STRICT = 0
COMPATIBLE = 1
LAX = 2

_OPTIONS = ("mode", "jit_config", "input_signature", "hash_args", "jit_level", "dynamic",
            "fullgraph", "backend", "capture_mode", "compile_once")


def jit(function=None, *args, **kwargs):
    """Decorator or call: jit(fn), @jit, @jit(mode='PSJit', ...). Returns a function that runs
    fn (works on methods such as construct)."""
    unknown = sorted(set(kwargs) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"jit: unknown option(s) {unknown}; known: {list(_OPTIONS)}")

    def wrap(fn):
        @functools.wraps(fn)
        def run(*a, **k):
            return fn(*a, **k)
        run.__zenith_jit__ = True
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
