"""The camera-encoding comparison of "Cameras as Relative Positional Encoding", at small scale.

One :class:`~crossview.models.multiview.MultiViewTransformer` is trained per camera conditioning
(Plücker raymap, naive raymap, CaPE, GTA, PRoPE, PRoPE + CamRay) and seed, with identical data,
budget and hyper-parameters, for novel view synthesis on posed synthetic scenes whose views
each have their own zoom (:mod:`crossview.experiments.camera_scenes`). Every run is evaluated
(PSNR, SSIM on held-out scenes) in three settings:

- ``in_distribution``: 2 context views, zooms from the training range;
- ``more_views``: 4 context views (training always used 2), same targets;
- ``zoomed``: 2 context views, every view zoomed beyond the training range.

Each run is one :class:`~crossview.train.trainer.Trainer` run of the ``novel-view`` recipe
(:mod:`crossview.train.recipes.novel_view`; :func:`run_config` is its configuration), with
checkpoints in :func:`~crossview.experiments.seeded_runs.run_dir`, so a killed study resumes
mid-run. Each finished run writes ``runs/<conditioning>-seed<k>.json``; a rerun skips them
(resumable). The three settings are scored through :func:`crossview.eval.evaluate`.
:func:`summarize` turns the run files into ``results.json``, ``table.md`` and ``plot.png``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from crossview.data.synthetic.camera_scenes import make_scenes
from crossview.experiments.seeded_runs import (
    StudyBudget,
    plot_seeds,
    read_runs,
    run_all,
    save_atomic,
    seed_stats,
    train_and_test,
    worker,
)
from crossview.experiments.seeded_runs import run_config as study_run_config
from crossview.models.multiview import CONDITIONINGS
from crossview.output import staged_files
from crossview.train.config import Config
from crossview.train.recipes.novel_view import FixedViews, RandomViews

SETTINGS = ("in_distribution", "more_views", "zoomed")
_LABELS = {"plucker": "Plücker raymap", "naive": "naive raymap", "cape": "CaPE", "gta": "GTA",
           "prope": "PRoPE", "prope+camray": "PRoPE + CamRay"}


@dataclass(frozen=True)
class StudyConfig(StudyBudget):
    """Budget, sizes and data ranges of the study (identical for every conditioning)."""

    views: int = 6
    context: int = 2
    more_context: int = 4
    targets: int = 2
    train_zoom: tuple[float, float] = (1.0, 3.0)
    test_zoom: tuple[float, float] = (3.0, 5.0)


def _data_key(config: StudyConfig) -> str:
    """The cache name of the scenes ``config`` renders: every field :func:`load_data` uses."""
    return (f"{config.image_size[0]}x{config.image_size[1]}-v{config.views}-"
            f"t{config.more_context + config.targets}-"
            f"n{config.train_scenes}-{config.test_scenes}-z{config.train_zoom}-{config.test_zoom}-"
            f"s{config.data_seed}").replace(" ", "").replace("(", "").replace(")", "")


def load_data(config: StudyConfig, cache_dir: Path) -> dict[str, dict[str, torch.Tensor]]:
    """Training and test scenes, rendered once and cached in ``cache_dir``.

    ``{"train": ..., "test": ...}`` of :func:`~crossview.experiments.camera_scenes.make_scenes`
    dicts: ``images [N, V, 3, H, W]`` (0..255), ``K [N, V, 3, 3]``, ``viewmats [N, V, 4, 4]``;
    the test scenes also ``images_zoomed`` and ``K_zoomed``.
    """
    path = cache_dir / f"scenes-{_data_key(config)}.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    data = {
        "train": make_scenes(config.train_scenes, config.views, config.train_zoom,
                             config.data_seed, config.image_size, split="train"),
        "test": make_scenes(config.test_scenes, config.more_context + config.targets,
                            config.train_zoom, config.data_seed + 1, config.image_size,
                            split="heldout", test_zoom=config.test_zoom),
    }
    save_atomic(path, data, as_json=False)
    return data


def run_config(config: StudyConfig, conditioning: str, seed: int, out_dir: Path) -> Config:
    """The training configuration of one run of the study (the ``novel-view`` recipe, see
    :func:`~crossview.experiments.seeded_runs.run_config`)."""
    return study_run_config(
        config, task="novel-view", model="multiview", dataset="camera-scenes",
        conditioning=conditioning, seed=seed, out_dir=out_dir,
        recipe={"scenes": config.train_scenes, "views": config.views,
                "context": config.context, "targets": config.targets,
                "zoom": list(config.train_zoom), "scenes_seed": config.data_seed})


def test_cases(test: dict[str, torch.Tensor], config: StudyConfig) -> dict[str, FixedViews]:
    """The held-out views of each of :data:`SETTINGS`."""
    c, m, t = config.context, config.more_context, config.targets
    targets = torch.arange(m, m + t)
    return {"in_distribution": FixedViews(test, torch.arange(c), targets),
            "more_views": FixedViews(test, torch.arange(m), targets),
            "zoomed": FixedViews(test, torch.arange(c), targets, "images_zoomed", "K_zoomed")}


def train_run(conditioning: str, seed: int, config: StudyConfig,
              data: dict[str, dict[str, torch.Tensor]], out_dir: Path) -> dict[str, Any]:
    """Train one model from scratch (or resume its run in ``out_dir``) and score its mean
    PSNR and SSIM in each of :data:`SETTINGS`; returns the run record."""
    cfg = run_config(config, conditioning, seed, out_dir)
    train = RandomViews(data["train"], cfg.data.train_size, config.context, config.targets,
                        seed)
    return train_and_test(conditioning, seed, config, cfg, train,
                          test_cases(data["test"], config))


_worker = partial(worker, load_data, train_run)


def run_study(config: StudyConfig, out_dir: Path, cache_dir: Path, *, jobs: int = 2,
              conditionings: tuple[str, ...] = CONDITIONINGS,
              on_done: Callable[[str], None] | None = None) -> list[Path]:
    """Train and evaluate every missing (conditioning, seed) run, ``jobs`` at a time.

    Each run uses one thread, in a separate process when ``jobs > 1``. Finished runs (their
    JSON exists with the same config) are skipped. Returns the run files.
    """
    load_data(config, cache_dir)  # render once, before the workers start
    return run_all(_worker, config, out_dir, cache_dir, seeds=config.seeds,
                   conditionings=conditionings, jobs=jobs, on_done=on_done)


SUMMARY_FILES = ("results.json", "table.md", "plot.png")


def summarize(out_dir: Path, command: str) -> dict[str, Any]:
    """Aggregate the run files into ``results.json``, ``table.md`` and ``plot.png`` (published
    together or not at all, :func:`crossview.output.staged_files`)."""
    runs = read_runs(out_dir)
    summary: dict[str, Any] = {"command": command, "config": runs[0]["config"],
                               "conditionings": {}}
    for conditioning in CONDITIONINGS:
        mine = [r for r in runs if r["conditioning"] == conditioning]
        if not mine:
            continue
        entry: dict[str, Any] = {
            "seeds": [r["seed"] for r in mine], "parameters": mine[0]["parameters"],
            "final_train_loss": seed_stats([r["final_train_loss"] for r in mine])}
        for setting in SETTINGS:
            for metric in ("psnr", "ssim"):
                entry[f"{setting}_{metric}"] = seed_stats(
                    [r["test"][setting][metric] for r in mine])
        summary["conditionings"][conditioning] = entry
    with staged_files(out_dir / name for name in SUMMARY_FILES) as (results, table, plot):
        results.write_text(json.dumps(summary, indent=2))
        _write_table(table, summary)
        _write_plot(plot, summary)
    return summary


def _write_table(path: Path, summary: dict[str, Any]) -> None:
    config = summary["config"]
    lines = [
        f"Novel view synthesis, {config['image_size'][0]}x{config['image_size'][1]} images, "
        f"{config['patch']}x{config['patch']} patches, {config['depth']} layers of width "
        f"{config['width']}, {config['steps']} steps of batch {config['batch']}; mean ± std "
        "over seeds. Columns: 2 context views (training zooms), 4 context views (training "
        f"used 2), zoomed test views (zoom {config['test_zoom'][0]:g}-"
        f"{config['test_zoom'][1]:g}x, training {config['train_zoom'][0]:g}-"
        f"{config['train_zoom'][1]:g}x).",
        "",
        "| conditioning | seeds | PSNR 2 views | SSIM 2 views | PSNR 4 views | SSIM 4 views "
        "| PSNR zoomed | SSIM zoomed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for conditioning, entry in summary["conditionings"].items():
        cells = [f"{entry[f'{s}_{m}']['mean']:.{2 if m == 'psnr' else 3}f} ± "
                 f"{entry[f'{s}_{m}']['std']:.{2 if m == 'psnr' else 3}f}"
                 for s in SETTINGS for m in ("psnr", "ssim")]
        lines.append(f"| {_LABELS[conditioning]} | {len(entry['seeds'])} | " + " | ".join(cells)
                     + " |")
    lines += ["", f"Command: `{summary['command']}`", ""]
    path.write_text("\n".join(lines))


def _write_plot(path: Path, summary: dict[str, Any]) -> None:
    titles = {"in_distribution": "2 context views", "more_views": "4 context views (OOD)",
              "zoomed": "zoomed test intrinsics (OOD)"}
    plot_seeds(path, {titles[setting]: {name: entry[f"{setting}_psnr"]
                                        for name, entry in summary["conditionings"].items()}
                      for setting in SETTINGS}, _LABELS, "PSNR (dB)")
