"""For ``python -m pytest --doctest-modules src/crossview`` (the README's test command): a module
whose optional dependency is not installed has its doctests skipped, with the extra that adds it
as the reason, instead of failing the whole collection. Any other import error still fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pytest.doctest import DoctestModule

from crossview.cli.runner import EXTRAS


class OptionalDoctestModule(DoctestModule):
    """A :class:`DoctestModule` that skips when importing the module fails for want of one of
    :data:`crossview.cli.runner.EXTRAS` (import name -> extra)."""

    def collect(self) -> Iterator[Any]:
        try:
            yield from super().collect()
        except pytest.Collector.CollectError as error:
            cause = error.__cause__
            missing = (cause.name or "") if isinstance(cause, ModuleNotFoundError) else ""
            missing = missing.split(".")[0]
            if missing not in EXTRAS:
                raise
            pytest.skip(f"{missing} is not installed (pip install "
                        f"\"crossview[{EXTRAS[missing]}]\")")


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> list[Any]:
    collectors = yield
    return [OptionalDoctestModule.from_parent(parent, path=file_path)
            if type(collector) is DoctestModule else collector for collector in collectors]
