"""The bookkeeping the camera studies share: one training run per (conditioning, seed),
resumable, one thread each, ``jobs`` at a time, and statistics over seeds.

A study (:mod:`~crossview.experiments.camera_encodings`,
:mod:`~crossview.experiments.camera_depth`) supplies a frozen dataclass of its budget, a
``load(config, cache_dir)`` of its rendered data and a ``train(conditioning, seed, config,
data, out_dir)`` that builds the run's configuration and datasets and calls
:func:`train_and_test`. :func:`run_all` calls ``worker`` (:func:`worker` bound to those two by
``functools.partial``) for every run whose record is missing or was made with another budget;
each run keeps its checkpoints under :func:`run_dir` and writes its record to :func:`run_file`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch

from crossview.errors import UserError
from crossview.eval import evaluate
from crossview.lazy import lazy_import
from crossview.models.multiview import MultiViewConfig
from crossview.output import atomic_output
from crossview.train.checkpoint import latest_checkpoint
from crossview.train.config import Config, config_from_dict
from crossview.train.runlog import LOG_NAME
from crossview.train.trainer import Trainer

# pyplot-free figures (savefig renders with Agg, no global backend); ~0.3 s to import:
# loaded when a figure is drawn
figures = lazy_import("matplotlib.figure")

Worker = Callable[[str, int, Any, str, str], str]


SIZES = MultiViewConfig()  # the model sizes a study starts from: the model's own defaults


@dataclass(frozen=True)
class StudyBudget:
    """What every camera study fixes for all its runs (each study adds its data ranges)."""

    steps: int = 800
    seeds: int = 3
    batch: int = 16
    lr: float = 1e-3
    warmup: int = 80
    train_scenes: int = 1000
    test_scenes: int = 100
    image_size: tuple[int, int] = SIZES.image_size
    patch: int = SIZES.patch
    width: int = SIZES.width
    depth: int = SIZES.depth
    heads: int = SIZES.heads
    data_seed: int = 1234

    @classmethod
    def quick(cls) -> Self:
        """A tiny budget that runs in seconds (for tests and smoke checks)."""
        return cls(steps=3, seeds=1, batch=2, warmup=1, train_scenes=4, test_scenes=2,
                   width=16, depth=1, heads=2)


def run_config(budget: StudyBudget, *, task: str, model: str, dataset: str,
               conditioning: str, seed: int, out_dir: Path, recipe: dict[str, Any]) -> Config:
    """The training configuration of one run: ``model`` with ``conditioning`` and the
    budget's sizes; ``steps x batch`` samples of ``dataset`` (passed to the trainer
    pre-rendered, no validation set); AdamW at ``lr``, linear warm-up over ``warmup`` steps
    then cosine decay, clipping at 1; 8 checkpoints; the ``recipe`` section as given."""
    return config_from_dict({
        "task": task,
        "model": {"name": model, "overrides": {
            "conditioning": conditioning, "patch": budget.patch, "width": budget.width,
            "depth": budget.depth, "heads": budget.heads}},
        "data": {"train": dataset, "val": dataset,
                 "train_size": budget.steps * budget.batch, "val_size": 0, "seed": seed,
                 "height": budget.image_size[0], "width": budget.image_size[1]},
        "recipe": recipe,
        "optim": {"lr": budget.lr, "weight_decay": 0.05, "grad_clip": 1.0,
                  "schedule": "cosine", "pct_start": budget.warmup / budget.steps},
        "train": {"steps": budget.steps, "batch_size": budget.batch, "seed": seed,
                  "out_dir": str(out_dir), "log_every": 1, "val_every": budget.steps,
                  "ckpt_every": max(1, budget.steps // 8), "keep_last": 1},
    })


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


def run_identity(config: Any) -> dict[str, Any]:
    """What makes runs of a study budget the same runs: every field of ``config`` but the
    number of seeds (raising ``seeds`` adds runs and keeps the finished ones), as JSON
    values."""
    return _without_seeds(json.loads(json.dumps(asdict(config))))


def _without_seeds(budget: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in budget.items() if key != "seeds"}


def run_dir(cache_dir: Path, config: Any, conditioning: str, seed: int) -> Path:
    """Where the run's checkpoints go: ``CACHE/train/<budget hash>/<conditioning>-seed<k>``
    (another budget never resumes these; training is deterministic, so a run resumed from its
    last checkpoint records what a fresh one would, but its wall time)."""
    digest = hashlib.sha256(json.dumps(run_identity(config), sort_keys=True).encode())
    return cache_dir / "train" / digest.hexdigest()[:12] / f"{conditioning}-seed{seed}"


def run_all(worker: Worker, config: Any, out_dir: Path, cache_dir: Path, *, seeds: int,
            conditionings: tuple[str, ...], jobs: int,
            on_done: Callable[[str], None] | None = None) -> list[Path]:
    """Call ``worker`` for every (conditioning, seed) whose record is missing or holds another
    budget (:func:`run_identity`), seed by seed, ``jobs`` at a time (separate processes when
    ``jobs > 1``; the calling process's thread count is restored otherwise). Returns every
    run file."""
    wanted = run_identity(config)
    todo = []
    for seed in range(seeds):
        for conditioning in conditionings:
            path = run_file(out_dir, conditioning, seed)
            if path.exists() and _without_seeds(json.loads(path.read_text())["config"]) == wanted:
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


def train_and_test(conditioning: str, seed: int, config: Any, cfg: Config, train_set: Any,
                   cases: Mapping[str, Any]) -> dict[str, Any]:
    """Train the run ``cfg`` describes on ``train_set`` (resuming its checkpoints in
    ``cfg.train.out_dir``), then score it on each dataset of ``cases`` through
    :func:`crossview.eval.evaluate` with the recipe's predictor and metrics (mean per metric);
    returns the run record (``config`` is the study budget it belongs to)."""
    out_dir = Path(cfg.train.out_dir)
    resume = latest_checkpoint(out_dir) is not None
    if not resume:  # killed before its first checkpoint: start the log over with the run
        (out_dir / LOG_NAME).unlink(missing_ok=True)
    started = time.perf_counter()
    trainer = Trainer(cfg, train_set=train_set, resume=resume, progress=False)
    train_to_end(trainer)
    seconds = time.perf_counter() - started
    trainer.model.eval()
    predict = trainer.recipe.predictor(trainer.model, trainer.cfg, trainer.device)

    def predictor(sample: Any) -> Any:
        with torch.no_grad():
            return predict(sample)

    metrics = trainer.recipe.metrics(trainer.cfg)
    return {
        "conditioning": conditioning, "seed": seed, "config": asdict(config),
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        **loss_record(out_dir),
        "train_seconds": seconds,
        "test": {name: evaluate(views, predictor, metrics, dataset_name=name).mean()
                 for name, views in cases.items()},
    }


def worker(load: Callable[[Any, Path], Any], train: Callable[..., dict[str, Any]],
           conditioning: str, seed: int, config: Any, cache_dir: str, out_dir: str) -> str:
    """One run on one thread: ``train(conditioning, seed, config, load(config, cache),
    run_dir(...))``, its record written to :func:`run_file`; returns that path."""
    torch.set_num_threads(1)
    data = load(config, Path(cache_dir))
    record = train(conditioning, seed, config, data,
                   run_dir(Path(cache_dir), config, conditioning, seed))
    path = run_file(Path(out_dir), conditioning, seed)
    save_atomic(path, record, as_json=True)
    return str(path)


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


COLOURS = {"plucker": "#999999", "naive": "#999999", "none": "#cc6677"}  # others: #4477aa


def plot_seeds(path: Path, panels: Mapping[str, Mapping[str, dict[str, Any]]],
               labels: Mapping[str, str], ylabel: str) -> None:
    """One panel per ``{title: {conditioning: stats}}`` entry (``stats`` from
    :func:`seed_stats`): every seed's value as a dot, the mean ± std beside it; raymaps grey,
    no cameras red, relative encodings blue. Written as a PNG to ``path``."""
    fig = figures.Figure(figsize=(4.2 * len(panels), 3.8))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (title, entries) in zip(axes[0], panels.items(), strict=True):
        for i, (name, stats) in enumerate(entries.items()):
            colour = COLOURS.get(name, "#4477aa")
            ax.scatter([i] * len(stats["values"]), stats["values"], s=12, color=colour,
                       alpha=0.6)
            ax.errorbar([i + 0.2], [stats["mean"]], yerr=[stats["std"]], fmt="o",
                        color=colour, capsize=3)
        ax.set_xticks(range(len(entries)), [labels[n] for n in entries], rotation=35,
                      ha="right")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")


def with_budget(config: Any, steps: int | None, seeds: int | None) -> Any:
    """The study budget ``config`` with ``steps`` and ``seeds`` replaced when given."""
    changes = {k: v for k, v in (("steps", steps), ("seeds", seeds)) if v is not None}
    return replace(config, **changes)
