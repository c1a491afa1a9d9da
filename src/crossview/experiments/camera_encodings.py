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
checkpoints in :func:`run_dir`, so a killed study resumes mid-run. Each
finished run writes ``runs/<conditioning>-seed<k>.json``; a rerun skips them (resumable). The
three settings are scored through :func:`crossview.eval.evaluate`. :func:`summarize` turns the
run files into ``results.json``, ``table.md`` and ``plot.png``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from crossview.data.synthetic.camera_scenes import make_scenes
from crossview.eval import evaluate
from crossview.experiments.seeded_runs import (
    loss_record,
    read_runs,
    run_all,
    run_dir,
    run_file,
    save_atomic,
    seed_stats,
    train_to_end,
)
from crossview.models.multiview import CONDITIONINGS
from crossview.output import staged_files
from crossview.train.checkpoint import latest_checkpoint
from crossview.train.config import Config, config_from_dict
from crossview.train.recipes.novel_view import FixedViews, RandomViews
from crossview.train.trainer import Trainer

SETTINGS = ("in_distribution", "more_views", "zoomed")
_LABELS = {"plucker": "Plücker raymap", "naive": "naive raymap", "cape": "CaPE", "gta": "GTA",
           "prope": "PRoPE", "prope+camray": "PRoPE + CamRay"}


@dataclass(frozen=True)
class StudyConfig:
    """Budget and sizes of the study (identical for every conditioning)."""

    steps: int = 800
    seeds: int = 3
    batch: int = 16
    lr: float = 1e-3
    warmup: int = 80
    train_scenes: int = 1000
    test_scenes: int = 100
    views: int = 6
    context: int = 2
    more_context: int = 4
    targets: int = 2
    train_zoom: tuple[float, float] = (1.0, 3.0)
    test_zoom: tuple[float, float] = (3.0, 5.0)
    image_size: tuple[int, int] = (32, 32)
    patch: int = 8
    width: int = 64
    depth: int = 4
    heads: int = 4
    data_seed: int = 1234

    @classmethod
    def quick(cls) -> StudyConfig:
        """A tiny budget that runs in seconds (for tests and smoke checks)."""
        return cls(steps=3, seeds=1, batch=2, warmup=1, train_scenes=4, test_scenes=2,
                   width=16, depth=1, heads=2)


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
    """The training configuration of one run of the study (the ``novel-view`` recipe): AdamW,
    linear warm-up over ``warmup`` steps then cosine decay, clipping at 1, the scenes of
    ``config`` (passed to the trainer as rendered by :func:`load_data`)."""
    return config_from_dict({
        "task": "novel-view",
        "model": {"name": "multiview", "overrides": {
            "conditioning": conditioning, "patch": config.patch, "width": config.width,
            "depth": config.depth, "heads": config.heads}},
        "data": {"train": "camera-scenes", "val": "camera-scenes",
                 "train_size": config.steps * config.batch, "val_size": 0, "seed": seed,
                 "height": config.image_size[0], "width": config.image_size[1]},
        "recipe": {"scenes": config.train_scenes, "views": config.views,
                   "context": config.context, "targets": config.targets,
                   "zoom": list(config.train_zoom), "scenes_seed": config.data_seed},
        "optim": {"lr": config.lr, "weight_decay": 0.05, "grad_clip": 1.0,
                  "schedule": "cosine", "pct_start": config.warmup / config.steps},
        "train": {"steps": config.steps, "batch_size": config.batch, "seed": seed,
                  "out_dir": str(out_dir), "log_every": 1, "val_every": config.steps,
                  "ckpt_every": max(1, config.steps // 8), "keep_last": 1},
    })


def evaluate_settings(model: torch.nn.Module, test: dict[str, torch.Tensor],
                      config: StudyConfig, trainer: Trainer) -> dict[str, dict[str, float]]:
    """Mean PSNR and SSIM over the test targets in each of :data:`SETTINGS`, through
    :func:`crossview.eval.evaluate` with the recipe's predictor."""
    model.eval()
    c, m, t = config.context, config.more_context, config.targets
    targets = torch.arange(m, m + t)
    cases = {"in_distribution": FixedViews(test, torch.arange(c), targets),
             "more_views": FixedViews(test, torch.arange(m), targets),
             "zoomed": FixedViews(test, torch.arange(c), targets, "images_zoomed", "K_zoomed")}
    predict = trainer.recipe.predictor(model, trainer.cfg, trainer.device)

    def predictor(sample: Any) -> Any:
        with torch.no_grad():
            return predict(sample)

    return {name: evaluate(views, predictor, trainer.recipe.metrics(trainer.cfg),
                           dataset_name=name).mean() for name, views in cases.items()}


def train_run(conditioning: str, seed: int, config: StudyConfig,
              data: dict[str, dict[str, torch.Tensor]], out_dir: Path) -> dict[str, Any]:
    """Train one model from scratch (or resume its run in ``out_dir``) and evaluate it;
    returns the run record."""
    cfg = run_config(config, conditioning, seed, out_dir)
    train = RandomViews(data["train"], cfg.data.train_size, config.context, config.targets,
                        seed)
    started = time.perf_counter()
    trainer = Trainer(cfg, train_set=train, resume=latest_checkpoint(out_dir) is not None,
                      progress=False)
    train_to_end(trainer)
    train_seconds = time.perf_counter() - started
    return {
        "conditioning": conditioning, "seed": seed, "config": asdict(config),
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        **loss_record(out_dir),
        "train_seconds": train_seconds,
        "test": evaluate_settings(trainer.model, data["test"], config, trainer),
    }


def _worker(conditioning: str, seed: int, config: StudyConfig, cache_dir: str,
            out_dir: str) -> str:
    torch.set_num_threads(1)
    data = load_data(config, Path(cache_dir))
    record = train_run(conditioning, seed, config, data,
                       run_dir(Path(cache_dir), config, conditioning, seed))
    path = run_file(Path(out_dir), conditioning, seed)
    save_atomic(path, record, as_json=True)
    return str(path)


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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary["conditionings"])
    fig, axes = plt.subplots(1, len(SETTINGS), figsize=(4.2 * len(SETTINGS), 3.8))
    titles = {"in_distribution": "2 context views", "more_views": "4 context views (OOD)",
              "zoomed": "zoomed test intrinsics (OOD)"}
    for ax, setting in zip(axes, SETTINGS, strict=True):
        for i, name in enumerate(names):
            stats = summary["conditionings"][name][f"{setting}_psnr"]
            colour = "#999999" if name in ("plucker", "naive") else "#4477aa"
            ax.scatter([i] * len(stats["values"]), stats["values"], s=12, color=colour,
                       alpha=0.6)
            ax.errorbar([i + 0.2], [stats["mean"]], yerr=[stats["std"]], fmt="o",
                        color=colour, capsize=3)
        ax.set_xticks(range(len(names)), [_LABELS[n] for n in names], rotation=35, ha="right")
        ax.set_title(titles[setting])
        ax.set_ylabel("PSNR (dB)")
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110, format="png")
    finally:
        plt.close(fig)

