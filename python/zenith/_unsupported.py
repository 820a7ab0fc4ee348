"""The error a MindSpore program gets for an API zenith does not have yet.

Each public zenith module that mirrors a MindSpore one (zenith, zenith.nn, zenith.ops, ...)
ends with `__getattr__ = unsupported(__name__)`: asking it for a missing public name raises
UnsupportedError ("mindspore.nn.Foo is not supported by zenith yet ...") at the line that asks,
also from `from zenith.nn import Foo`, instead of an AttributeError deep inside. Private and
dunder names, and hasattr()-style probes of tools, still get AttributeError.
"""

__all__ = ["UnsupportedError", "unsupported"]


class UnsupportedError(NotImplementedError):
    """A MindSpore API zenith does not provide (yet)."""


_PROBES = {"pytest_plugins", "setup_module", "teardown_module", "setUpModule",
           "tearDownModule", "load_tests"}


def unsupported(module_name):
    """A module-level __getattr__ for module_name (zenith.X mirrors mindspore.X)."""
    ms_name = "mindspore" + module_name[len("zenith"):]

    def __getattr__(name):
        if name.startswith("_") or name in _PROBES:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        raise UnsupportedError(
            f"{ms_name}.{name} is not supported by zenith yet (zenith's {module_name} has no "
            f"{name!r}); see docs/mindspore.md for what is supported")

    return __getattr__
