"""The root typer app and the entry point that turns user errors into exit code 2.

Each command (group) lives in its own module of this package, named below with the summary
``crossview --help`` lists; that module loads only when the command runs
(:mod:`crossview.cli.lazy_commands`).
"""

from __future__ import annotations

import typer

from crossview import __version__
from crossview.cli.help_text import App
from crossview.cli.lazy_commands import LazyCommand, lazy_group
from crossview.cli.runner import run_app

# name -> where the command is declared and what `crossview --help` lists for it (the first
# paragraph of its own help); its module loads when it runs
COMMANDS = {
    "eval": LazyCommand("crossview.cli.eval", "eval_command",
                        "Evaluate a model on a benchmark: per-sample and mean table, optional "
                        "JSON."),
    "match": LazyCommand("crossview.cli.match", "match_command",
                         "Transfer keypoints from SRC to TGT (semantic correspondence) and draw "
                         "the matches."),
    "models": LazyCommand("crossview.cli.models", "models_command",
                          "List the models that --model takes: task, parameters, default "
                          "weights, licence and the command each is the default of."),
    "stereo": LazyCommand("crossview.cli.stereo", "stereo_command",
                          "Estimate disparity for LEFT/RIGHT pairs (files, directories or glob "
                          "patterns), for the frames of two videos or of one side-by-side video "
                          "(--side-by-side; pip install 'crossview[video]'), or for two folders "
                          "of frames."),
    "rectify": LazyCommand("crossview.cli.rectify", "rectify_command",
                           "Rectify LEFT/RIGHT, from a rig calibration (--calib) or from the "
                           "photographs' own matches; writes left.png, right.png and calib.txt "
                           "or rectification.json."),
    "flow": LazyCommand("crossview.cli.flow", "flow_command",
                        "Estimate optical flow for FRAME0/FRAME1 pairs (files, directories or "
                        "glob patterns), for the consecutive frames of one video file (pip "
                        "install 'crossview[video]') or of one folder of frames."),
    "train": LazyCommand("crossview.cli.train", "train_command",
                         "Train a model; checkpoints, log.jsonl and best.pt go to "
                         "train.out_dir."),
    "plot-log": LazyCommand("crossview.cli.plot_log", "plot_log_command",
                            "Plot loss terms, learning rate and validation metrics of a "
                            "training log."),
    "bench": LazyCommand("crossview.cli.bench", "app",
                         "Speed and memory benchmarks (tables + JSON)."),
    "experiment": LazyCommand("crossview.cli.experiment", "app",
                              "Reproducible experiments (results JSON, table, plot)."),
    "export": LazyCommand("crossview.cli.export", "app", "Export models to other runtimes."),
    "weights": LazyCommand("crossview.cli.weights", "app",
                           "Published checkpoints by name: list, download, verify, path."),
    "demo": LazyCommand("crossview.cli.demo", "demo_command",
                        "Serve a local web page (pip install \"crossview[demo]\") to try "
                        "stereo, flow and matching on your own images, offline."),
}

app = App(
    name="crossview",
    help="Cross-view matching with attention: stereo, optical flow and semantic correspondence.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=lazy_group(COMMANDS),
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


def main(argv: list[str] | None = None) -> None:
    """Run the CLI (:func:`crossview.cli.runner.run_app`): a :class:`UserError` becomes one
    line on stderr and exit code 2; usage errors are typer's, also exit code 2."""
    run_app(app, argv)
