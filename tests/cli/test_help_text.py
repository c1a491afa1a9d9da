"""Help as written: brackets survive, flags read as flags, arguments as ``LEFT RIGHT``, on every
command of the CLI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer

from cli_runner import run_cli
from crossview.cli.app import app


def _commands(command: typer.core.TyperGroup, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[str, ...]]:
    """Every command path below ``command``; a lazy command is built on the way
    (:mod:`crossview.cli.lazy_commands`)."""
    yield path
    if isinstance(command, typer.core.TyperGroup):
        context = typer.Context(command)
        for name in command.list_commands(context):
            yield from _commands(command.get_command(context, name), (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _help(args: list[str], capsys: pytest.CaptureFixture[str],
          monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping inside the words looked for
    code, out, err = run_cli([*args, "--help"], capsys)
    assert code == 0, err
    return out


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "crossview")
def test_every_help_shows_flags_without_a_type_and_arguments_by_name(
        path: tuple[str, ...], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = _help(list(path), capsys, monkeypatch)
    assert "<bool>" not in out  # a flag takes no value: `--save-right true` is not a thing
    usage = next(line for line in out.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage


@pytest.mark.parametrize(("args", "text"), [
    (["flow"], "(pip install 'crossview[video]')"),
    (["bench", "model"], "pip install 'crossview[gpu]';"),
    (["bench", "attention"], "'crossview[gpu]'"),
    (["stereo"], "--save-right Also write the right view's disparity and mask."),
    (["stereo"], "Usage: "),
])
def test_help_shows_text_as_written(args: list[str], text: str,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = " ".join(_help(args, capsys, monkeypatch).replace("│", " ").split())
    assert text in out, out


@pytest.mark.parametrize(("args", "usage"), [
    (["stereo"], " stereo [OPTIONS] LEFT [RIGHT]"),
    (["flow"], " flow [OPTIONS] FRAME0 [FRAME1]"),
    (["match"], " match [OPTIONS] SRC TGT"),
    (["weights", "download"], " weights download [OPTIONS] NAMES..."),
    (["weights", "verify"], " weights verify [OPTIONS] [NAMES...]"),
])
def test_usage_names_the_arguments(args: list[str], usage: str,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = _help(args, capsys, monkeypatch)
    assert any(line.strip().endswith(usage) for line in out.splitlines()), out


def test_a_missing_argument_is_named_as_in_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["stereo"], capsys)
    assert code == 2 and out == "" and "Missing argument 'LEFT'." in err, err


def test_weights_help_names_its_commands_on_one_line_each(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out = _help(["weights"], capsys, monkeypatch)
    assert "list, download, verify, path." in out and "locate" not in out
    # a docstring's line breaks do not break the command list mid-sentence
    assert any("recorded at their first download and load as" in line
               for line in out.splitlines()), out
