"""The rich consoles every command prints through: :data:`stdout` for results, :data:`stderr`
for progress bars, warnings and errors.

Markup highlighting is off (paths and numbers are printed as written); ``stderr`` soft-wraps
so that a long error stays one line that a script can read.

Output works at any width the environment claims: rich takes ``COLUMNS=0`` at its word and
prints nothing at all (not even an error), and squeezes a table's cells to nothing on a very
narrow terminal. A width of 0 means "unknown" here, as it does to
``shutil.get_terminal_size`` (rich then uses :data:`DEFAULT_WIDTH`, its own width for a pipe),
and a width below :data:`MIN_WIDTH` is raised to it (the terminal wraps the longer lines).
"""

from __future__ import annotations

from rich.console import Console, ConsoleDimensions

DEFAULT_WIDTH = 80  # rich's width where neither $COLUMNS nor the terminal says
MIN_WIDTH = 40  # below this a table's cells get too narrow to show anything


class _Console(Console):
    """A rich console whose width is never 0 nor below :data:`MIN_WIDTH`."""

    def _size(self) -> ConsoleDimensions:
        width, height = Console.size.fget(self)
        return ConsoleDimensions(max(width or DEFAULT_WIDTH, MIN_WIDTH), height)

    size = property(_size, Console.size.fset)


stdout = _Console(highlight=False)
stderr = _Console(stderr=True, highlight=False, soft_wrap=True)
