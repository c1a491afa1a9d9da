from __future__ import annotations

import subprocess
import sys

import pytest

from crossview import __version__
from crossview.cli.app import main
from hang_guard import HANG_GUARD_SECONDS


def test_version_prints_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"crossview {__version__}"


def test_help_lists_bench_group(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "bench" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error_with_exit_code_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "crossview", "no-such-command"], capture_output=True, text=True,
        timeout=HANG_GUARD_SECONDS)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
