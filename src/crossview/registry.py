"""One way to register: named entries of one kind (models, dataset kinds, metrics, training
recipes, attention backends), each added by the module that defines it, found without anyone
importing that module first.

A :class:`Registry` knows where its entries are defined (``discover``: the packages whose
modules register them, or a function that imports them); the first lookup imports them all,
so an entry never depends on which module happened to be imported before. Keys are names or
tuples of names (``(task, name)``); entries keep the order they were registered in
(iterating a registry gives its entries; ``in`` asks about keys).

Example:
    >>> colours = Registry("colour")
    >>> colours.register("red", (255, 0, 0))
    (255, 0, 0)
    >>> colours.get("red"), "blue" in colours, colours.keys()
    ((255, 0, 0), False, ['red'])
    >>> colours.get("blue")
    Traceback (most recent call last):
    ...
    crossview.errors.UserError: unknown colour 'blue'; choose one of: red
"""

from __future__ import annotations

import importlib.util
import pkgutil
from collections.abc import Callable, Hashable, Iterator
from importlib import import_module
from typing import Generic, TypeVar

from crossview.errors import UserError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def import_modules(package: str, module: str | None = None) -> Callable[[], None]:
    """A ``discover`` function that imports every module of ``package`` (with ``module``:
    the module of that name in every subpackage, ``models/*/specs.py``)."""

    def discover() -> None:
        path = import_module(package).__path__
        for found in pkgutil.iter_modules(path):
            if module is None and not found.name.startswith("_"):
                import_module(f"{package}.{found.name}")
            elif module is not None and found.ispkg:
                name = f"{package}.{found.name}.{module}"
                if importlib.util.find_spec(name) is not None:
                    import_module(name)

    return discover


class Registry(Generic[K, V]):
    """Entries of one kind by key (see the module docstring). ``what`` names the kind in
    messages (``"model"``: ``unknown model 'x'; choose one of: ...``)."""

    def __init__(self, what: str, discover: Callable[[], None] | None = None) -> None:
        self.what = what
        self._discover = discover
        self._entries: dict[K, V] = {}
        self._discovered = discover is None

    def register(self, key: K, entry: V, *, replace: bool = False) -> V:
        """Add ``entry`` under ``key``; a second entry of one key is a ``ValueError`` unless
        ``replace``. Returns ``entry``."""
        if key in self._entries and not replace:
            raise ValueError(f"{self.what} {key!r} is already registered")
        self._entries[key] = entry
        return entry

    @property
    def entries(self) -> dict[K, V]:
        """The live mapping, every entry found (a test adds its own model or metric for its
        duration with ``monkeypatch.setitem(REGISTRY.entries, key, entry)``)."""
        return self._found()

    def _found(self) -> dict[K, V]:
        if not self._discovered:
            self._discovered = True  # first: a module that looks an entry up while it loads
            self._discover()
        return self._entries

    def get(self, key: K) -> V:
        """The entry of ``key``; a :class:`UserError` listing the keys otherwise."""
        entries = self._found()
        if key not in entries:
            raise UserError(f"unknown {self.what} {key!r}; choose one of: "
                            f"{', '.join(map(str, self.keys()))}")
        return entries[key]

    def __contains__(self, key: object) -> bool:
        return key in self._found()

    def keys(self) -> list[K]:
        """The keys, sorted."""
        return sorted(self._found())

    def values(self) -> list[V]:
        """The entries, in the order they were registered."""
        return list(self._found().values())

    def items(self) -> list[tuple[K, V]]:
        """``(key, entry)`` pairs, sorted by key."""
        entries = self._found()
        return [(key, entries[key]) for key in sorted(entries)]

    def __iter__(self) -> Iterator[V]:
        """The entries, in the order they were registered (a preference order, where one
        matters: the attention backends')."""
        return iter(self.values())
