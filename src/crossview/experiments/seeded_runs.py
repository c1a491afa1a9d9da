"""The bookkeeping the camera studies share: one training run per (conditioning, seed),
resumable, one thread each, ``jobs`` at a time, and statistics over seeds.

A study (:mod:`~crossview.experiments.camera_encodings`,
:mod:`~crossview.experiments.camera_depth`) supplies a frozen dataclass of its budget and a
module-level ``worker(conditioning, seed, config, cache_dir, out_dir) -> run file`` that trains
one run (checkpoints under :func:`run_dir`) and writes its record to :func:`run_file`.
:func:`run_all` calls it for every run whose record is missing or was made with another
budget.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crossview.errors import UserError
from crossview.output import atomic_output
from crossview.train.runlog import LOG_NAME
from crossview.train.trainer import Trainer

Worker = Callable[[str, int, Any, str, str], str]


def save_atomic(path: Path, payload: Any, *, as_json: bool) -> None:
    """Write ``payload`` as JSON or with ``torch.save``; nothing is left behind on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as tmp:
        if as_json:
            tmp.write_text(json.dumps(payload, indent=2))
        else:
            torch.save(payload, tmp)


def run_file(out_dir: Path, conditioning: str, seed: int) -> Path:
    """The record of one run: ``OUT/runs/<conditioning>-seed<k>.json``."""
    return out_dir / "runs" / f"{conditioning}-seed{seed}.json"


def run_dir(cache_dir: Path, config: Any, conditioning: str, seed: int) -> Path:
    """Where the run's checkpoints go: ``CACHE/train/<config hash>/<conditioning>-seed<k>``
    (another budget never resumes these; training is deterministic, so a run resumed from its
    last checkpoint records what a fresh one would, but its wall time)."""
    digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()
    return cache_dir / "train" / digest[:12] / f"{conditioning}-seed{seed}"


def run_all(worker: Worker, config: Any, out_dir: Path, cache_dir: Path, *, seeds: int,
            conditionings: tuple[str, ...], jobs: int,
            on_done: Callable[[str], None] | None = None) -> list[Path]:
    """Call ``worker`` for every (conditioning, seed) whose record is missing or holds another
    ``config``, seed by seed, ``jobs`` at a time (separate processes when ``jobs > 1``; the
    calling process's thread count is restored otherwise). Returns every run file."""
    wanted = json.loads(json.dumps(asdict(config)))
    todo = []
    for seed in range(seeds):
        for conditioning in conditionings:
            path = run_file(out_dir, conditioning, seed)
            if path.exists() and json.loads(path.read_text())["config"] == wanted:
                continue
            todo.append((conditioning, seed))
    if todo and jobs <= 1:
        threads = torch.get_num_threads()
        try:
            for conditioning, seed in todo:
                done = worker(conditioning, seed, config, str(cache_dir), str(out_dir))
                if on_done is not None:
                    on_done(done)
        finally:
            torch.set_num_threads(threads)
    elif todo:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(worker, c, s, config, str(cache_dir), str(out_dir))
                       for c, s in todo]
            for future in futures:
                done = future.result()
                if on_done is not None:
                    on_done(done)
    return [run_file(out_dir, c, s) for s in range(seeds) for c in conditionings]


def train_to_end(trainer: Trainer) -> None:
    """Run ``trainer``; a run stopped early (SIGINT / SIGTERM checkpoint and return) is a
    :class:`UserError`, so that no record of a half-trained model is written (the next call
    resumes it from its checkpoint)."""
    trainer.run()
    if trainer.step < trainer.cfg.train.steps:
        raise UserError(f"stopped at step {trainer.step} of {trainer.cfg.train.steps} "
                        f"({trainer.cfg.train.out_dir}); run the same command to resume")


def loss_record(run: Path) -> dict[str, Any]:
    """``final_train_loss`` (mean of the last 50 logged training losses) and ``loss_curve``
    (means of consecutive windows of that size) from ``run/log.jsonl``."""
    losses = [record["loss"] for record in map(json.loads, (run / LOG_NAME).read_text()
                                               .splitlines()) if record["kind"] == "train"]
    window = max(1, min(50, len(losses)))
    return {"final_train_loss": float(np.mean(losses[-window:])),
            "loss_curve": [float(np.mean(losses[i:i + window]))
                           for i in range(0, len(losses), window)]}


def seed_stats(values: list[float]) -> dict[str, Any]:
    """Mean, sample standard deviation (0 for one value), min, max, count and the values."""
    array = np.asarray(values, dtype=np.float64)
    std = float(array.std(ddof=1)) if array.size > 1 else 0.0
    return {"mean": float(array.mean()), "std": std, "min": float(array.min()),
            "max": float(array.max()), "n": int(array.size), "values": array.tolist()}


def read_runs(out_dir: Path) -> list[dict[str, Any]]:
    """Every run record in ``OUT/runs`` (:class:`FileNotFoundError` when there is none)."""
    runs = [json.loads(p.read_text()) for p in sorted((out_dir / "runs").glob("*.json"))]
    if not runs:
        raise FileNotFoundError(f"no run files in {out_dir / 'runs'}")
    return runs


def with_budget(config: Any, steps: int | None, seeds: int | None) -> Any:
    """The study budget ``config`` with ``steps`` and ``seeds`` replaced when given."""
    changes = {k: v for k, v in (("steps", steps), ("seeds", seeds)) if v is not None}
    return replace(config, **changes)
