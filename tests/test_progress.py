"""``crossview.progress``: a live bar on a terminal, plain lines on stderr elsewhere."""

from __future__ import annotations

import re

import pytest

from crossview.console import stderr
from crossview.progress import Progress


def _run(steps: list[tuple[int, str]], show: bool = True) -> None:
    """A task of 5 units advanced by each ``(units, note)`` of ``steps``, a line after each."""
    with Progress(show=show) as progress:
        task = progress.add_task("pair", total=5)
        for units, note in steps:
            progress.advance(task, units)
            progress.line(task, note)


def test_off_a_terminal_each_line_says_done_total_note_and_seconds(
        capsys: pytest.CaptureFixture[str]) -> None:
    _run([(1, "a"), (3, "b"), (0, "c")])
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 3, captured.err
    assert re.fullmatch(r"pair 1/5: a \(\d+\.\d s\)", lines[0]), lines
    assert re.fullmatch(r"pair 4/5: b \(\S+ s each\)", lines[1]), lines
    assert lines[2] == "pair 4/5: c"  # no unit since the last line: no time


def test_a_task_of_unknown_length_counts_and_an_untimed_step_has_no_seconds(
        capsys: pytest.CaptureFixture[str]) -> None:
    with Progress() as progress:
        task = progress.add_task("pair", total=None)
        progress.step(task, "x", timed=False)
        progress.step(task, "y", timed=False)
    assert capsys.readouterr().err == "pair 1: x\npair 2: y\n"


def test_show_false_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    _run([(1, "a")], show=False)
    assert capsys.readouterr().err == ""


def test_on_a_terminal_the_bar_alone_shows_no_lines(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stderr, "_force_terminal", True)
    with Progress(transient=True) as progress:
        assert not progress.plain and not progress.disable
        task = progress.add_task("pair", total=5)
        progress.step(task, "a")
    assert "pair 1/5: a" not in capsys.readouterr().err
