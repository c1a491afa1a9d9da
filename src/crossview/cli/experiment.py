"""``crossview experiment ...``: reproducible studies that write results, a table and a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from crossview.errors import UserError
from crossview.output import check_output_files, check_writable

app = typer.Typer(help="Reproducible experiments (results JSON, table, plot).",
                  no_args_is_help=True)


@app.command("camera-encodings")
def camera_encodings(
    steps: Annotated[int | None, typer.Option(help="Training steps per run.")] = None,
    seeds: Annotated[int | None, typer.Option(help="Seeds per conditioning.")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="A tiny budget (seconds): a smoke run of the whole pipeline.")] = False,
    jobs: Annotated[int, typer.Option(help="Runs in parallel (one thread each).")] = 2,
    out: Annotated[Path, typer.Option(help="Results directory.")] = Path(
        "docs/results/camera-encodings"),
    cache_dir: Annotated[Path, typer.Option(help="Where rendered scenes are cached.")] = Path(
        "runs/camera-encodings"),
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Delete existing run files first instead of resuming.")] = False,
) -> None:
    """Train one small NVS transformer per camera conditioning and seed; compare them.

    Plücker raymap, naive raymap, CaPE, GTA, PRoPE and PRoPE + CamRay, identical budgets;
    finished runs are skipped (resumable). Writes OUT/runs/*.json, OUT/results.json,
    OUT/table.md and OUT/plot.png.
    """
    # imported when the study runs: scikit-image and the study (~0.3 s) would slow every
    # `crossview --help`
    from crossview.experiments.camera_encodings import (
        CONDITIONINGS,
        SUMMARY_FILES,
        StudyConfig,
        run_study,
        summarize,
        with_budget,
    )

    if (steps is not None and steps <= 0) or (seeds is not None and seeds <= 0) or jobs <= 0:
        raise UserError("--steps, --seeds and --jobs must be positive")
    # before hours of rendering and training
    check_output_files(out / name for name in SUMMARY_FILES)
    for directory in (out / "runs", cache_dir):
        check_writable(directory)
    config = with_budget(StudyConfig.quick() if quick else StudyConfig(), steps, seeds)
    if fresh:
        for stale in (out / "runs").glob("*.json"):
            stale.unlink()
    command = " ".join(
        ["crossview experiment camera-encodings"]
        + (["--quick"] if quick else [])
        + ([f"--steps {steps}"] if steps is not None else [])
        + ([f"--seeds {seeds}"] if seeds is not None else [])
        + [f"--jobs {jobs}", f"--out {out}"]
    )
    with Progress() as progress:
        task = progress.add_task("rendering scenes, then training",
                                 total=config.seeds * len(CONDITIONINGS))

        def on_done(path: str) -> None:
            progress.update(task, advance=1, description=f"done {Path(path).stem}")

        run_study(config, out, cache_dir, jobs=jobs, on_done=on_done)
    summarize(out, command)
    typer.echo((out / "table.md").read_text())
    typer.echo(f"wrote {out / 'results.json'}, {out / 'table.md'}, {out / 'plot.png'}")
