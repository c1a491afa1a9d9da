"""Modules that load when first used, so that ``crossview --help`` never imports torch.

The command line declares its commands (options, help texts) in modules that use the api,
torch or numpy, but only a command that runs needs them. ``lazy_import(name)`` returns a
stand-in for the module ``name``: the first attribute read imports the module (an ordinary
import, into ``sys.modules``), and every read, write or deletion of an attribute goes to the
module itself, so a test that patches the module is seen through the stand-in. Nothing is put
into ``sys.modules`` before that first read (tools that walk ``sys.modules``, such as
``inspect.getmodule``, never trigger the import at a random moment). A special name
(``__version__``, ``__wrapped__``, ...) of a module that cannot be imported reads as missing
(``AttributeError``) rather than failing: tools probe objects for such names (doctest's finder
and ``inspect.unwrap`` read ``__wrapped__``), and the module may be an optional dependency that
is not installed.

Example:
    >>> colours = lazy_import("colorsys")
    >>> colours.rgb_to_hsv(1.0, 0.0, 0.0)  # imports colorsys here
    (0.0, 1.0, 1.0)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """The stand-in :func:`lazy_import` returns (see the module docstring)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _module(self) -> ModuleType:
        return importlib.import_module(self._name)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            try:
                module = self._module()
            except ImportError as error:
                raise AttributeError(f"{self!r} cannot be imported ({error}): no {attr}") from error
            return getattr(module, attr)
        return getattr(self._module(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._module(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._module(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._module())

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_import(name: str) -> Any:
    """The module ``name``, imported when an attribute of it is first read (a missing module
    is a ``ModuleNotFoundError`` then)."""
    return LazyModule(name)
