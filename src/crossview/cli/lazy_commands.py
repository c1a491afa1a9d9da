"""Commands whose modules load only when they run, so that ``crossview --help`` reads no command
module: it needs typer, rich and the root app alone.

The root group knows each command by name, by the module and attribute that declare it (a
command function or a typer app of subcommands) and by its one-line summary. Listing the
commands (``crossview --help``) shows the summaries; running one, or asking for its own help
(``crossview stereo --help``), imports its module and builds that command alone. A test holds
each summary to the first paragraph of the command's own help.

Example:
    >>> commands = {"models": LazyCommand("crossview.cli.models", "models_command",
    ...                                   "List the models that --model takes.")}
    >>> group = lazy_group(commands)  # a Group class for App(cls=...)
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.main

from crossview.cli.help_text import App, Command, Group


@dataclass(frozen=True)
class LazyCommand:
    """A command declared by ``module.attribute`` (a command function or a typer app), listed
    as ``summary`` without importing ``module``."""

    module: str
    attribute: str
    summary: str

    def load(self, name: str) -> typer.core.TyperCommand | typer.core.TyperGroup:
        """The command ``name``, built from its module (imported here)."""
        target = getattr(importlib.import_module(self.module), self.attribute)
        if isinstance(target, typer.Typer):
            command = typer.main.get_group(target)
        else:
            single = App(add_completion=False)
            single.command(name)(target)
            command = typer.main.get_command(single)
        command.name = name
        return command


class LazyGroup(Group):
    """A group whose commands are :class:`LazyCommand` s (``lazy``, set by :func:`lazy_group`).
    Until a command is looked up to run, the group holds a stand-in that carries its name and
    summary (what the help lists and a mistyped name is matched against); the lookup builds
    the command, once."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listing = False
        self._standing_in = set(self.lazy)
        for name, command in self.lazy.items():
            self.commands[name] = Command(name=name, help=command.summary)

    def get_command(self, ctx: typer.Context, name: str) -> Any:
        if name in self._standing_in and not self._listing:
            self._standing_in.remove(name)
            self.commands[name] = self.lazy[name].load(name)
        return super().get_command(ctx, name)

    @contextmanager
    def listing(self) -> Iterator[None]:
        """Within: a lookup gives a command not yet built as its stand-in (name and summary)."""
        self._listing = True
        try:
            yield
        finally:
            self._listing = False

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        """The group's help; its command list shows the summaries (no command module loads)."""
        with self.listing():
            super().format_help(ctx, formatter)


def lazy_group(commands: dict[str, LazyCommand]) -> type[LazyGroup]:
    """A :class:`LazyGroup` class whose commands are ``commands`` (name -> command), in order."""
    return type("CommandsGroup", (LazyGroup,), {"lazy": dict(commands)})
