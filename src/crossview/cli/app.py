"""The root typer app and the entry point that turns user errors into exit code 2.

Each command (group) lives in its own module of this package and is registered below.
"""

from __future__ import annotations

import typer

from crossview import __version__
from crossview.cli import bench, experiment, export, weights
from crossview.cli.eval import eval_command
from crossview.cli.flow import flow_command
from crossview.cli.help_text import App
from crossview.cli.match import match_command
from crossview.cli.models import models_command
from crossview.cli.plot_log import plot_log_command
from crossview.cli.rectify import rectify_command
from crossview.cli.runner import run_app
from crossview.cli.stereo import stereo_command
from crossview.cli.train import train_command

app = App(
    name="crossview",
    help="Cross-view matching with attention: stereo, optical flow and semantic correspondence.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"crossview {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """Cross-view matching with attention: stereo, optical flow and semantic correspondence."""


app.add_typer(bench.app, name="bench")
app.add_typer(experiment.app, name="experiment")
app.add_typer(export.app, name="export")
app.add_typer(weights.app, name="weights")
app.command("eval")(eval_command)
app.command("match")(match_command)
app.command("models")(models_command)
app.command("stereo")(stereo_command)
app.command("rectify")(rectify_command)
app.command("flow")(flow_command)
app.command("train")(train_command)
app.command("plot-log")(plot_log_command)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI (:func:`crossview.cli.runner.run_app`): a :class:`UserError` becomes one
    line on stderr and exit code 2; usage errors are typer's, also exit code 2."""
    run_app(app, argv)
