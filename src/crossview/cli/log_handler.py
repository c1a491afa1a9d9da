"""What the ``crossview`` command shows of the library's log: records of the ``crossview``
logger at INFO and above, one line each on stderr, ``note: ...`` (INFO), ``warning: ...``
(WARNING) or ``error: ...`` (ERROR and above), as the command printed them before they went
through :mod:`logging`.

The handler prints through :data:`crossview.console.stderr`, which looks ``sys.stderr`` up on
every line, so output captured or redirected after installation still receives it.
"""

from __future__ import annotations

import logging

from crossview.console import stderr

LOGGER = logging.getLogger("crossview")


def cli_line(record: logging.LogRecord) -> str:
    """The line the command shows for ``record``: ``"warning: removed ..."``."""
    if record.levelno >= logging.ERROR:
        kind = "error"
    elif record.levelno >= logging.WARNING:
        kind = "warning"
    else:
        kind = "note"
    return f"{kind}: {record.getMessage()}"


class ConsoleHandler(logging.Handler):
    """Prints each record as :func:`cli_line` on :data:`crossview.console.stderr`."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stderr.print(cli_line(record), markup=False)
        except Exception:  # logging's own policy: a failing handler must not end the program
            self.handleError(record)


def install() -> None:
    """Show the ``crossview`` logger's INFO and higher records on stderr (once per process;
    a level the program set already is kept)."""
    if not any(isinstance(handler, ConsoleHandler) for handler in LOGGER.handlers):
        LOGGER.addHandler(ConsoleHandler(logging.INFO))
    if LOGGER.level == logging.NOTSET:
        LOGGER.setLevel(logging.INFO)
