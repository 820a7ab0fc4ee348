"""docs/mindspore.md's coverage table is the current one (regenerate: python3 -m
zenith._mindspore_api), and every MindSpore name zenith lacks is refused with UnsupportedError
naming it."""

import importlib
import os

import pytest

import zenith
from zenith import _mindspore_api as api

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "mindspore.md")


def test_docs_page_holds_the_current_coverage_table():
    text = open(DOC).read()
    begin, end = "<!-- coverage:begin -->\n", "<!-- coverage:end -->"
    current = text[text.index(begin) + len(begin):text.index(end)]
    assert current == api.table(), ("docs/mindspore.md's coverage table is stale: paste the "
                                    "output of `python3 -m zenith._mindspore_api` between its "
                                    "coverage markers")


def test_absent_names_are_refused_naming_them():
    count = 0
    for title, (present, absent, _) in api.coverage().items():
        module = importlib.import_module(api.LISTS[title][0])
        ms_module = "mindspore" + api.LISTS[title][0][len("zenith"):]
        for name in absent:
            with pytest.raises(zenith.UnsupportedError, match=f"{ms_module}.{name} is not "):
                getattr(module, name)
            count += 1
        for name in present:
            assert getattr(module, name) is not None
    assert count > 0
    coverage = api.coverage()
    assert not coverage["mindspore.amp"][1]  # all of mindspore.amp
