"""Shared by every test directory: pytest puts this file's directory, tests/, on ``sys.path``,
so tests import the helpers kept here (``ranks``, ``hang_guard``) by their module names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

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
