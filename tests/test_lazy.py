"""The lazy module stand-in: attribute reads import the module, special names never do (CI's
doctest collection of ``cli/demo.py`` imported Gradio, not installed, through ``__wrapped__``)."""

from __future__ import annotations

import doctest
import inspect
import sys
import types

import pytest

from crossview.lazy import lazy_import

MISSING = "crossview_test_no_such_module"


def test_an_attribute_read_imports_the_module() -> None:
    colours = lazy_import("colorsys")
    assert colours.rgb_to_hsv(0.0, 1.0, 0.0) == (1 / 3, 1.0, 1.0)


def test_a_missing_module_fails_at_the_first_attribute_read() -> None:
    with pytest.raises(ModuleNotFoundError, match=MISSING):
        lazy_import(MISSING).anything  # noqa: B018


@pytest.mark.parametrize("name", ["__wrapped__", "__file__", "__reduce_ex__x__"])
def test_special_names_are_not_forwarded(name: str) -> None:
    stand_in = lazy_import(MISSING)
    assert not hasattr(stand_in, name)
    assert MISSING not in sys.modules


def test_tools_that_probe_objects_do_not_import() -> None:
    """``inspect.unwrap`` and doctest's finder, over a module holding a stand-in of a module that
    is not installed, find what they look for and import nothing."""
    holder = types.ModuleType("crossview_test_holder", "Holds a stand-in.\n\n>>> 1 + 1\n2\n")
    holder.page = lazy_import(MISSING)
    assert inspect.unwrap(holder.page) is holder.page
    tests = doctest.DocTestFinder().find(holder)
    assert [test.name for test in tests] == ["crossview_test_holder"]
    assert MISSING not in sys.modules
