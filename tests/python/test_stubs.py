"""python/zenith/_zenith.pyi declares exactly what the compiled module has: every public
function, class and member (the Tensor methods zenith/_tensor.py attaches included), and nothing
more. Private helpers (one leading underscore) are the package's business, not an editor's."""

import ast
import inspect
import os

import pytest

import zenith
from zenith import _zenith

STUB = os.path.join(os.path.dirname(zenith.__file__), "_zenith.pyi")


def declared(body):
    """{name: sub-declarations or None} of a stub's module or class body."""
    out = {}
    for node in body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = declared(node.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = None
    return out


STUBS = declared(ast.parse(open(STUB).read()).body)
IGNORED = {"_Shape", "_Value"}


def runtime_names(obj):
    names = set()
    for name in dir(obj):
        if name.startswith("_") and not name.startswith("__"):
            continue
        if name.startswith("__") and name not in ("__init__", "__call__", "__getitem__",
                                                   "__setitem__", "__len__", "__iter__"):
            continue
        if name.startswith("__") and inspect.isclass(obj) and name not in vars(obj):
            continue
        # pybind11's stand-in for a class bound without a constructor (it raises TypeError):
        # such a class is not constructible from Python, so the stub declares no __init__.
        if name == "__init__" and (obj.__init__.__doc__ or "").startswith("Initialize self."):
            continue
        names.add(name)
    return names


def check(obj, stub, path):
    missing = sorted(n for n in runtime_names(obj) if n not in stub)
    assert not missing, f"{path}: not in _zenith.pyi: {missing}"
    for name, sub in stub.items():
        if name in IGNORED:
            continue
        assert hasattr(obj, name), f"{path}.{name} is in _zenith.pyi but not in the module"
        value = getattr(obj, name)
        if sub is not None and (inspect.ismodule(value) or inspect.isclass(value)):
            if isinstance(value, type) and issubclass(value, BaseException):
                continue
            check(value, sub, f"{path}.{name}")


def test_stub_matches_the_module():
    check(_zenith, STUBS, "_zenith")


def test_llm_stub_matches_its_module():
    from zenith import _zenith_llm
    path = os.path.join(os.path.dirname(zenith.__file__), "_zenith_llm.pyi")
    check(_zenith_llm, declared(ast.parse(open(path).read()).body), "_zenith_llm")


@pytest.mark.parametrize("name", ["Tensor", "dtype", "ops", "nn", "data", "train"])
def test_stub_has_the_main_parts(name):
    assert name in STUBS and STUBS[name]
