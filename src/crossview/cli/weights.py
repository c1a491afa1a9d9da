"""``crossview weights list | download NAME | verify | path NAME``: the published checkpoints
in the local cache (:mod:`crossview.models.published`).

``download`` is the one command that reaches the network (with ``--download`` on ``stereo``,
``flow`` and ``eval``); the others only look at the cache.
"""

from __future__ import annotations

from typing import Annotated

import typer

from crossview.cli.help_text import App
from crossview.console import stdout
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.report import print_table

api = lazy_import("crossview.api")

app = App(help="Published checkpoints by name: list, download, verify, path.",
          no_args_is_help=True)

Names = Annotated[list[str], typer.Argument(
    help="Model names with published weights (see `crossview weights list`).")]


@app.command("list")
def list_command() -> None:
    """The models with published weights, their files, whether they are downloaded and whether
    their SHA-256 is recorded (it is once the file has loaded as the model's checkpoint)."""
    rows = []
    for name in api.list_published():
        path = api.published_path(name)
        state = ((f"{path.stat().st_size / 1e6:.1f} MB", _record(name)) if path.is_file()
                 else ("not downloaded", "-"))
        rows.append((name, path.name, *state))
    print_table("published weights", ("model", "file", "size", "SHA-256"), rows,
                caption=f"cache: {api.weights_cache() / 'weights'}; fetch with `crossview weights "
                        "download NAME`")


def _record(name: str) -> str:
    """The state of the SHA-256 record of the cached ``path``, for the list."""
    try:
        recorded = api.published_recorded(name)
    except UserError:
        return "damaged record (see `crossview weights verify`)"
    return "recorded" if recorded else "not recorded (until it loads)"


@app.command("download")
def download_command(names: Names) -> None:
    """Download published weights into the cache (skipped when already there and intact)."""
    for name in names:  # every name checked before any download
        api.published_path(name)
    for name in names:
        path = api.download_published(name)
        stdout.print(f"{name.lower()}: {path}", markup=False, soft_wrap=True)


@app.command("verify")
def verify_command(names: Annotated[list[str] | None, typer.Argument(
        help="Model names (default: every downloaded checkpoint).")] = None) -> None:
    """Check that downloaded checkpoints match the SHA-256 recorded at their first download and
    load as their model's checkpoint; a damaged file is removed (exit code 2)."""
    chosen = [name.lower() for name in names or api.list_published()
              if api.published_path(name).is_file() or names]
    if not chosen:
        stdout.print(f"no published weights downloaded yet (cache: {api.weights_cache()})",
                     markup=False, soft_wrap=True)
        return
    damaged = []
    for name in chosen:
        try:
            path = api.verify_published(name)
        except UserError as error:
            damaged.append(str(error))
            continue
        stdout.print(f"ok {name}: {path}", markup=False, soft_wrap=True)
    if damaged:
        raise UserError(" | ".join(damaged))


@app.command("path")
def path_command(name: Annotated[str, typer.Argument(help="Model name.")]) -> None:
    """Where the cache keeps NAME's published weights (the place for a file fetched by hand)."""
    stdout.print(str(api.published_path(name)), markup=False, soft_wrap=True)
