"""``crossview weights list | download NAME | verify | path NAME``: the published checkpoints
in the local cache (:mod:`crossview.models.published`).

``download`` is the one command that reaches the network (with ``--download`` on ``stereo``,
``flow`` and ``eval``); the others only look at the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.cli.help_text import App
from crossview.console import stdout
from crossview.errors import UserError
from crossview.models import published, registry
from crossview.report import print_table

app = App(help="Published checkpoints by name: list, download, verify, path.",
          no_args_is_help=True)

Names = Annotated[list[str], typer.Argument(
    help="Model names with published weights (see `crossview weights list`).")]


def _spec(name: str) -> registry.ModelSpec:
    """The spec of model ``name``, which has published weights; a :class:`UserError` listing
    the names that have some otherwise."""
    if name.lower() not in registry.list_published():
        raise UserError(f"no published weights named {name!r}; choose one of: "
                        f"{', '.join(registry.list_published())}")
    return registry.get_spec(name)


@app.command("list")
def list_command() -> None:
    """The models with published weights, their files, whether they are downloaded and whether
    their SHA-256 is recorded (it is once the file has loaded as the model's checkpoint)."""
    rows = []
    for name in registry.list_published():
        path = published.cached_path(registry.get_spec(name).published)
        state = ((f"{path.stat().st_size / 1e6:.1f} MB", _record(path, name)) if path.is_file()
                 else ("not downloaded", "-"))
        rows.append((name, path.name, *state))
    print_table("published weights", ("model", "file", "size", "SHA-256"), rows,
                caption=f"cache: {published.home() / 'weights'}; fetch with `crossview weights "
                        "download NAME`")


def _record(path: Path, name: str) -> str:
    """The state of the SHA-256 record of the cached ``path``, for the list."""
    try:
        recorded = published.recorded_digest(path, name)
    except UserError:
        return "damaged record (see `crossview weights verify`)"
    return "recorded" if recorded else "not recorded (until it loads)"


@app.command("download")
def download_command(names: Names) -> None:
    """Download published weights into the cache (skipped when already there and intact)."""
    specs = [_spec(name) for name in names]  # every name checked before any download
    for spec in specs:
        path = spec.weights_file(published.NAME, download=True)
        stdout.print(f"{spec.name}: {path}", markup=False, soft_wrap=True)


@app.command("verify")
def verify_command(names: Annotated[list[str] | None, typer.Argument(
        help="Model names (default: every downloaded checkpoint).")] = None) -> None:
    """Check that downloaded checkpoints match the SHA-256 recorded at their first download and
    load as their model's checkpoint; a damaged file is removed (exit code 2)."""
    specs = [_spec(name) for name in names or registry.list_published()]
    chosen = specs if names else [s for s in specs if published.cached_path(s.published).is_file()]
    if not chosen:
        stdout.print(f"no published weights downloaded yet (cache: {published.home()})",
                     markup=False, soft_wrap=True)
        return
    damaged = []
    for spec in chosen:
        try:
            path = published.verify(spec.name, spec.published, spec.create, load=True)
        except UserError as error:
            damaged.append(str(error))
            continue
        stdout.print(f"ok {spec.name}: {path}", markup=False, soft_wrap=True)
    if damaged:
        raise UserError(" | ".join(damaged))


@app.command("path")
def path_command(name: Annotated[str, typer.Argument(help="Model name.")]) -> None:
    """Where the cache keeps NAME's published weights (the place for a file fetched by hand)."""
    stdout.print(str(published.cached_path(_spec(name).published)), markup=False, soft_wrap=True)
