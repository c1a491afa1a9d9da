"""Read a training ``log.jsonl`` and draw its curves (loss terms, learning rate, validation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_file, staged_files

# pyplot-free figures (savefig renders with Agg, no global backend); ~0.3 s to import:
# loaded when a figure is drawn
figures = lazy_import("matplotlib.figure")


def read_log(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Records of a ``log.jsonl`` by kind (``train``, ``val``), sorted by step.

    A run resumed by an older version may log a step twice (the steps between the last
    checkpoint and a kill were computed again, identically); the last record of each step wins.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"log file not found: {path}")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{path} is not a text file (expected a training log.jsonl)") from None
    by_kind: dict[str, dict[int, dict[str, Any]]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{number} is not JSON: {error}") from error
        if not isinstance(record, dict) or type(record.get("step")) is not int:
            raise UserError(f"{path}:{number} is not a log record (a JSON object with an "
                            "integer 'step')")
        by_kind.setdefault(record.get("kind", "train"), {})[record["step"]] = record
    return {kind: [records[s] for s in sorted(records)] for kind, records in by_kind.items()}


def plot_log(path: str | Path, out: str | Path, title: str | None = None) -> Path:
    """Draw the training loss (total and per term), the learning rate and the validation
    metrics of ``path`` into a PNG at ``out`` (published by
    :func:`crossview.output.staged_files`)."""
    out = Path(out)
    check_output_file(out, "output")
    log = read_log(path)
    train, val = log.get("train", []), log.get("val", [])
    if not train and not val:
        raise UserError(f"{path} holds no training records")
    fig = figures.Figure(figsize=(15, 4))
    axes = fig.subplots(1, 3)
    for key in ("loss", "init", "self", "cross"):
        _plot(axes[0], train, key, key, lw=1.5 if key == "loss" else 1)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("step")
    axes[0].set_title("training loss")
    _plot(axes[1], train, "lr", None)
    axes[1].set_xlabel("step")
    axes[1].set_title("learning rate")
    for key, label in (("epe", "EPE (px)"), ("bad2", "bad-2 (%)")):
        _plot(axes[2], val, key, label, marker="o")
    axes[2].set_xlabel("step")
    axes[2].set_yscale("log")
    axes[2].set_title("validation")
    for axis in (axes[0], axes[2]):
        if axis.get_lines():  # an empty legend only warns
            axis.legend()
    fig.suptitle(title or str(path))
    fig.tight_layout()
    with staged_files([out]) as (staged,):
        fig.savefig(staged, dpi=100, format="png")
    return out


def _plot(axis: Any, records: list[dict[str, Any]], key: str, label: str | None,
          **style: Any) -> None:
    """Draw ``key`` against the step over the records that hold a number for it."""
    points = [(r["step"], r[key]) for r in records
              if isinstance(r.get(key), int | float) and not isinstance(r[key], bool)]
    if points:
        axis.plot(*zip(*points, strict=True), label=label, **style)
