"""``crossview eval``: score a model on a benchmark with the benchmark's own metrics.

Parses options and calls :func:`crossview.api.evaluate_benchmark` (the dataset, the model,
the baselines, data-parallel runs) under a progress bar (off a terminal, a line per sample:
:mod:`crossview.progress`), then prints a per-sample and a mean table (and JSON with
``--json``). On kinds that have a classical baseline (real ``scenes``) it prints one table per
scene and one of the means, the baselines as rows under the model.

``torchrun --nproc-per-node N -m crossview eval ...`` runs it data-parallel (the api opens the
process group); rank 0 alone shows progress, prints and writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crossview.cli import options
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_file
from crossview.report import print_table, write_json

if TYPE_CHECKING:
    from crossview.api import BenchmarkRun, EvalResult

bars = lazy_import("rich.progress")  # the progress bar's columns: loaded when a run starts
shown = lazy_import("crossview.progress")  # the progress bar, or lines off a terminal

api = lazy_import("crossview.api")
distributed = lazy_import("crossview.distributed")


def _print_datasets() -> None:
    list_datasets = api.datasets.list_datasets
    rows = [(kind.name, kind.task, ", ".join(kind.metrics), kind.reduction, kind.description)
            for kind in list_datasets()]
    print_table("dataset kinds (--dataset KIND[,OPTION=VALUE...]:PATH)",
                ["kind", "task", "metrics", "reduction", "description"], rows)
    for task in sorted({kind.task for kind in list_datasets()}):
        typer.echo(f"{task} metrics (--metrics): {', '.join(api.metrics.list_metrics(task))}")


def _print_result(result: EvalResult, per_sample: bool, note: str) -> None:
    if per_sample:
        print_table(f"{result.dataset}: per sample", ["sample", *result.metrics],
                    [(name, *(values[m] for m in result.metrics)) for name, values in result.rows])
    rows = []
    for reduction, label in (("pooled", "mean per pixel"),
                             ("image_mean", "unweighted mean per image")):
        marker = " (benchmark)" if reduction == result.reduction else ""
        rows.append((label + marker,
                     *(result.summary[m][reduction] for m in result.metrics)))
    print_table(f"{result.dataset}: {len(result.rows)} samples", ["", *result.metrics], rows)
    if note:
        typer.echo(f"note: {note}")


def _print_with_baseline(result: EvalResult, runs: list[api.baselines.BaselineRun], model: str,
                         per_sample: bool) -> None:
    """One table per scene (``per_sample``) and one of the means, each with the model's row and
    a row per baseline (or a row saying why it is not available); the means' caption says what
    the baselines are."""
    hint = api.baselines.INSTALL_HINT
    metrics = result.metrics
    columns = ["", *metrics]

    def unavailable(run: api.baselines.BaselineRun) -> tuple[str, ...]:
        return (f"{run.baseline.name}: not available ({hint})", *["-"] * len(metrics))

    for scene, values in result.rows if per_sample else ():
        rows = [(model, *(values[m] for m in metrics))]
        for run in runs:
            scored = dict(run.result.rows) if run.result is not None else {}
            source = run.sources.get(scene)  # computed rows (model variants) name none
            rows.append((run.baseline.name + (f" ({source})" if source else ""),
                         *(scored[scene][m] for m in metrics)) if scene in scored
                        else unavailable(run))
        print_table(scene, columns, rows)
    rows = [(model, *(result.mean()[m] for m in metrics))]
    for run in runs:
        if run.result is not None and not run.missing:
            rows.append((run.baseline.name, *(run.result.mean()[m] for m in metrics)))
        elif run.result is None:
            rows.append(unavailable(run))
        else:
            rows.append((f"{run.baseline.name}: not available on {len(run.missing)} of "
                         f"{len(result.rows)} scenes ({hint})", *["-"] * len(metrics)))
    label = "each scene weighs the same" if result.reduction == "image_mean" else "per pixel"
    scenes = f"{len(result.rows)} scene{'s' if len(result.rows) != 1 else ''}"
    print_table(f"{result.dataset}: mean of {scenes} ({label})", columns, rows,
                caption="; ".join(run.baseline.caption for run in runs))


def _print_by_category(result: EvalResult, runs: list[api.baselines.BaselineRun], model: str,
                       per_sample: bool) -> None:
    """The model's per-sample table (``per_sample``), then one table of the means of each
    category and of all samples, with a row for the model and for each baseline (runs that
    need no OpenCV, so each has a result)."""
    if per_sample:
        print_table(f"{result.dataset}: per sample", ["sample", *result.metrics],
                    [(name, *(values[m] for m in result.metrics)) for name, values in result.rows])
    scored = [(model, result), *((run.baseline.name, run.result) for run in runs)]
    rows = []
    for category in [*result.categories, None]:
        for name, scores in scored:
            means = scores.mean() if category is None else scores.category_mean(category)
            rows.append((category or "mean", name, *(means[m] for m in result.metrics)))
    label = "each pair weighs the same" if result.reduction == "image_mean" else "per keypoint"
    print_table(f"{result.dataset}: {len(result.rows)} pairs, per category and mean ({label})",
                ["category", "method", *result.metrics], rows,
                caption="; ".join(run.baseline.caption for run in runs))


def eval_command(
    model: Annotated[str | None, typer.Option(
        "--model", help="Model name (see `crossview models`).")] = None,
    dataset: Annotated[str | None, typer.Option(
        "--dataset", help="KIND[,OPTION=VALUE...]:PATH, e.g. kitti2015:/data/KITTI2015, or a "
                          "synthetic benchmark name; --list shows the kinds.")] = None,
    weights: Annotated[Path | None, typer.Option(
        "--weights", help="Weights file (.pth/.safetensors).")] = None,
    download: options.Download = False,
    refine: options.Refine = None,
    lri: options.Lri = None,
    fuse: options.Fuse = None,
    self_fuse: options.SelfFuse = False,
    preset: options.Preset = None,
    adapt: options.Adapt = 0,
    metrics: Annotated[str | None, typer.Option(
        "--metrics", help="Comma-separated metric names; default: the benchmark's own.")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="Evaluate the first N samples only (N >= 1).")] = None,
    json_path: Annotated[Path | None, typer.Option(
        "--json", help="Also write the results as JSON here.")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:1, ...")] = "cpu",
    precision: Annotated[str, typer.Option("--precision", help="fp32, bf16 or fp16.")] = "fp32",
    per_sample: Annotated[bool, typer.Option(
        "--per-sample/--no-per-sample", help="Print the per-sample table.")] = True,
    list_kinds: Annotated[bool, typer.Option(
        "--list", help="List the dataset kinds and exit.")] = False,
) -> None:
    """Evaluate a model on a benchmark: per-sample and mean table, optional JSON."""
    # which rank prints: rank 0 of a torchrun launch (the api opens its process group)
    info = distributed.dist_info_from_env()
    if list_kinds:
        if info.is_main:
            _print_datasets()
        return
    if model is None or dataset is None:
        raise UserError("crossview eval needs --model NAME and --dataset KIND:PATH "
                        "(--list shows the dataset kinds)")
    if json_path is not None:
        check_output_file(json_path, "--json")
    columns = (bars.TextColumn("{task.description}"), bars.BarColumn(), bars.MofNCompleteColumn(),
               bars.TimeRemainingColumn())
    settings = {"model": model, "weights": None if weights is None else str(weights),
                "dataset_spec": dataset, "limit": limit}
    options = {"refine": refine, "lri": lri, "fuse": fuse, "preset": preset, "adapt": adapt,
               "self_fuse": self_fuse}
    with shown.Progress(*columns, transient=True, show=info.is_main) as progress:

        def track(label: str, total: int) -> Callable[[str], None]:
            task = progress.add_task(label, total=total)
            return lambda name: progress.step(task, name)

        def report(run: BenchmarkRun) -> None:
            progress.stop()  # the tables go below the finished bar
            adaptation = run.adaptation
            _report(run, per_sample, json_path, {
                **settings, "note": run.kind.note, **options,
                "adapt_lr": None if adaptation is None else adaptation.lr})

        api.evaluate_benchmark(
            model, dataset, weights=weights, limit=limit, device=device, precision=precision,
            download=download,
            metric_names=[m.strip() for m in metrics.split(",") if m.strip()] if metrics
            else None, progress=track, report=report, **options)


def _report(run: BenchmarkRun, per_sample: bool, json_path: Path | None,
            settings: dict[str, Any]) -> None:
    """Print the tables (and ``settings["note"]``) and write ``settings`` plus the result (and
    the baselines', a list under ``"baselines"``) to ``json_path`` (rank 0)."""
    result, baselines = run.result, run.baselines
    if baselines is None:
        _print_result(result, per_sample, settings["note"])
    elif result.categories:
        _print_by_category(result, baselines, settings["model"], per_sample)
    else:
        _print_with_baseline(result, baselines, settings["model"], per_sample)
    if json_path is not None:
        extra = {} if baselines is None else {"baselines": [b.to_dict() for b in baselines]}
        write_json(json_path, {**settings, **result.to_dict(), **extra})
        typer.echo(f"wrote {json_path}")
