"""Shared by every test directory: pytest puts this file's directory, tests/, on ``sys.path``,
so tests import the helpers kept here (``ranks``, ``hang_guard``) by their module names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crossview.cli.log_handler import cli_line


@pytest.fixture
def log_lines(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], str]]:
    """``log_lines()``: the ``crossview`` log records so far (INFO and above), as the command
    shows them on stderr (``"warning: ...\\n"`` each), then forgotten."""
    caplog.set_level(logging.INFO, logger="crossview")

    def read() -> str:
        text = "".join(cli_line(record) + "\n" for record in caplog.records
                       if record.name.startswith("crossview"))
        caplog.clear()
        return text

    yield read


@pytest.fixture(scope="session")
def _empty_crossview_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("crossview-home")


@pytest.fixture(autouse=True)
def _no_user_cache(_empty_crossview_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the user's weights cache (``$CROSSVIEW_HOME``) or offline setting."""
    monkeypatch.setenv("CROSSVIEW_HOME", str(_empty_crossview_home))
    monkeypatch.delenv("CROSSVIEW_OFFLINE", raising=False)
