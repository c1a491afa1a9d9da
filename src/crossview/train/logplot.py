"""Read a training ``log.jsonl`` and draw its curves (loss terms, learning rate, validation)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from crossview.errors import UserError


def read_log(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Records of a ``log.jsonl`` by kind (``train``, ``val``), sorted by step.

    A resumed run may log a step twice (the steps between the last checkpoint and a kill are
    computed again, identically); the last record of each step wins.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"log file not found: {path}")
    by_kind: dict[str, dict[int, dict[str, Any]]] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}:{number} is not JSON: {error}") from error
        by_kind.setdefault(record.get("kind", "train"), {})[int(record["step"])] = record
    return {kind: [records[s] for s in sorted(records)] for kind, records in by_kind.items()}


def plot_log(path: str | Path, out: str | Path, title: str | None = None) -> Path:
    """Draw the training loss (total and per term), the learning rate and the validation
    metrics of ``path`` into a PNG at ``out`` (written atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = read_log(path)
    train, val = log.get("train", []), log.get("val", [])
    if not train and not val:
        raise UserError(f"{path} holds no training records")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    steps = [r["step"] for r in train]
    for key in ("loss", "init", "self", "cross"):
        if train and key in train[0]:
            axes[0].plot(steps, [r[key] for r in train], label=key, lw=1.5 if key == "loss" else 1)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("step")
    axes[0].set_title("training loss")
    axes[0].legend()
    if train:
        axes[1].plot(steps, [r["lr"] for r in train])
    axes[1].set_xlabel("step")
    axes[1].set_title("learning rate")
    vsteps = [r["step"] for r in val]
    for key, label in (("epe", "EPE (px)"), ("bad2", "bad-2 (%)")):
        if val and key in val[0]:
            axes[2].plot(vsteps, [r[key] for r in val], marker="o", label=label)
    axes[2].set_xlabel("step")
    axes[2].set_yscale("log")
    axes[2].set_title("validation")
    axes[2].legend()
    fig.suptitle(title or str(path))
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, out)
    return out
