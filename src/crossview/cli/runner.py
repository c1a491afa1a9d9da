"""Running a typer app the crossview way: a :class:`~crossview.errors.UserError` becomes one
line on stderr and exit code 2, with no traceback; SIGTERM ends the command as Ctrl-C does
(its clean-up runs: no staged output is left behind), with one line and exit code 143. A
command that needs a package of an optional extra that is not installed (``crossview train``
without PyYAML) says which extra to install, in one line with exit code 2; so does a command
whose outputs the storage cannot take (a full disk, a quota, a file-size limit): the outputs are
staged (:func:`crossview.output.staged_files`), so nothing half-written is left."""

from __future__ import annotations

import signal
import sys

import typer

from crossview.cli import log_handler
from crossview.console import stderr
from crossview.errors import UserError
from crossview.output import Terminated, storage_full, terminate_raises

# top-level module -> the extra of pyproject.toml that installs it
EXTRAS = {"yaml": "train", "onnx": "export", "onnxruntime": "export", "onnxscript": "export",
          "av": "video", "triton": "gpu", "gradio": "demo"}


def run_app(app: typer.Typer, argv: list[str] | None = None) -> None:
    """Run ``app`` on ``argv`` (default: the command line). Usage errors (unknown options,
    missing arguments) are typer's own, which also exit with code 2. The library's log is shown
    on stderr (:mod:`crossview.cli.log_handler`)."""
    log_handler.install()
    try:
        with terminate_raises():
            app(args=argv)
    except UserError as error:
        stderr.print(f"error: {error}", markup=False)
        sys.exit(2)
    except ModuleNotFoundError as error:
        extra = EXTRAS.get((error.name or "").partition(".")[0])
        if extra is None:
            raise
        stderr.print(f"error: this command needs the optional package {error.name!r}: "
                     f"pip install \"crossview[{extra}]\"", markup=False)
        sys.exit(2)
    except OSError as error:
        message = storage_full(error)
        if message is None:
            raise
        stderr.print(f"error: {message}", markup=False)
        sys.exit(2)
    except Terminated as stop:
        stderr.print(f"error: {stop}", markup=False)
        sys.exit(128 + signal.SIGTERM)
