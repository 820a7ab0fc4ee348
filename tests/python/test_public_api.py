"""Every public name is tested: each name a module exports (__all__) and each public method of
the main classes is used by the code of some test of tests/python (as the op list's coverage test
does for C++ ops), reported as one test. Also: the package's modules import and docstrings
exist."""

import ast
import glob
import inspect
import os
import textwrap

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


def _test_trees():
    """Every test file's code; of this file only its other tests (its lists name everything)."""
    here = os.path.dirname(__file__)
    for path in sorted(glob.glob(os.path.join(here, "*.py"))):
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        if os.path.basename(path) != os.path.basename(__file__):
            yield path, tree
            continue
        for node in tree.body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                    and node.name != "test_every_public_name_is_used_by_a_test"):
                yield path, node


def _scripts(tree):
    """Programs the tests run in another process, written as string literals: strings that
    parse as Python with a call or an import in them (a bare name does not)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            try:
                script = ast.parse(textwrap.dedent(node.value))
            except SyntaxError:
                continue
            if any(isinstance(n, (ast.Call, ast.Import, ast.ImportFrom)) for n in ast.walk(script)):
                yield script


def _used_names():
    """Names the tests' code uses: read as a variable (`Tensor(...)` after an import), as an
    attribute (`zenith.ops.cat`, `t.numpy()`), defined as a method (a test's Cell overrides
    `construct`) or looked up with getattr/hasattr, in a test or in a program a test runs. A
    name only inside a string does not count."""
    used = set()
    trees = [tree for _, tree in _test_trees()]
    trees += [script for tree in list(trees) for script in _scripts(tree)]
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                used.add(node.name)
                used |= _parametrized_lookups(node)
            elif isinstance(node, ast.ImportFrom) and node.module:
                used |= set(node.module.split("."))  # from zenith.train.callback import ...
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant)):
                used.add(node.args[1].value)
            elif isinstance(node, ast.For):
                used |= _looped_up_names(node)
    return used


def _looked_up(body, variable):
    """Whether `body` calls getattr(_, variable)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr"
               and len(n.args) >= 2 and isinstance(n.args[1], ast.Name)
               and n.args[1].id == variable for b in body for n in ast.walk(b))


def _cases(params, cases, body):
    """The string values of the `params` that `body` looks up with getattr, over `cases`
    (tuples of one value per param, or bare values for one param)."""
    found = set()
    for i, param in enumerate(params):
        if not _looked_up(body, param):
            continue
        for case in getattr(cases, "elts", []):
            value = case.elts[i] if isinstance(case, ast.Tuple) and i < len(case.elts) else case
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(value.value)
    return found


def _looped_up_names(loop):
    """`for name[, ref] in [("a", ...)]: getattr(obj, name)`: the names the loop looks up."""
    targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
    params = [t.id if isinstance(t, ast.Name) else "" for t in targets]
    return _cases(params, loop.iter, loop.body)


def _parametrized_lookups(fn):
    """@pytest.mark.parametrize("name,...", [("a", ...), ...]) on a test that calls
    getattr(obj, name): the names it looks up."""
    found = set()
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"
                and len(dec.args) >= 2 and isinstance(dec.args[0], ast.Constant)):
            continue
        params = [p.strip() for p in dec.args[0].value.split(",")]
        found |= _cases(params, dec.args[1], fn.body)
    return found


def public_names():
    for module in MODULES:
        for name in module.__all__:
            yield f"{module.__name__}.{name}", name


def public_methods():
    for cls in CLASSES:
        for name, _ in inspect.getmembers(cls):
            if not name.startswith("_"):
                yield f"{cls.__name__}.{name}", name


def test_every_public_name_is_used_by_a_test():
    # One lint, one test: pytest's count stays a count of behaviours checked.
    used = _used_names()
    missing = sorted({qualified for qualified, name in [*public_names(), *public_methods()]
                      if name not in used})
    assert not missing, "public names no test uses in code (a string does not count):\n  " + \
        "\n  ".join(missing)


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
