"""Announcing a step that takes a while: one ``note:`` line and a live progress display.

Every step that can run for more than a few seconds (a kernel compile, an ONNX export, a
download, a dataset scan) runs inside :func:`long_step`. It logs its message at INFO on the
``crossview`` logger, which the command line shows as ``note: MESSAGE`` on stderr (a library
user sees it through :mod:`logging`), and while the step runs it shows a transient rich display
on :data:`crossview.console.stderr` when that is a terminal: a spinner with the elapsed time,
or a bar when the step says how much work it holds (``total``). Off a terminal (a pipe, a
file, a test) only the note is written.

Example (no terminal here: only the log record):
    >>> with long_step("counting to three", total=3) as advance:
    ...     for _ in range(3):
    ...         advance(1)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from crossview.console import stderr

log = logging.getLogger(__name__)


@contextlib.contextmanager
def long_step(message: str, *, total: float | None = None, logger: logging.Logger | None = None,
              after: float = 0.0) -> Iterator[Callable[[float], None]]:
    """Log ``message`` (INFO) and show a progress display while the ``with`` block runs.

    Args:
        message: what the step does, as the note says it (``"compiling the C++ kernels"``).
        total: the amount of work the block will report through the callable it gets
            (``advance(amount)``), for a bar; ``None``: a spinner (``advance`` does nothing
            visible then).
        logger: the logger of the module doing the step (default: this module's).
        after: log the note only once the step has run this many seconds (a step that is
            usually quick, such as a scan of a small folder, then says nothing; 0: at once).

    Yields:
        ``advance(amount)``: the block reports ``amount`` more work done.
    """
    note = functools.partial((logger or log).info, message)
    timer = threading.Timer(after, note) if after > 0 else None
    if timer is None:
        note()
    else:
        timer.daemon = True
        timer.start()
    columns = [SpinnerColumn(), TextColumn(message, markup=False)]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=stderr, transient=True,
                  disable=not stderr.is_terminal) as progress:
        task = progress.add_task(message, total=total)
        try:
            yield lambda amount: progress.advance(task, amount)
        finally:
            if timer is not None:
                timer.cancel()
