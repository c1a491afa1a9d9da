"""Training checkpoints: atomic writes, resume, keep-last-N plus the best one.

A checkpoint is a ``torch.save`` of plain containers and tensors only (model, optimiser and
scheduler state dicts, the step, the random states, counters), so it loads with
``torch.load(..., weights_only=True)``. Files are ``step-00001200.pt`` in the run directory,
plus ``best.pt``; each is written to a temporary name in the same directory and renamed, so a
run killed at any moment leaves either the previous or the new file, never a torn one.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crossview.data.io import atomic_output
from crossview.errors import UserError
from crossview.output import check_output_file

_STEP_FILE = re.compile(r"^step-(\d{8})\.pt$")


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    """``run_dir/step-{step:08d}.pt``."""
    return Path(run_dir) / f"step-{step:08d}.pt"


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically (temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (never unpickles arbitrary objects).

    A missing, truncated, corrupt or foreign file is one :class:`UserError` line naming it."""
    from crossview.models.weights import load_tensors_only

    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    state = load_tensors_only(path, "checkpoint")
    if not isinstance(state, dict):
        raise UserError(f"{path}: not a crossview checkpoint (it holds a "
                        f"{type(state).__name__}, not a dict)")
    return state


def usable_checkpoint(run_dir: str | Path, keys: Iterable[str], *, set_aside: bool = True
                      ) -> tuple[Path, dict[str, Any], list[str]]:
    """The newest step checkpoint of ``run_dir`` that can be read and holds ``keys``: its path,
    its state, and one line per newer step file that could not be used (truncated, corrupt or
    foreign), saying why.

    With ``set_aside`` those files are renamed to ``NAME.unreadable``: kept for inspection, but
    no longer taken for the newest checkpoint nor counted by :func:`prune_checkpoints` (which
    would otherwise keep them and delete intact ones). Raises :class:`UserError` naming the
    newest file and why it is unusable when no step checkpoint is usable.
    """
    keys = list(keys)
    skipped: list[tuple[Path, str]] = []
    for path in reversed(step_checkpoints(run_dir)):
        try:
            state = load_checkpoint(path)
            missing = [key for key in keys if key not in state]
            if missing:
                raise UserError(f"{path}: not a crossview training checkpoint (no "
                                f"{', '.join(map(repr, missing[:3]))})")
        except UserError as error:
            skipped.append((path, str(error)))
            continue
        return path, state, [_set_aside(bad, why) if set_aside else why for bad, why in skipped]
    if not skipped:
        raise UserError(f"no checkpoint (step-*.pt) in {run_dir}")
    more = len(skipped) - 1
    older = f" nor the {more} older one{'s' if more > 1 else ''}" if more else ""
    raise UserError(f"{skipped[0][1]}{older}; no usable checkpoint left in {run_dir}")


def _set_aside(path: Path, why: str) -> str:
    aside = path.with_name(f"{path.name}.unreadable")
    try:
        os.replace(path, aside)
    except OSError as error:
        return f"{why}; could not rename it ({error.strerror})"
    return f"{why}; renamed to {aside.name}"


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """The ``step-*.pt`` files of a run directory, oldest step first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [p for p in run_dir.iterdir() if _STEP_FILE.match(p.name)]
    return sorted(found, key=lambda p: int(_STEP_FILE.match(p.name).group(1)))


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest ``step-*.pt`` of a run directory, or None."""
    found = step_checkpoints(run_dir)
    return found[-1] if found else None


def prune_checkpoints(run_dir: str | Path, keep_last: int) -> None:
    """Delete all but the ``keep_last`` newest step checkpoints (``best.pt`` is never touched)."""
    for old in step_checkpoints(run_dir)[:-keep_last]:
        old.unlink(missing_ok=True)


def mark_best(path: str | Path) -> Path:
    """Copy a step checkpoint to ``best.pt`` next to it, atomically."""
    path = Path(path)
    best = path.with_name("best.pt")
    tmp = best.with_name(f".best.pt.tmp-{os.getpid()}")
    shutil.copyfile(path, tmp)
    os.replace(tmp, best)
    return best


def capture_rng_state() -> dict[str, Any]:
    """The torch, CUDA, numpy and Python random states as tensors and plain values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached": float(cached)},
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    torch.set_rng_state(state["torch"])
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"],
                         npy["has_gauss"], npy["cached"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def check_export_path(path: str | Path) -> Path:
    """``path`` if :func:`export_weights` can write there, else a :class:`UserError`."""
    path = Path(path)
    if path.suffix != ".safetensors":
        raise UserError(f"export path must end in .safetensors, got {path}")
    check_output_file(path, "--export")
    return path


def export_weights(model: torch.nn.Module, path: str | Path, *, name: str, task: str,
                   description: str = "") -> tuple[Path, Path]:
    """Write ``model``'s weights as ``path`` (.safetensors) and the registry description
    ``path.with_suffix('.json')`` (name, task, MatchStereo configuration), both atomically.

    The .safetensors metadata records the task (so a loader can refuse stereo weights for a
    flow model and vice versa, see :mod:`crossview.models.weights`), the name and the
    configuration (JSON). Dropped into ``crossview/models/weights/``, the pair registers model
    ``name`` with these weights as its default (see :mod:`crossview.models.registry`).
    """
    import dataclasses
    import json

    from crossview.models.weights import write_safetensors

    path = check_export_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {k: list(v) if isinstance(v, tuple) else v
              for k, v in dataclasses.asdict(model.config).items()}
    write_safetensors(path, model.state_dict(), task,
                      {"name": name, "config": json.dumps(config)})
    meta = {"name": name, "task": task, "config": config, "weights": path.name,
            "description": description}
    meta_path = path.with_suffix(".json")
    with atomic_output(meta_path) as tmp:
        tmp.write_text(json.dumps(meta, indent=2) + "\n")
    return path, meta_path
