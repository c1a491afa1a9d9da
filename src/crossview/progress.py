"""The progress of a long run on stderr: a live bar on a terminal, plain lines elsewhere.

rich draws its live display on a terminal only; in a log file, under CI or in a notebook it
shows nothing, and a run over many pairs or steps would look stuck. :class:`Progress` is rich's
progress display on :data:`crossview.console.stderr` that, off a terminal, prints a line
instead each time the caller reports work with :meth:`Progress.line` or :meth:`Progress.step`
(the caller chooses how often: every pair, every logged training step):
``DESCRIPTION DONE/TOTAL: NOTE (SECONDS s)``, the seconds being those of the units done since
the task's previous line (per unit, ``s each``, when there were several).

Example (no terminal here: stderr gets the line ``pair 1/2: a.png``):
    >>> with Progress() as progress:
    ...     task = progress.add_task("pair", total=2)
    ...     progress.step(task, "a.png", timed=False)
"""

from __future__ import annotations

import time
from typing import Any

from rich import progress as bars

from crossview.console import stderr


class Progress(bars.Progress):
    """A rich progress display on :data:`crossview.console.stderr`, shown on a terminal; off
    one, :meth:`line` prints plain lines. ``show=False``: neither (another rank reports the
    run, or the caller asked for quiet). ``columns`` and ``options`` as rich takes them."""

    def __init__(self, *columns: str | bars.ProgressColumn, show: bool = True,
                 **options: Any) -> None:
        self.plain = show and not stderr.is_terminal
        super().__init__(*columns, console=stderr, disable=not show or self.plain, **options)
        self._marks: dict[bars.TaskID, tuple[float, float]] = {}  # time and units of the last line

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> bars.TaskID:
        """rich's ``add_task``; the task's first line times the units from now."""
        task = super().add_task(description, *args, **kwargs)
        self._marks[task] = (time.perf_counter(), self._tasks[task].completed)
        return task

    def step(self, task: bars.TaskID, note: str, *, timed: bool = True) -> None:
        """Advance ``task`` by one unit, then :meth:`line` ``note``."""
        self.advance(task)
        self.line(task, note, timed=timed)

    def line(self, task: bars.TaskID, note: str, *, timed: bool = True) -> None:
        """Off a terminal: print ``DESCRIPTION DONE/TOTAL: NOTE`` for ``task`` (``DONE`` alone
        when its total is unknown), then, if ``timed`` and units were done since its previous
        line, `` (S s)``: their seconds (per unit, ``s each``, for several). Nothing on a
        terminal, where the bar shows the progress."""
        if not self.plain:
            return
        state = self._tasks[task]
        now, done = time.perf_counter(), state.completed
        since, before = self._marks[task]
        self._marks[task] = (now, done)
        count = f"{int(done)}" + (f"/{int(state.total)}" if state.total else "")
        timing = ""
        if timed and done > before:
            units = done - before
            timing = (f" ({now - since:.1f} s)" if units == 1
                      else f" ({(now - since) / units:.2g} s each)")
        stderr.print(f"{state.description} {count}: {note}{timing}", markup=False,
                     soft_wrap=True)
