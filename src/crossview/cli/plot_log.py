"""``crossview plot-log LOG``: draw a training run's curves into a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.lazy import lazy_import

api = lazy_import("crossview.api")


def plot_log_command(
    log: Annotated[Path, typer.Argument(help="A run's log.jsonl (or its run directory).")],
    out: Annotated[Path | None, typer.Option(
        "-o", "--out", help="PNG to write (default: curves.png next to the log).")] = None,
    title: Annotated[str | None, typer.Option(help="Figure title.")] = None,
) -> None:
    """Plot loss terms, learning rate and validation metrics of a training log."""
    if log.is_dir():
        log = log / "log.jsonl"
    written = api.plot_log(log, out or log.with_name("curves.png"), title=title)
    typer.echo(f"wrote {written}")
