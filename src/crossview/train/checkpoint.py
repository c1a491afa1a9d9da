"""Training checkpoints: atomic writes, resume, keep-last-N plus the best one.

A checkpoint is a ``torch.save`` of plain containers and tensors only (model, optimiser and
scheduler state dicts, the step, the random states, counters), so it loads with
``torch.load(..., weights_only=True)``. Files are ``step-00001200.pt`` in the run directory,
plus ``best.pt``; each is written to a temporary name in the same directory and renamed, so a
run killed at any moment leaves either the previous or the new file, never a torn one (and a
temporary that the next start removes: :func:`remove_stale_temporaries`).

A new best is written as ``best.pt`` *before* the step checkpoint that records its metric
(:func:`save_step`): killed in between, the run resumes from an older step, computes the same
steps again and rewrites both; ``best.pt`` is never behind the checkpoints. Runs of older
versions copied it after, and a kill in between left it stale for good;
:func:`repair_best` mends such a run on resume.
"""

from __future__ import annotations

import math
import os
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crossview.errors import UserError
from crossview.models.weights import load_tensors_only
from crossview.output import (
    atomic_output,
    check_output_file,
    check_output_files,
)
from crossview.output import (
    remove_stale_temporaries as _remove_stale,
)

_STEP_FILE = re.compile(r"^step-(\d{8})\.pt$")
# the temporary names of versions before the owner (host) was recorded
_OLDER_TEMPORARY = re.compile(r"\.(?:step-\d{8}|best)\.pt\.tmp-(?P<pid>\d+)")
BEST_NAME = "best.pt"


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    """``run_dir/step-{step:08d}.pt``."""
    return Path(run_dir) / f"step-{step:08d}.pt"


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically (temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as tmp, open(tmp, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def save_step(run_dir: str | Path, state: dict[str, Any], *, best: bool, keep_last: int
              ) -> Path:
    """Checkpoint ``state`` as ``step-N.pt`` (N = ``state["step"]``), first as ``best.pt`` too
    if ``best`` (the order that leaves a consistent run at any kill), then keep the
    ``keep_last`` newest step checkpoints. Returns the step checkpoint's path."""
    run_dir = Path(run_dir)
    if best:
        save_checkpoint(run_dir / BEST_NAME, state)
    path = save_checkpoint(checkpoint_path(run_dir, int(state["step"])), state)
    prune_checkpoints(run_dir, keep_last)
    return path


def remove_stale_temporaries(run_dir: str | Path) -> None:
    """Remove the temporary files that killed writes left in a run directory (this and older
    versions' names, their process gone), with one warning line each."""
    _remove_stale(run_dir, older_names=_OLDER_TEMPORARY)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (never unpickles arbitrary objects).

    A missing, truncated, corrupt or foreign file is one :class:`UserError` line naming it."""
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


def _readable(path: Path | None) -> dict[str, Any] | None:
    try:
        return load_checkpoint(path) if path is not None else None
    except UserError:
        return None


def repair_best(run_dir: str | Path, step: int, best_metric: float, best_step: int | None
                ) -> str | None:
    """Make ``best.pt`` the checkpoint of the best validation when it is not: resuming from
    step ``step``, whose checkpoint records ``best_metric``, measured at ``best_step`` (None:
    unknown). Returns a warning line saying what was wrong and done, or None if nothing was.

    ``best.pt`` is right when it records ``best_metric``, or a later step than ``step`` (written
    just before a step checkpoint that a kill prevented; the resumed run rewrites it). Else it
    is replaced by a copy of ``step-{best_step}.pt`` if that still records ``best_metric``.
    """
    if not math.isfinite(best_metric):
        return None  # nothing validated yet
    run_dir = Path(run_dir)
    best = run_dir / BEST_NAME
    current = _readable(best)
    if current is not None and (int(current["step"]) > step
                                or float(current["best_metric"]) == best_metric):
        return None
    was = ("missing" if not best.exists() else "unreadable" if current is None else
           f"stale (step {int(current['step'])}, metric {float(current['best_metric']):.6g})")
    source = checkpoint_path(run_dir, best_step) if best_step is not None else None
    state = _readable(source)
    if state is None or float(state["best_metric"]) != best_metric:
        return (f"{best} is {was}, but the checkpoint of the best validation (metric "
                f"{best_metric:.6g}, step {best_step if best_step is not None else 'unknown'}) "
                "is gone; best.pt left as it is")
    save_checkpoint(best, state)
    return (f"{best} was {was}; replaced by {source.name}, the checkpoint of the best "
            f"validation (metric {best_metric:.6g} at step {best_step})")


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


def check_export_path(path: str | Path, companions: Iterable[str | Path] = ()) -> Path:
    """``path`` if an export can write there (and the ``companions`` written with it, such as
    the description of :func:`crossview.models.matchstereo.bundle.write_bundle`), else a
    :class:`UserError` naming what is in the way."""
    path = Path(path)
    if path.suffix != ".safetensors":
        raise UserError(f"export path must end in .safetensors, got {path}")
    check_output_file(path, "--export")
    check_output_files(companions)
    return path
