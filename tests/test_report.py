"""Reports: a table with 4 significant digits and text shown as written; JSON published whole
with the machine it ran on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossview.report import print_table, write_json


def test_print_table_formats_floats_and_keeps_brackets(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    print_table("a [title]", ["name", "value"], [["[b]x[/b]", 3.14159265], ["y", 2]], width=60)
    out = capsys.readouterr().out
    assert "a [title]" in out and "[b]x[/b]" in out
    assert "3.142" in out and "3.1415" not in out
    assert max(len(line) for line in out.splitlines()) <= 60


def test_off_a_terminal_a_table_is_printed_whole(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe or a file gets every character of every cell (a terminal's table is cut to its
    width; a pipe's would be cut at 80 columns)."""
    monkeypatch.setenv("COLUMNS", "80")
    long = " ".join(f"word{i}" for i in range(30))  # 220 characters
    print_table("wide", ["name", "description"], [["averyveryverylongname" * 3, long]])
    out = capsys.readouterr().out
    assert "averyveryverylongname" * 3 in out and long in out and "…" not in out
    assert len(out.splitlines()) == 6  # title, 3 rules, header, one row


def test_write_json_adds_the_machine_and_publishes_whole(tmp_path: Path) -> None:
    path = write_json(tmp_path / "r.json", {"rows": [1, 2]})
    payload = json.loads(path.read_text())
    assert payload["rows"] == [1, 2] and {"torch", "cpu_count"} <= set(payload["machine"])
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no staging left behind


def test_a_cell_too_wide_for_its_column_folds_and_loses_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    long = "matchstereo_tiny_fsd.pth"
    print_table("t", ["model", "file", "size"], [["matchstereo-t", long, "not downloaded"]],
                width=30)
    text = capsys.readouterr().out
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    assert len(rows) > 1 and "…" not in text  # folded onto more lines, not cut
    columns = ["".join(row[i].strip() for row in rows) for i in range(3)]
    assert columns == ["matchstereo-t", long, "notdownloaded"]
