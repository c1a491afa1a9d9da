"""A training run's ``log.jsonl``: one JSON record per line (``kind``, ``step``, values), appended
by rank 0 as the run goes, cut back to the resumed step on resume.

A run killed after logging step 5 but checkpointed at step 4 computes step 5 again when resumed;
:func:`cut_after` drops the records of the steps the checkpoint does not hold (and a line a
kill cut short), so the log keeps exactly one record per kind and step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crossview.output import atomic_output

LOG_NAME = "log.jsonl"


def append_record(run_dir: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line to ``run_dir/log.jsonl`` (created with ``run_dir``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOG_NAME, "a") as handle:
        handle.write(json.dumps(record) + "\n")


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Each line of ``path`` (kept with its newline) and its record, None if it holds none."""
    with open(path) as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            ok = isinstance(record, dict) and type(record.get("step")) is int
            yield line, record if ok else None


def cut_after(run_dir: Path, step: int) -> int:
    """Drop the records of ``run_dir/log.jsonl`` logged after ``step`` and a last line without
    its newline (a write cut short); the file is replaced atomically. Lines that hold no record
    are kept. Returns how many lines were dropped."""
    path = run_dir / LOG_NAME
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line, record in _lines(path):
        if (record is not None and record["step"] > step) or not line.endswith("\n"):
            dropped += 1
        else:
            kept.append(line)
    if dropped:
        with atomic_output(path) as tmp:
            tmp.write_text("".join(kept))
    return dropped


def step_of(run_dir: Path, kind: str, key: str, value: float) -> int | None:
    """The last step whose ``kind`` record in ``run_dir/log.jsonl`` holds exactly ``value``
    under ``key`` (JSON keeps a float exactly), or None."""
    path = run_dir / LOG_NAME
    if not path.is_file():
        return None
    steps = [record["step"] for _, record in _lines(path) if record is not None
             and record.get("kind", "train") == kind and record.get(key) == value]
    return steps[-1] if steps else None
