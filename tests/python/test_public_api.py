"""Every public name is tested: each name a module exports (__all__) and each public method of
the main classes appears in some test of tests/python (as the op list's coverage test does for
C++ ops). Also: the package's modules import and docstrings exist."""

import glob
import inspect
import os
import re

import pytest

import zenith
import zenith.dataset as ds
from zenith import nn

MODULES = [zenith, zenith.ops, zenith.nn, zenith.dataset, zenith.dataset.vision,
           zenith.dataset.transforms, zenith.dataset.config, zenith.train, zenith.train.callback,
           zenith.train.metrics, zenith.communication, zenith.models, zenith.context, zenith.llm]
CLASSES = [zenith.Tensor, zenith.Parameter, nn.Cell, nn.SequentialCell, nn.CellList,
           nn.Optimizer, ds.Dataset, zenith.Model, zenith.train.Callback,
           zenith.train.RunContext, zenith.train.Metric, zenith.llm.Llama, zenith.llm.Tokenizer,
           zenith.llm.LoraConfig, zenith.llm.LlamaConfig]


def _test_sources():
    here = os.path.dirname(__file__)
    text = ""
    for path in glob.glob(os.path.join(here, "*.py")):
        if os.path.basename(path) != os.path.basename(__file__):
            text += open(path).read()
    return text


TEXT = _test_sources()


def public_names():
    for module in MODULES:
        for name in module.__all__:
            yield module.__name__, name


def public_methods():
    for cls in CLASSES:
        for name, _ in inspect.getmembers(cls):
            if not name.startswith("_"):
                yield cls.__name__, name


@pytest.mark.parametrize("module,name", sorted(set(public_names())))
def test_every_exported_name_is_used_by_a_test(module, name):
    assert re.search(rf"\b{re.escape(name)}\b", TEXT), f"{module}.{name} is not tested"


@pytest.mark.parametrize("cls,name", sorted(set(public_methods())))
def test_every_public_method_is_used_by_a_test(cls, name):
    # called (.name), overridden by a test's class (def name), or looked up by name
    n = re.escape(name)
    assert re.search(rf"\.{n}\b|\bdef {n}\(|[\"']{n}[\"']", TEXT), f"{cls}.{name} is not tested"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_exports_exist_and_have_docstrings(module):
    assert module.__doc__
    for name in module.__all__:
        value = getattr(module, name)
        if callable(value) and not isinstance(value, zenith.dtype):
            assert value.__doc__, f"{module.__name__}.{name} has no docstring"


def test_version_and_submodule_aliases():
    assert zenith.__version__ == "0.1.0"
    from zenith.train.callback import LossMonitor  # MindSpore 1's module path
    assert LossMonitor is zenith.train.LossMonitor
    assert zenith.Model is zenith.train.Model
    assert zenith.ops.concat is zenith.ops.cat and zenith.ops.clip is zenith.ops.clamp
