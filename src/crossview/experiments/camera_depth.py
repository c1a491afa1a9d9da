"""Camera encodings compared on multi-view depth, where the camera geometry decides.

One :class:`~crossview.models.multiview.depth.MultiViewDepth` is trained per camera
conditioning (Plücker raymap, naive raymap, CaPE, GTA, PRoPE, PRoPE + CamRay, and ``none``,
the camera-blind baseline) and seed, with identical data, budget and hyper-parameters, to
predict the depth of every view of posed, unrectified synthetic scenes
(:mod:`crossview.data.synthetic.depth_scenes`: random baselines, per-view zoom). Depth in
units of the baseline is only defined through the cameras, so the conditioning is the
model's only route to it. Every run is evaluated (``abs_rel``, ``delta1`` of view 0 on
held-out scenes, :mod:`crossview.metrics.depth`) in four settings:

- ``in_distribution``: 2 views, zooms and view separations from the training ranges;
- ``more_views``: 4 views of the same scenes (training always used 2);
- ``zoomed``: 2 views, every view zoomed beyond the training range;
- ``wide``: 2 views farther apart than any training pair.

Each run is one :class:`~crossview.train.trainer.Trainer` run of the ``multiview-depth``
recipe (:mod:`crossview.train.recipes.multiview_depth`; :func:`run_config` is its
configuration) with checkpoints under the cache directory, so a killed study resumes mid-run;
finished runs write ``runs/<conditioning>-seed<k>.json`` and are skipped by a rerun
(:mod:`crossview.experiments.seeded_runs`). :func:`summarize` turns the run files into
``results.json`` (with every pair of conditionings whose means differ by more than twice the
larger standard deviation), ``table.md`` and ``plot.png``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from crossview.data.synthetic.depth_scenes import OBJECT_Z, OBJECTS, make_depth_scenes
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
from crossview.models.multiview.depth import DEPTH_CONDITIONINGS as CONDITIONINGS
from crossview.output import staged_files
from crossview.train.config import Config
from crossview.train.recipes.multiview_depth import FirstViews, ShuffledViews

SETTINGS = ("in_distribution", "more_views", "zoomed", "wide")
METRICS = ("abs_rel", "delta1")
LABELS = {"plucker": "Plücker raymap", "naive": "naive raymap", "cape": "CaPE", "gta": "GTA",
          "prope": "PRoPE", "prope+camray": "PRoPE + CamRay", "none": "no cameras"}
TITLES = {"in_distribution": "2 views", "more_views": "4 views (OOD)",
          "zoomed": "zoomed intrinsics (OOD)", "wide": "wider baselines (OOD)"}
SUMMARY_FILES = ("results.json", "table.md", "plot.png")


@dataclass(frozen=True)
class DepthStudyConfig(StudyBudget):
    """Budget, sizes and data ranges of the study (identical for every conditioning); angles
    in degrees. 4x4 patches and 4000 steps: with 8x8 patches the models stalled near 0.30
    AbsRel however long they trained (and memorised the scenes), with 4x4 ones they came
    close to classical plane-sweep matching (docs/results/camera-depth/README.md, pilots)."""

    steps: int = 4000
    warmup: int = 400
    lr: float = 2e-3
    patch: int = 4
    train_scenes: int = 20000
    views: int = 2
    more_views: int = 4
    train_zoom: tuple[float, float] = (1.0, 1.5)
    test_zoom: tuple[float, float] = (2.0, 3.0)
    separation: tuple[float, float] = (5.0, 20.0)
    wide_separation: tuple[float, float] = (25.0, 35.0)


def _data_key(config: DepthStudyConfig) -> str:
    """The cache name of the scenes ``config`` renders: every field :func:`load_data` uses and
    the scene layout's constants."""
    fields = ("image_size", "views", "more_views", "train_scenes", "test_scenes", "train_zoom",
              "test_zoom", "separation", "wide_separation", "data_seed")
    text = "-".join([*(str(getattr(config, name)) for name in fields), str(OBJECTS),
                     str(OBJECT_Z)])
    return "".join(c for c in text if c.isalnum() or c in "-.,")


