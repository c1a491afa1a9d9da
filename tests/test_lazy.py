"""The lazy module stand-in: attribute reads import the module; a special name of a module that
cannot be imported reads as missing (CI's doctest collection of ``cli/demo.py`` failed on Gradio,
not installed, imported through a probe of ``__wrapped__``)."""

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


@pytest.mark.parametrize("name", ["__wrapped__", "__file__", "__version__"])
def test_special_names_of_a_missing_module_read_as_missing(name: str) -> None:
    stand_in = lazy_import(MISSING)
    assert not hasattr(stand_in, name)
    assert MISSING not in sys.modules


def test_special_names_of_an_installed_module_are_forwarded() -> None:
    """``torch.__version__`` through a stand-in (crossview.report records it)."""
    json = lazy_import("json")
    assert json.__version__ == sys.modules["json"].__version__
    assert json.__name__ == "json"
    assert not hasattr(json, "__wrapped__")


def test_tools_that_probe_objects_do_not_import() -> None:
    """``inspect.unwrap`` and doctest's finder, over a module holding a stand-in of a module that
    is not installed, find what they look for and import nothing."""
    holder = types.ModuleType("crossview_test_holder", "Holds a stand-in.\n\n>>> 1 + 1\n2\n")
    holder.page = lazy_import(MISSING)
    assert inspect.unwrap(holder.page) is holder.page
    tests = doctest.DocTestFinder().find(holder)
    assert [test.name for test in tests] == ["crossview_test_holder"]
    assert MISSING not in sys.modules
