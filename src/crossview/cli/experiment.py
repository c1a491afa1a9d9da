"""``crossview experiment ...``: reproducible studies that write results, a table and a plot."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from crossview.cli.help_text import App
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_files, check_writable

bars = lazy_import("rich.progress")  # progress bars: loaded when a run starts

seeded_runs = lazy_import("crossview.experiments.seeded_runs")

app = App(help="Reproducible experiments (results JSON, table, plot).", no_args_is_help=True)

Steps = Annotated[int | None, typer.Option(help="Training steps per run.")]
Seeds = Annotated[int | None, typer.Option(help="Seeds per conditioning.")]
Quick = Annotated[bool, typer.Option(
    "--quick", help="A tiny budget (seconds): a smoke run of the whole pipeline.")]
Jobs = Annotated[int, typer.Option(help="Runs in parallel (one thread each).")]
Fresh = Annotated[bool, typer.Option(
    "--fresh", help="Delete existing run files first instead of resuming.")]
CacheDir = Annotated[Path, typer.Option(
    help="Where rendered scenes and the runs' checkpoints are cached.")]
Only = Annotated[list[str] | None, typer.Option(
    "--conditioning", help="Train only this conditioning (repeatable; default: all). The "
    "summary covers every finished run.")]


def _run(name: str, study: ModuleType, config: Any, *, steps: int | None, seeds: int | None,
         quick: bool, jobs: int, out: Path, cache_dir: Path, fresh: bool,
         only: list[str] | None = None) -> None:
    """Check the budget and every output place, then run ``study`` (a module with
    ``run_study``, ``summarize``, ``SUMMARY_FILES`` and ``CONDITIONINGS``) and print its
    table."""

    if (steps is not None and steps <= 0) or (seeds is not None and seeds <= 0) or jobs <= 0:
        raise UserError("--steps, --seeds and --jobs must be positive")
    unknown = sorted(set(only or ()) - set(study.CONDITIONINGS))
    if unknown:
        raise UserError(f"--conditioning {unknown[0]!r} is not one of "
                        f"{', '.join(study.CONDITIONINGS)}")
    conditionings = tuple(c for c in study.CONDITIONINGS if not only or c in only)
    # before hours of rendering and training
    check_output_files(out / file for file in study.SUMMARY_FILES)
    for directory in (out / "runs", cache_dir):
        check_writable(directory)
    config = seeded_runs.with_budget(config, steps, seeds)
    if fresh:
        for stale in (out / "runs").glob("*.json"):
            stale.unlink()
    command = " ".join(
        [f"crossview experiment {name}"]
        + (["--quick"] if quick else [])
        + ([f"--steps {steps}"] if steps is not None else [])
        + ([f"--seeds {seeds}"] if seeds is not None else [])
        + [f"--conditioning {c}" for c in (conditionings if only else ())]
        + [f"--jobs {jobs}", f"--out {out}"]
    )
    with bars.Progress() as progress:
        task = progress.add_task("rendering scenes, then training",
                                 total=config.seeds * len(conditionings))

        def on_done(path: str) -> None:
            progress.update(task, advance=1, description=f"done {Path(path).stem}")

        study.run_study(config, out, cache_dir, jobs=jobs, conditionings=conditionings,
                        on_done=on_done)
    study.summarize(out, command)
    typer.echo((out / "table.md").read_text())
    typer.echo(", ".join(f"wrote {out / file}" for file in study.SUMMARY_FILES))


def _study_command(name: str, module: str, config_class: str, default_jobs: int,
                   doc: str) -> None:
    """Register ``crossview experiment NAME``: the study of ``crossview.experiments.MODULE``
    with its budget dataclass ``CONFIG_CLASS`` (its ``quick()`` for ``--quick``)."""

    def command(
        steps: Steps = None,
        seeds: Seeds = None,
        quick: Quick = False,
        jobs: Jobs = default_jobs,
        out: Annotated[Path, typer.Option(help="Results directory.")] = Path(
            f"docs/results/{name}"),
        cache_dir: CacheDir = Path(f"runs/{name}"),
        fresh: Fresh = False,
        only: Only = None,
    ) -> None:
        # imported when the study runs: scikit-image and the study (~0.3 s) would slow every
        # `crossview --help`
        study = importlib.import_module(f"crossview.experiments.{module}")
        budget = getattr(study, config_class)
        _run(name, study, budget.quick() if quick else budget(), steps=steps, seeds=seeds,
             quick=quick, jobs=jobs, out=out, cache_dir=cache_dir, fresh=fresh, only=only)

    command.__doc__ = doc
    app.command(name)(command)


_study_command(
    "camera-encodings", "camera_encodings", "StudyConfig", 2,
    "Train one small NVS transformer per camera conditioning and seed; compare them.\n\n"
    "Plücker raymap, naive raymap, CaPE, GTA, PRoPE and PRoPE + CamRay, identical budgets; "
    "finished runs are skipped (resumable). Writes OUT/runs/*.json, OUT/results.json, "
    "OUT/table.md and OUT/plot.png.")
_study_command(
    "camera-depth", "camera_depth", "DepthStudyConfig", 1,
    "Train one multi-view depth transformer per camera conditioning and seed; compare them.\n\n"
    "The six conditionings of camera-encodings plus a camera-blind baseline, identical "
    "budgets, on posed unrectified views where depth is only defined through the cameras; "
    "tested with 2 and 4 views, zoomed intrinsics and wider baselines. Resumable. Writes "
    "OUT/runs/*.json, OUT/results.json, OUT/table.md and OUT/plot.png.")