def load_data(config: DepthStudyConfig, cache_dir: Path) -> dict[str, Any]:
    """Training and test scenes, rendered once and cached in ``cache_dir``.

    ``{"train": scenes, "test": {"main": ..., "zoomed": ..., "wide": ...}}``, scenes as
    :func:`~crossview.data.synthetic.depth_scenes.make_depth_scenes` returns them; the test
    scenes have :attr:`DepthStudyConfig.more_views` views, and their ``zoomed`` and ``wide``
    variants are the same scenes seen by cameras drawn from the out-of-range zooms and
    separations.
    """
    path = cache_dir / f"depth-scenes-{_data_key(config)}.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    train = make_depth_scenes(config.train_scenes, config.views, config.train_zoom,
                              config.separation, config.data_seed, config.image_size,
                              split="train")["main"]
    test = make_depth_scenes(
        config.test_scenes, config.more_views, config.train_zoom, config.separation,
        config.data_seed + 1, config.image_size, split="heldout",
        variants={"zoomed": (config.test_zoom, config.separation),
                  "wide": (config.train_zoom, config.wide_separation)})
    data = {"train": train, "test": test}
    save_atomic(path, data, as_json=False)
    return data


def run_config(config: DepthStudyConfig, conditioning: str, seed: int, out_dir: Path
               ) -> Config:
    """The training configuration of one run (the ``multiview-depth`` recipe, see
    :func:`~crossview.experiments.seeded_runs.run_config`)."""
    return study_run_config(
        config, task="multiview-depth", model="multiview-depth", dataset="depth-scenes",
        conditioning=conditioning, seed=seed, out_dir=out_dir,
        recipe={"scenes": config.train_scenes, "views": config.views,
                "zoom": list(config.train_zoom), "separation": list(config.separation),
                "scenes_seed": config.data_seed})


def test_cases(test: dict[str, dict[str, torch.Tensor]], config: DepthStudyConfig
               ) -> dict[str, FirstViews]:
    """The held-out scenes of each of :data:`SETTINGS` (view 0 is the one scored)."""
    return {"in_distribution": FirstViews(test["main"], config.views),
            "more_views": FirstViews(test["main"], config.more_views),
            "zoomed": FirstViews(test["zoomed"], config.views),
            "wide": FirstViews(test["wide"], config.views)}


def train_run(conditioning: str, seed: int, config: DepthStudyConfig, data: dict[str, Any],
              out_dir: Path) -> dict[str, Any]:
    """Train one model from scratch (or resume its run in ``out_dir``) and score its
    ``abs_rel`` and ``delta1`` (pooled over the pixels of view 0) in each of
    :data:`SETTINGS`; returns the run record."""
    cfg = run_config(config, conditioning, seed, out_dir)
    train = ShuffledViews(data["train"], cfg.data.train_size, seed)
    return train_and_test(conditioning, seed, config, cfg, train,
                          test_cases(data["test"], config))


_worker = partial(worker, load_data, train_run)


def run_study(config: DepthStudyConfig, out_dir: Path, cache_dir: Path, *, jobs: int = 1,
              conditionings: tuple[str, ...] = CONDITIONINGS,
              on_done: Callable[[str], None] | None = None) -> list[Path]:
    """Train and evaluate every missing (conditioning, seed) run, ``jobs`` at a time, one
    thread each; returns the run files."""
    load_data(config, cache_dir)  # render once, before the workers start
    return run_all(_worker, config, out_dir, cache_dir, seeds=config.seeds,
                   conditionings=conditionings, jobs=jobs, on_done=on_done)


def separated_pairs(summary: dict[str, Any], key: str, lower_is_better: bool
                    ) -> list[dict[str, Any]]:
    """Every ordered pair (better, worse) of conditionings whose ``key`` means differ by more
    than twice the larger of their two standard deviations (both need two seeds or more)."""
    pairs = []
    for a, b in itertools.combinations(summary["conditionings"], 2):
        sa, sb = summary["conditionings"][a][key], summary["conditionings"][b][key]
        if min(sa["n"], sb["n"]) < 2:
            continue
        gap = sb["mean"] - sa["mean"] if lower_is_better else sa["mean"] - sb["mean"]
        if abs(gap) > 2 * max(sa["std"], sb["std"]):
            better, worse = (a, b) if gap > 0 else (b, a)
            pairs.append({"better": better, "worse": worse, "gap": abs(gap)})
    return pairs


