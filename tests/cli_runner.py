"""Running the CLI in-process in a test: exit code, stdout and stderr of one command."""

from __future__ import annotations

import pytest

from crossview.cli.app import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``crossview ARGS``."""
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err
