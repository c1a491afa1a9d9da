"""A run's log.jsonl: cut back to the resumed step, atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossview.train.runlog import LOG_NAME, append_record, cut_after, step_of


def _line(kind: str, step: int, **values: float) -> str:
    return json.dumps({"kind": kind, "step": step, **values}) + "\n"


@pytest.mark.parametrize(("lines", "kept"), [
    ([_line("train", 1), _line("train", 2), _line("val", 2), _line("train", 3)], 3),
    ([_line("train", 1), _line("train", 2), '{"kind": "train", "st'], 2),  # a write cut short
    ([_line("train", 1), "a note\n", _line("train", 2)], 3),  # not a record: not ours to judge
    ([_line("train", 1), _line("train", 4)], 1),
])
def test_cut_after_drops_what_the_checkpoint_does_not_hold(tmp_path: Path, lines: list[str],
                                                           kept: int) -> None:
    (tmp_path / LOG_NAME).write_text("".join(lines))
    assert cut_after(tmp_path, 2) == len(lines) - kept
    assert (tmp_path / LOG_NAME).read_text() == "".join(lines[:kept])
    assert [p.name for p in tmp_path.iterdir()] == [LOG_NAME]  # no temporary left
    append_record(tmp_path, {"kind": "train", "step": 3})  # the resumed run goes on
    assert (tmp_path / LOG_NAME).read_text().splitlines()[-1] == _line("train", 3).strip()


def test_an_intact_log_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / LOG_NAME
    path.write_text(_line("train", 1) + _line("train", 2))
    inode = path.stat().st_ino
    assert cut_after(tmp_path, 2) == 0 and path.stat().st_ino == inode
    assert cut_after(tmp_path / "absent", 2) == 0


def test_step_of_finds_the_step_that_measured_a_value(tmp_path: Path) -> None:
    epe = 2.6303740572104743  # JSON keeps a float exactly
    (tmp_path / LOG_NAME).write_text(_line("val", 3, epe=2.7) + _line("train", 6, epe=epe)
                                     + _line("val", 6, epe=epe) + "junk\n")
    assert step_of(tmp_path, "val", "epe", epe) == 6
    assert step_of(tmp_path, "val", "epe", 1.0) is None
    assert step_of(tmp_path / "absent", "val", "epe", epe) is None
