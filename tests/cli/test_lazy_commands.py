"""Lazy commands: ``crossview --help`` reads no command module, ``crossview COMMAND --help``
only that command's, and what the root help lists for a command is its own help's first
paragraph."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
import typer

from crossview.cli.app import COMMANDS, app
from crossview.cli.lazy_commands import LazyCommand

# the crossview modules a bare `crossview --help` needs: the root app, its help style and runner
ROOT_MODULES = {"crossview", "crossview.cli", "crossview.cli.app", "crossview.cli.help_text",
                "crossview.cli.lazy_commands", "crossview.cli.runner",
                "crossview.cli.log_handler", "crossview.console", "crossview.errors",
                "crossview.lazy", "crossview.output"}


def _modules_after_help(command: list[str]) -> tuple[set[str], set[str]]:
    """``(crossview modules, other modules)`` that ``crossview COMMAND --help`` imports beyond
    what typer's rich help itself loads."""
    script = ("import sys\nimport typer.main, typer.rich_utils\nbefore = set(sys.modules)\n"
              "from crossview.cli.app import main\ntry:\n"
              f"    main({[*command, '--help']!r})\nexcept SystemExit as done:\n"
              "    assert done.code == 0, done.code\n"
              "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, env={**os.environ, "COLUMNS": "80"})
    added = set(done.stdout.strip().splitlines()[-1].split())
    ours = {name for name in added if name.split(".")[0] == "crossview"}
    return ours, added - ours


# what `crossview --help` must not wait for (seconds of imports together); what else typer, rich
# and the standard library load depends on their versions, and is not counted
HEAVY_PACKAGES = {"torch", "numpy", "PIL", "cv2", "matplotlib", "scipy", "skimage", "safetensors",
                  "yaml", "onnx", "onnxruntime", "av", "triton", "gradio"}


def test_root_help_imports_no_command_module_and_no_heavy_package() -> None:
    ours, others = _modules_after_help([])
    assert ours == ROOT_MODULES
    assert not {name.split(".")[0] for name in others} & HEAVY_PACKAGES, sorted(others)


@pytest.mark.parametrize("name", ["stereo", "bench", "models"])
def test_command_help_imports_that_command_only(name: str) -> None:
    ours, _ = _modules_after_help([name])
    others = {command.module for other, command in COMMANDS.items() if other != name}
    assert COMMANDS[name].module in ours and not ours & others, sorted(ours)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_summary_is_the_first_paragraph_of_the_command_help(name: str) -> None:
    root = typer.main.get_command(app)
    context = typer.Context(root)
    with root.listing():
        listed = root.get_command(context, name).help
    built = root.get_command(context, name).help
    assert listed == inspect.cleandoc(built).split("\n\n")[0]


def test_a_command_is_built_once_and_only_when_looked_up(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    loads = []
    monkeypatch.setattr(LazyCommand, "load", lambda self, name: loads.append(name) or name)
    root = typer.main.get_command(app)
    context = typer.Context(root)
    assert root.list_commands(context) == list(COMMANDS) and loads == []
    assert root.get_command(context, "models") == root.get_command(context, "models") == "models"
    assert loads == ["models"]
