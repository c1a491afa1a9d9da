"""How crossview's commands show their help: text as written, flags as flags, arguments by name.

typer's rich help reads every help text as rich markup, so ``pip install 'crossview[video]'``
would lose its ``[video]``; it keeps a docstring's line breaks in command lists, breaking lines
mid-sentence; it gives every option a type column, so a flag such as ``--save-right`` reads
``<bool>`` and invites ``--save-right true``; and its usage line writes arguments as
``{left} {right}``. Every typer app of the CLI is therefore an :class:`App`, whose groups and
commands are the :class:`Group` and :class:`Command` below: help texts are escaped and their
paragraphs joined once, when a command is built; flags show no type; arguments are written
``LEFT RIGHT`` (an optional one ``[FRAME1]``, a repeatable one ``NAMES...``) in the usage line,
the arguments panel and usage errors alike.
"""

from __future__ import annotations

import inspect
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


def _as_written(text: str | None) -> str | None:
    """``text`` escaped for rich markup, its paragraphs' source line breaks joined (typer's
    rich help keeps them in command lists, where they break lines mid-sentence)."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return escape("\n\n".join(" ".join(line.strip() for line in paragraph.split("\n"))
                              for paragraph in paragraphs))


class _AsWritten:
    """What commands and groups share: on construction the help texts of the command and of
    its parameters are escaped (shown as written), flags get an empty metavar (no type column)
    and arguments their name in capitals; ``--help`` is a flag too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = _as_written(self.help)
        self.short_help = _as_written(self.short_help)
        for param in self.params:
            if isinstance(param, TyperOption | TyperArgument):
                param.help = _as_written(param.help)
            if isinstance(param, TyperOption) and (param.is_flag or param.count):
                param.metavar = ""
            if isinstance(param, TyperArgument) and param.metavar is None:
                param.metavar = param.name.upper()

    def get_help_option(self, ctx: typer.Context) -> TyperOption | None:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class Command(_AsWritten, TyperCommand):
    """A command whose help shows its texts as written, flags as flags and arguments as
    ``LEFT RIGHT``."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        """``[OPTIONS] LEFT RIGHT``: required arguments bare, optional ones in brackets."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar + ("..." if param.nargs != 1 else "")
                pieces.append(name if param.required else f"[{name}]")
        return pieces


class Group(_AsWritten, TyperGroup):
    """A command group whose help shows its texts as written and ``--help`` as a flag."""


class App(typer.Typer):
    """A typer app whose groups are :class:`Group` (or ``cls``, a subclass) and whose commands
    are :class:`Command`."""

    def __init__(self, *, cls: type[Group] = Group, **kwargs: Any) -> None:
        super().__init__(cls=cls, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        return super().command(*args, cls=Command, **kwargs)