def summarize(out_dir: Path, command: str) -> dict[str, Any]:
    """Aggregate the run files into ``results.json``, ``table.md`` and ``plot.png`` (published
    together or not at all, :func:`crossview.output.staged_files`)."""
    runs = read_runs(out_dir)
    summary: dict[str, Any] = {"command": command, "config": runs[0]["config"],
                               "conditionings": {}, "separated": {}}
    for conditioning in CONDITIONINGS:
        mine = [r for r in runs if r["conditioning"] == conditioning]
        if not mine:
            continue
        entry: dict[str, Any] = {
            "seeds": [r["seed"] for r in mine], "parameters": mine[0]["parameters"],
            "train_seconds": seed_stats([r["train_seconds"] for r in mine]),
            "final_train_loss": seed_stats([r["final_train_loss"] for r in mine])}
        for setting, metric in itertools.product(SETTINGS, METRICS):
            entry[f"{setting}_{metric}"] = seed_stats([r["test"][setting][metric]
                                                       for r in mine])
        summary["conditionings"][conditioning] = entry
    for setting, metric in itertools.product(SETTINGS, METRICS):
        key = f"{setting}_{metric}"
        summary["separated"][key] = separated_pairs(summary, key, metric == "abs_rel")
    with staged_files(out_dir / name for name in SUMMARY_FILES) as (results, table, plot):
        results.write_text(json.dumps(summary, indent=2))
        table.write_text(table_markdown(summary))
        _write_plot(plot, summary)
    return summary


def table_markdown(summary: dict[str, Any]) -> str:
    """The study's table: mean ± std of each metric and setting, then every seed's AbsRel."""
    c = summary["config"]
    lines = [
        f"Multi-view depth, {c['image_size'][0]}x{c['image_size'][1]} images, "
        f"{c['patch']}x{c['patch']} patches, {c['depth']} layers of width {c['width']}, "
        f"{c['steps']} steps of batch {c['batch']}; mean ± std over seeds of AbsRel (lower is "
        "better) and δ<1.25 (%, higher is better) of view 0. Settings: 2 views (training "
        f"ranges: zoom {c['train_zoom'][0]:g}-{c['train_zoom'][1]:g}x, views "
        f"{c['separation'][0]:g}-{c['separation'][1]:g}° apart); {c['more_views']} views "
        f"(training used {c['views']}); zoomed (zoom {c['test_zoom'][0]:g}-"
        f"{c['test_zoom'][1]:g}x); wide (views {c['wide_separation'][0]:g}-"
        f"{c['wide_separation'][1]:g}° apart).",
        "",
        "| conditioning | seeds | " + " | ".join(
            f"{TITLES[s]} {'AbsRel' if m == 'abs_rel' else 'δ1'}"
            for s in SETTINGS for m in METRICS) + " |",
        "|---|---|" + "---|" * (len(SETTINGS) * len(METRICS)),
    ]
    for conditioning, entry in summary["conditionings"].items():
        cells = [_cell(entry[f"{s}_{m}"], m) for s in SETTINGS for m in METRICS]
        lines.append(f"| {LABELS[conditioning]} | {len(entry['seeds'])} | "
                     + " | ".join(cells) + " |")
    lines += ["", "AbsRel of every seed (seed order as listed):", "",
              "| conditioning | seeds | " + " | ".join(TITLES[s] for s in SETTINGS) + " |",
              "|---|---|" + "---|" * len(SETTINGS)]
    for conditioning, entry in summary["conditionings"].items():
        cells = [", ".join(f"{v:.3f}" for v in entry[f"{s}_abs_rel"]["values"])
                 for s in SETTINGS]
        lines.append(f"| {LABELS[conditioning]} | {entry['seeds']} | " + " | ".join(cells)
                     + " |")
    lines += ["", "Pairs separated by more than 2 standard deviations (AbsRel; better > "
              "worse):", ""]
    for setting in SETTINGS:
        pairs = summary["separated"][f"{setting}_abs_rel"]
        text = ", ".join(f"{LABELS[p['better']]} > {LABELS[p['worse']]}" for p in pairs)
        lines.append(f"- {TITLES[setting]}: {text or 'none'}")
    lines += ["", f"Command: `{summary['command']}`", ""]
    return "\n".join(lines)


def _cell(stats: dict[str, float], metric: str) -> str:
    digits = 3 if metric == "abs_rel" else 1
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def _write_plot(path: Path, summary: dict[str, Any]) -> None:
    plot_seeds(path, {TITLES[setting]: {name: entry[f"{setting}_abs_rel"]
                                        for name, entry in summary["conditionings"].items()}
                      for setting in SETTINGS}, LABELS, "AbsRel of view 0 (lower is better)")
